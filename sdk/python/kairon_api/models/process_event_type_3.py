from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.process_event_type_3_type import ProcessEventType3Type
from ..models.reason import Reason

T = TypeVar("T", bound="ProcessEventType3")


@_attrs_define
class ProcessEventType3:
    """The stream broke off (the runtime failed): resume from the last offsets seen.

    Attributes:
        message (str):
        reason (Reason): Why a request was refused or failed. Published as an enum in the OpenAPI document, so the
            generated clients and the SDKs' typed errors switch on it.
        type_ (ProcessEventType3Type):
    """

    message: str
    reason: Reason
    type_: ProcessEventType3Type
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        message = self.message

        reason = self.reason.value

        type_ = self.type_.value

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "message": message,
                "reason": reason,
                "type": type_,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        message = d.pop("message")

        reason = Reason(d.pop("reason"))

        type_ = ProcessEventType3Type(d.pop("type"))

        process_event_type_3 = cls(
            message=message,
            reason=reason,
            type_=type_,
        )

        process_event_type_3.additional_properties = d
        return process_event_type_3

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
