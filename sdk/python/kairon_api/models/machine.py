from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.machine_api_version import MachineApiVersion
from ..models.machine_kind import MachineKind
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.kind_object_meta import KindObjectMeta
    from ..models.machine_spec import MachineSpec
    from ..models.machine_status import MachineStatus


T = TypeVar("T", bound="Machine")


@_attrs_define
class Machine:
    """
    Attributes:
        metadata (KindObjectMeta): The metadata of a Machine, MachinePool, MachineClaim or KaironTemplate: its name is a
            DNS label, and required
        spec (MachineSpec): A Machine: a VM (`spec.image`) or a sandbox (`spec.sandbox`).
        api_version (MachineApiVersion | Unset): Filled in when omitted.
        kind (MachineKind | Unset): `Machine` (filled in when omitted).
        status (MachineStatus | None | Unset):
    """

    metadata: KindObjectMeta
    spec: MachineSpec
    api_version: MachineApiVersion | Unset = UNSET
    kind: MachineKind | Unset = UNSET
    status: MachineStatus | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.machine_status import MachineStatus

        metadata = self.metadata.to_dict()

        spec = self.spec.to_dict()

        api_version: str | Unset = UNSET
        if not isinstance(self.api_version, Unset):
            api_version = self.api_version.value

        kind: str | Unset = UNSET
        if not isinstance(self.kind, Unset):
            kind = self.kind.value

        status: dict[str, Any] | None | Unset
        if isinstance(self.status, Unset):
            status = UNSET
        elif isinstance(self.status, MachineStatus):
            status = self.status.to_dict()
        else:
            status = self.status

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "metadata": metadata,
                "spec": spec,
            }
        )
        if api_version is not UNSET:
            field_dict["apiVersion"] = api_version
        if kind is not UNSET:
            field_dict["kind"] = kind
        if status is not UNSET:
            field_dict["status"] = status

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.kind_object_meta import KindObjectMeta
        from ..models.machine_spec import MachineSpec
        from ..models.machine_status import MachineStatus

        d = dict(src_dict)
        metadata = KindObjectMeta.from_dict(d.pop("metadata"))

        spec = MachineSpec.from_dict(d.pop("spec"))

        _api_version = d.pop("apiVersion", UNSET)
        api_version: MachineApiVersion | Unset
        if isinstance(_api_version, Unset):
            api_version = UNSET
        else:
            api_version = MachineApiVersion(_api_version)

        _kind = d.pop("kind", UNSET)
        kind: MachineKind | Unset
        if isinstance(_kind, Unset):
            kind = UNSET
        else:
            kind = MachineKind(_kind)

        def _parse_status(data: object) -> MachineStatus | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                status_type_0 = MachineStatus.from_dict(data)

                return status_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(MachineStatus | None | Unset, data)

        status = _parse_status(d.pop("status", UNSET))

        machine = cls(
            metadata=metadata,
            spec=spec,
            api_version=api_version,
            kind=kind,
            status=status,
        )

        machine.additional_properties = d
        return machine

    @property
    def additional_keys(self) -> list[str]:
        return list(self.additional_properties.keys())

    def __getitem__(self, key: str) -> Any:
        return self.additional_properties[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.additional_properties[key] = value

    def __delitem__(self, key: str) -> None:
        del self.additional_properties[key]

    def __contains__(self, key: str) -> bool:
        return key in self.additional_properties
