from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.kairon_template_api_version import KaironTemplateApiVersion
from ..models.kairon_template_kind import KaironTemplateKind
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.kairon_template_spec import KaironTemplateSpec
    from ..models.kairon_template_status import KaironTemplateStatus
    from ..models.kind_object_meta import KindObjectMeta


T = TypeVar("T", bound="KaironTemplate")


@_attrs_define
class KaironTemplate:
    """
    Attributes:
        metadata (KindObjectMeta): The metadata of a Machine, MachinePool, MachineClaim or KaironTemplate: its name is a
            DNS label, and required
        spec (KaironTemplateSpec): A namespace's own sandbox template: an image plus build steps.
        api_version (KaironTemplateApiVersion | Unset): Filled in when omitted.
        kind (KaironTemplateKind | Unset): `KaironTemplate` (filled in when omitted).
        status (KaironTemplateStatus | None | Unset):
    """

    metadata: KindObjectMeta
    spec: KaironTemplateSpec
    api_version: KaironTemplateApiVersion | Unset = UNSET
    kind: KaironTemplateKind | Unset = UNSET
    status: KaironTemplateStatus | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.kairon_template_status import KaironTemplateStatus

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
        elif isinstance(self.status, KaironTemplateStatus):
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
        from ..models.kairon_template_spec import KaironTemplateSpec
        from ..models.kairon_template_status import KaironTemplateStatus
        from ..models.kind_object_meta import KindObjectMeta

        d = dict(src_dict)
        metadata = KindObjectMeta.from_dict(d.pop("metadata"))

        spec = KaironTemplateSpec.from_dict(d.pop("spec"))

        _api_version = d.pop("apiVersion", UNSET)
        api_version: KaironTemplateApiVersion | Unset
        if isinstance(_api_version, Unset):
            api_version = UNSET
        else:
            api_version = KaironTemplateApiVersion(_api_version)

        _kind = d.pop("kind", UNSET)
        kind: KaironTemplateKind | Unset
        if isinstance(_kind, Unset):
            kind = UNSET
        else:
            kind = KaironTemplateKind(_kind)

        def _parse_status(data: object) -> KaironTemplateStatus | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                status_type_0 = KaironTemplateStatus.from_dict(data)

                return status_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(KaironTemplateStatus | None | Unset, data)

        status = _parse_status(d.pop("status", UNSET))

        kairon_template = cls(
            metadata=metadata,
            spec=spec,
            api_version=api_version,
            kind=kind,
            status=status,
        )

        kairon_template.additional_properties = d
        return kairon_template

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
