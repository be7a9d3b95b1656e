from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="Ticket")


@_attrs_define
class Ticket:
    """A single-use ticket for a WebSocket.

    Attributes:
        expires_in_seconds (int): How long it stays valid, from now.
        ticket (str): Give it as `?ticket=` on the WebSocket route it was minted for; it works once, there only.
    """

    expires_in_seconds: int
    ticket: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        expires_in_seconds = self.expires_in_seconds

        ticket = self.ticket

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "expiresInSeconds": expires_in_seconds,
                "ticket": ticket,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        expires_in_seconds = d.pop("expiresInSeconds")

        ticket = d.pop("ticket")

        ticket = cls(
            expires_in_seconds=expires_in_seconds,
            ticket=ticket,
        )

        ticket.additional_properties = d
        return ticket

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
