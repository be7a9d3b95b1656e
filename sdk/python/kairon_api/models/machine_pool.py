from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.machine_pool_api_version import MachinePoolApiVersion
from ..models.machine_pool_kind import MachinePoolKind
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.kind_object_meta import KindObjectMeta
    from ..models.machine_pool_spec import MachinePoolSpec
    from ..models.machine_pool_status import MachinePoolStatus


T = TypeVar("T", bound="MachinePool")


@_attrs_define
class MachinePool:
    """
    Attributes:
        metadata (KindObjectMeta): The metadata of a Machine, MachinePool, MachineClaim or KaironTemplate: its name is a
            DNS label, and required
        spec (MachinePoolSpec): Keeps `replicas` warm members, Running or Paused, for MachineClaims to take.
        api_version (MachinePoolApiVersion | Unset): Filled in when omitted.
        kind (MachinePoolKind | Unset): `MachinePool` (filled in when omitted).
        status (MachinePoolStatus | None | Unset):
    """

    metadata: KindObjectMeta
    spec: MachinePoolSpec
    api_version: MachinePoolApiVersion | Unset = UNSET
    kind: MachinePoolKind | Unset = UNSET
    status: MachinePoolStatus | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.machine_pool_status import MachinePoolStatus

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
        elif isinstance(self.status, MachinePoolStatus):
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
        from ..models.machine_pool_spec import MachinePoolSpec
        from ..models.machine_pool_status import MachinePoolStatus

        d = dict(src_dict)
        metadata = KindObjectMeta.from_dict(d.pop("metadata"))

        spec = MachinePoolSpec.from_dict(d.pop("spec"))

        _api_version = d.pop("apiVersion", UNSET)
        api_version: MachinePoolApiVersion | Unset
        if isinstance(_api_version, Unset):
            api_version = UNSET
        else:
            api_version = MachinePoolApiVersion(_api_version)

        _kind = d.pop("kind", UNSET)
        kind: MachinePoolKind | Unset
        if isinstance(_kind, Unset):
            kind = UNSET
        else:
            kind = MachinePoolKind(_kind)

        def _parse_status(data: object) -> MachinePoolStatus | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                status_type_0 = MachinePoolStatus.from_dict(data)

                return status_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(MachinePoolStatus | None | Unset, data)

        status = _parse_status(d.pop("status", UNSET))

        machine_pool = cls(
            metadata=metadata,
            spec=spec,
            api_version=api_version,
            kind=kind,
            status=status,
        )

        machine_pool.additional_properties = d
        return machine_pool

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
