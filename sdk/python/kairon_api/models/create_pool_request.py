from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.create_vm_request import CreateVmRequest


T = TypeVar("T", bound="CreatePoolRequest")


@_attrs_define
class CreatePoolRequest:
    """`POST /v1/pools`: keep `size` members booted and Paused, ready for an instant claim.

    Attributes:
        name (str):
        size (int):
        template (CreateVmRequest): What to run: the runtime fields of a Machine spec. Pools take it as their template.
    """

    name: str
    size: int
    template: CreateVmRequest
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        name = self.name

        size = self.size

        template = self.template.to_dict()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "name": name,
                "size": size,
                "template": template,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.create_vm_request import CreateVmRequest

        d = dict(src_dict)
        name = d.pop("name")

        size = d.pop("size")

        template = CreateVmRequest.from_dict(d.pop("template"))

        create_pool_request = cls(
            name=name,
            size=size,
            template=template,
        )

        create_pool_request.additional_properties = d
        return create_pool_request

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
