from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.machine import Machine
    from ..models.migration_plan import MigrationPlan


T = TypeVar("T", bound="Migration")


@_attrs_define
class Migration:
    """What `POST .../migrate` answers: the plan, and with it done, the Machine where it now runs.

    Attributes:
        machine (Machine):
        plan (MigrationPlan): Where a Machine would move, how, and why each node fits or not.
        copied_bytes (int | None | Unset): Bytes of files copied (a cold migration that ran).
        downtime_ms (int | None | Unset): How long a live-migrated VM was paused for the switch-over, in milliseconds (a
            cold
            migration is down throughout).
        seconds (float | None | Unset): How long the migration took, from its start to the Machine running on its new
            node.
    """

    machine: Machine
    plan: MigrationPlan
    copied_bytes: int | None | Unset = UNSET
    downtime_ms: int | None | Unset = UNSET
    seconds: float | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        machine = self.machine.to_dict()

        plan = self.plan.to_dict()

        copied_bytes: int | None | Unset
        if isinstance(self.copied_bytes, Unset):
            copied_bytes = UNSET
        else:
            copied_bytes = self.copied_bytes

        downtime_ms: int | None | Unset
        if isinstance(self.downtime_ms, Unset):
            downtime_ms = UNSET
        else:
            downtime_ms = self.downtime_ms

        seconds: float | None | Unset
        if isinstance(self.seconds, Unset):
            seconds = UNSET
        else:
            seconds = self.seconds

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "machine": machine,
                "plan": plan,
            }
        )
        if copied_bytes is not UNSET:
            field_dict["copiedBytes"] = copied_bytes
        if downtime_ms is not UNSET:
            field_dict["downtimeMs"] = downtime_ms
        if seconds is not UNSET:
            field_dict["seconds"] = seconds

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.machine import Machine
        from ..models.migration_plan import MigrationPlan

        d = dict(src_dict)
        machine = Machine.from_dict(d.pop("machine"))

        plan = MigrationPlan.from_dict(d.pop("plan"))

        def _parse_copied_bytes(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        copied_bytes = _parse_copied_bytes(d.pop("copiedBytes", UNSET))

        def _parse_downtime_ms(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        downtime_ms = _parse_downtime_ms(d.pop("downtimeMs", UNSET))

        def _parse_seconds(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        seconds = _parse_seconds(d.pop("seconds", UNSET))

        migration = cls(
            machine=machine,
            plan=plan,
            copied_bytes=copied_bytes,
            downtime_ms=downtime_ms,
            seconds=seconds,
        )

        migration.additional_properties = d
        return migration

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
