from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.machine import Machine


T = TypeVar("T", bound="Extended")


@_attrs_define
class Extended:
    """The answer of an extension.

    Attributes:
        expires_at (datetime.datetime): The Machine's new end (the lifecycle controller records it as
            `status.lifecycle.expiresAt`).
        machine (Machine):
    """

    expires_at: datetime.datetime
    machine: Machine
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        expires_at = self.expires_at.isoformat()

        machine = self.machine.to_dict()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "expiresAt": expires_at,
                "machine": machine,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.machine import Machine

        d = dict(src_dict)
        expires_at = datetime.datetime.fromisoformat(d.pop("expiresAt"))

        machine = Machine.from_dict(d.pop("machine"))

        extended = cls(
            expires_at=expires_at,
            machine=machine,
        )

        extended.additional_properties = d
        return extended

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
