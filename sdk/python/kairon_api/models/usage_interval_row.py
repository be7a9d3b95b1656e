from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="UsageIntervalRow")


@_attrs_define
class UsageIntervalRow:
    """
    Attributes:
        active_seconds (int):
        memory_gi_b_seconds (float):
        suspended_seconds (int):
        vcpu_seconds (float):
        interval_end (datetime.datetime):
        interval_start (datetime.datetime):
        state (str): `active`, `suspended` or `none`.
    """

    active_seconds: int
    memory_gi_b_seconds: float
    suspended_seconds: int
    vcpu_seconds: float
    interval_end: datetime.datetime
    interval_start: datetime.datetime
    state: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        active_seconds = self.active_seconds

        memory_gi_b_seconds = self.memory_gi_b_seconds

        suspended_seconds = self.suspended_seconds

        vcpu_seconds = self.vcpu_seconds

        interval_end = self.interval_end.isoformat()

        interval_start = self.interval_start.isoformat()

        state = self.state

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "activeSeconds": active_seconds,
                "memoryGiBSeconds": memory_gi_b_seconds,
                "suspendedSeconds": suspended_seconds,
                "vcpuSeconds": vcpu_seconds,
                "intervalEnd": interval_end,
                "intervalStart": interval_start,
                "state": state,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        active_seconds = d.pop("activeSeconds")

        memory_gi_b_seconds = d.pop("memoryGiBSeconds")

        suspended_seconds = d.pop("suspendedSeconds")

        vcpu_seconds = d.pop("vcpuSeconds")

        interval_end = datetime.datetime.fromisoformat(d.pop("intervalEnd"))

        interval_start = datetime.datetime.fromisoformat(d.pop("intervalStart"))

        state = d.pop("state")

        usage_interval_row = cls(
            active_seconds=active_seconds,
            memory_gi_b_seconds=memory_gi_b_seconds,
            suspended_seconds=suspended_seconds,
            vcpu_seconds=vcpu_seconds,
            interval_end=interval_end,
            interval_start=interval_start,
            state=state,
        )

        usage_interval_row.additional_properties = d
        return usage_interval_row

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
