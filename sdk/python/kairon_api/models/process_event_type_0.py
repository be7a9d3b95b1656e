from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.process_event_type_0_type import ProcessEventType0Type

T = TypeVar("T", bound="ProcessEventType0")


@_attrs_define
class ProcessEventType0:
    """Output on stdout: `data` (whole characters) ends at byte `end`, the offset to resume from.

    Attributes:
        data (str):
        end (int):
        type_ (ProcessEventType0Type):
    """

    data: str
    end: int
    type_: ProcessEventType0Type
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = self.data

        end = self.end

        type_ = self.type_.value

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "data": data,
                "end": end,
                "type": type_,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        data = d.pop("data")

        end = d.pop("end")

        type_ = ProcessEventType0Type(d.pop("type"))

        process_event_type_0 = cls(
            data=data,
            end=end,
            type_=type_,
        )

        process_event_type_0.additional_properties = d
        return process_event_type_0

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
