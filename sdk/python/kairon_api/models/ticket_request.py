from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define

T = TypeVar("T", bound="TicketRequest")


@_attrs_define
class TicketRequest:
    """What a ticket is for.

    Attributes:
        path (str): The one WebSocket route the ticket opens, without its query:
            `/api/v1/machines/{namespace}/{name}/exec/stream`, `…/console`, `…/vnc` or
            `…/portforward/{port}`. Example: /api/v1/machines/agents/shell/exec/stream.
    """

    path: str

    def to_dict(self) -> dict[str, Any]:
        path = self.path

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "path": path,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        path = d.pop("path")

        ticket_request = cls(
            path=path,
        )

        return ticket_request
