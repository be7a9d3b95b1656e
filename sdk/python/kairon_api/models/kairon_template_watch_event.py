from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.watch_event_type import WatchEventType

if TYPE_CHECKING:
    from ..models.kairon_template import KaironTemplate


T = TypeVar("T", bound="KaironTemplateWatchEvent")


@_attrs_define
class KaironTemplateWatchEvent:
    """
    Attributes:
        object_ (KaironTemplate):
        type_ (WatchEventType): What changed in a watch: `ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK` (only a version), or
            `ERROR` (the object is then a `Status`; code 410: the version is too old, watch again without one).
    """

    object_: KaironTemplate
    type_: WatchEventType
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        object_ = self.object_.to_dict()

        type_ = self.type_.value

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "object": object_,
                "type": type_,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.kairon_template import KaironTemplate

        d = dict(src_dict)
        object_ = KaironTemplate.from_dict(d.pop("object"))

        type_ = WatchEventType(d.pop("type"))

        kairon_template_watch_event = cls(
            object_=object_,
            type_=type_,
        )

        kairon_template_watch_event.additional_properties = d
        return kairon_template_watch_event

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
