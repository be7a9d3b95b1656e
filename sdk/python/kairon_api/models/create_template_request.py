from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="CreateTemplateRequest")


@_attrs_define
class CreateTemplateRequest:
    """
    Attributes:
        image_ref (str):
        name (str):
        steps (list[str] | Unset): Shell commands (`/bin/sh -c`) run in order, as root, in a sandbox of the pulled image
            with the node's guest network and egress policy; what they change becomes the
            template's top layer. A step that exits non-zero fails the build with its output.
    """

    image_ref: str
    name: str
    steps: list[str] | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        image_ref = self.image_ref

        name = self.name

        steps: list[str] | Unset = UNSET
        if not isinstance(self.steps, Unset):
            steps = self.steps

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "imageRef": image_ref,
                "name": name,
            }
        )
        if steps is not UNSET:
            field_dict["steps"] = steps

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        image_ref = d.pop("imageRef")

        name = d.pop("name")

        steps = cast(list[str], d.pop("steps", UNSET))

        create_template_request = cls(
            image_ref=image_ref,
            name=name,
            steps=steps,
        )

        create_template_request.additional_properties = d
        return create_template_request

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
