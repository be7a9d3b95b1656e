from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="ClaimUsage")


@_attrs_define
class ClaimUsage:
    """What a claim used. Seconds are whole; the accrual clock carries fractions forward.

    Attributes:
        active_seconds (int | Unset): Seconds the Machine was Running.
        last_accrual_time (datetime.datetime | None | Unset): The instant usage has been accrued up to.
        memory_gi_b_seconds (float | Unset): GiB of memory × active seconds.
        suspended_seconds (int | Unset): Seconds the Machine was Stopped, Paused, Hibernated or Halted.
        vcpu_seconds (float | Unset): vCPUs × active seconds.
    """

    active_seconds: int | Unset = UNSET
    last_accrual_time: datetime.datetime | None | Unset = UNSET
    memory_gi_b_seconds: float | Unset = UNSET
    suspended_seconds: int | Unset = UNSET
    vcpu_seconds: float | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        active_seconds = self.active_seconds

        last_accrual_time: None | str | Unset
        if isinstance(self.last_accrual_time, Unset):
            last_accrual_time = UNSET
        elif isinstance(self.last_accrual_time, datetime.datetime):
            last_accrual_time = self.last_accrual_time.isoformat()
        else:
            last_accrual_time = self.last_accrual_time

        memory_gi_b_seconds = self.memory_gi_b_seconds

        suspended_seconds = self.suspended_seconds

        vcpu_seconds = self.vcpu_seconds

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({})
        if active_seconds is not UNSET:
            field_dict["activeSeconds"] = active_seconds
        if last_accrual_time is not UNSET:
            field_dict["lastAccrualTime"] = last_accrual_time
        if memory_gi_b_seconds is not UNSET:
            field_dict["memoryGiBSeconds"] = memory_gi_b_seconds
        if suspended_seconds is not UNSET:
            field_dict["suspendedSeconds"] = suspended_seconds
        if vcpu_seconds is not UNSET:
            field_dict["vcpuSeconds"] = vcpu_seconds

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        active_seconds = d.pop("activeSeconds", UNSET)

        def _parse_last_accrual_time(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                last_accrual_time_type_0 = datetime.datetime.fromisoformat(data)

                return last_accrual_time_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        last_accrual_time = _parse_last_accrual_time(d.pop("lastAccrualTime", UNSET))

        memory_gi_b_seconds = d.pop("memoryGiBSeconds", UNSET)

        suspended_seconds = d.pop("suspendedSeconds", UNSET)

        vcpu_seconds = d.pop("vcpuSeconds", UNSET)

        claim_usage = cls(
            active_seconds=active_seconds,
            last_accrual_time=last_accrual_time,
            memory_gi_b_seconds=memory_gi_b_seconds,
            suspended_seconds=suspended_seconds,
            vcpu_seconds=vcpu_seconds,
        )

        claim_usage.additional_properties = d
        return claim_usage

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
