from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.process_event_type_1_type import ProcessEventType1Type

T = TypeVar("T", bound="ProcessEventType1")


@_attrs_define
class ProcessEventType1:
    """Output on stderr, as for stdout.

    Attributes:
        data (str):
        end (int):
        type_ (ProcessEventType1Type):
    """

    data: str
    end: int
    type_: ProcessEventType1Type
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

        type_ = ProcessEventType1Type(d.pop("type"))

        process_event_type_1 = cls(
            data=data,
            end=end,
            type_=type_,
        )

        process_event_type_1.additional_properties = d
        return process_event_type_1

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
