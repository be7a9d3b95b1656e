from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.migration_mode import MigrationMode

T = TypeVar("T", bound="MigrationStatus")


@_attrs_define
class MigrationStatus:
    """A migration under way.

    Attributes:
        mode (MigrationMode): How a Machine moves between nodes.
        started_at (datetime.datetime): When it began. A migration still marked past
            [`MigrationStatus::DEADLINE_SECONDS`]
            was abandoned (its api stopped): the Machine's node agent takes it back.
        target_node (str): The node the Machine is moving to.
    """

    mode: MigrationMode
    started_at: datetime.datetime
    target_node: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        mode = self.mode.value

        started_at = self.started_at.isoformat()

        target_node = self.target_node

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "mode": mode,
                "startedAt": started_at,
                "targetNode": target_node,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        mode = MigrationMode(d.pop("mode"))

        started_at = datetime.datetime.fromisoformat(d.pop("startedAt"))

        target_node = d.pop("targetNode")

        migration_status = cls(
            mode=mode,
            started_at=started_at,
            target_node=target_node,
        )

        migration_status.additional_properties = d
        return migration_status

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
