from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.machine_spec import MachineSpec
    from ..models.template_meta import TemplateMeta


T = TypeVar("T", bound="MachineTemplate")


@_attrs_define
class MachineTemplate:
    """
    Attributes:
        spec (MachineSpec): A Machine: a VM (`spec.image`) or a sandbox (`spec.sandbox`).
        metadata (None | TemplateMeta | Unset):
    """

    spec: MachineSpec
    metadata: None | TemplateMeta | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.template_meta import TemplateMeta

        spec = self.spec.to_dict()

        metadata: dict[str, Any] | None | Unset
        if isinstance(self.metadata, Unset):
            metadata = UNSET
        elif isinstance(self.metadata, TemplateMeta):
            metadata = self.metadata.to_dict()
        else:
            metadata = self.metadata

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "spec": spec,
            }
        )
        if metadata is not UNSET:
            field_dict["metadata"] = metadata

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.machine_spec import MachineSpec
        from ..models.template_meta import TemplateMeta

        d = dict(src_dict)
        spec = MachineSpec.from_dict(d.pop("spec"))

        def _parse_metadata(data: object) -> None | TemplateMeta | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                metadata_type_0 = TemplateMeta.from_dict(data)

                return metadata_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | TemplateMeta | Unset, data)

        metadata = _parse_metadata(d.pop("metadata", UNSET))

        machine_template = cls(
            spec=spec,
            metadata=metadata,
        )

        machine_template.additional_properties = d
        return machine_template

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
