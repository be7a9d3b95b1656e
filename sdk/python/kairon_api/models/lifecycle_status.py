from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="LifecycleStatus")


@_attrs_define
class LifecycleStatus:
    """
    Attributes:
        expires_at (datetime.datetime | None | Unset): When the Machine will be deleted: the earliest of its max
            lifetime, its `ttlSeconds` and
            its claim's `ttlSeconds` (written by the lifecycle controller; unset: no deadline).
            `POST .../extend` moves it.
        last_activity_time (datetime.datetime | None | Unset): Last guest activity kairon-node saw (written at most
            every 30 s).
        vmm_pid (int | None | Unset): The VMM (or sandbox init) process id last sampled; a new one counts as activity.
    """

    expires_at: datetime.datetime | None | Unset = UNSET
    last_activity_time: datetime.datetime | None | Unset = UNSET
    vmm_pid: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        expires_at: None | str | Unset
        if isinstance(self.expires_at, Unset):
            expires_at = UNSET
        elif isinstance(self.expires_at, datetime.datetime):
            expires_at = self.expires_at.isoformat()
        else:
            expires_at = self.expires_at

        last_activity_time: None | str | Unset
        if isinstance(self.last_activity_time, Unset):
            last_activity_time = UNSET
        elif isinstance(self.last_activity_time, datetime.datetime):
            last_activity_time = self.last_activity_time.isoformat()
        else:
            last_activity_time = self.last_activity_time

        vmm_pid: int | None | Unset
        if isinstance(self.vmm_pid, Unset):
            vmm_pid = UNSET
        else:
            vmm_pid = self.vmm_pid

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({})
        if expires_at is not UNSET:
            field_dict["expiresAt"] = expires_at
        if last_activity_time is not UNSET:
            field_dict["lastActivityTime"] = last_activity_time
        if vmm_pid is not UNSET:
            field_dict["vmmPid"] = vmm_pid

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)

        def _parse_expires_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                expires_at_type_0 = datetime.datetime.fromisoformat(data)

                return expires_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        expires_at = _parse_expires_at(d.pop("expiresAt", UNSET))

        def _parse_last_activity_time(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                last_activity_time_type_0 = datetime.datetime.fromisoformat(data)

                return last_activity_time_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        last_activity_time = _parse_last_activity_time(d.pop("lastActivityTime", UNSET))

        def _parse_vmm_pid(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        vmm_pid = _parse_vmm_pid(d.pop("vmmPid", UNSET))

        lifecycle_status = cls(
            expires_at=expires_at,
            last_activity_time=last_activity_time,
            vmm_pid=vmm_pid,
        )

        lifecycle_status.additional_properties = d
        return lifecycle_status

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
