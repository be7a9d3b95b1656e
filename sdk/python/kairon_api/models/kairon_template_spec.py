from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="KaironTemplateSpec")


@_attrs_define
class KaironTemplateSpec:
    """A namespace's own sandbox template: an image plus build steps.

    Attributes:
        image (str): The OCI image to start from, e.g. `docker.io/library/python:3.12-slim`. A registry the
            node's config does not name is reached under the node's egress policy: never at a private
            address.
        steps (list[str] | Unset): Shell commands (`/bin/sh -c`) run in order as root over the image, with the node's
            guest
            network; what they change becomes the template's top layer.
    """

    image: str
    steps: list[str] | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        image = self.image

        steps: list[str] | Unset = UNSET
        if not isinstance(self.steps, Unset):
            steps = self.steps

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "image": image,
            }
        )
        if steps is not UNSET:
            field_dict["steps"] = steps

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        image = d.pop("image")

        steps = cast(list[str], d.pop("steps", UNSET))

        kairon_template_spec = cls(
            image=image,
            steps=steps,
        )

        kairon_template_spec.additional_properties = d
        return kairon_template_spec

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
