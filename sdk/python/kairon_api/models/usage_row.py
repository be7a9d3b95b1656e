from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="UsageRow")


@_attrs_define
class UsageRow:
    """One row of a usage report; which keys are set depends on `groupBy`.

    Attributes:
        active_seconds (int):
        memory_gi_b_seconds (float):
        suspended_seconds (int):
        vcpu_seconds (float):
        namespace (str):
        claim_name (None | str | Unset):
        claim_uid (None | Unset | UUID):
        day (datetime.date | None | Unset):
    """

    active_seconds: int
    memory_gi_b_seconds: float
    suspended_seconds: int
    vcpu_seconds: float
    namespace: str
    claim_name: None | str | Unset = UNSET
    claim_uid: None | Unset | UUID = UNSET
    day: datetime.date | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        active_seconds = self.active_seconds

        memory_gi_b_seconds = self.memory_gi_b_seconds

        suspended_seconds = self.suspended_seconds

        vcpu_seconds = self.vcpu_seconds

        namespace = self.namespace

        claim_name: None | str | Unset
        if isinstance(self.claim_name, Unset):
            claim_name = UNSET
        else:
            claim_name = self.claim_name

        claim_uid: None | str | Unset
        if isinstance(self.claim_uid, Unset):
            claim_uid = UNSET
        elif isinstance(self.claim_uid, UUID):
            claim_uid = str(self.claim_uid)
        else:
            claim_uid = self.claim_uid

        day: None | str | Unset
        if isinstance(self.day, Unset):
            day = UNSET
        elif isinstance(self.day, datetime.date):
            day = self.day.isoformat()
        else:
            day = self.day

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "activeSeconds": active_seconds,
                "memoryGiBSeconds": memory_gi_b_seconds,
                "suspendedSeconds": suspended_seconds,
                "vcpuSeconds": vcpu_seconds,
                "namespace": namespace,
            }
        )
        if claim_name is not UNSET:
            field_dict["claimName"] = claim_name
        if claim_uid is not UNSET:
            field_dict["claimUid"] = claim_uid
        if day is not UNSET:
            field_dict["day"] = day

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        active_seconds = d.pop("activeSeconds")

        memory_gi_b_seconds = d.pop("memoryGiBSeconds")

        suspended_seconds = d.pop("suspendedSeconds")

        vcpu_seconds = d.pop("vcpuSeconds")

        namespace = d.pop("namespace")

        def _parse_claim_name(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        claim_name = _parse_claim_name(d.pop("claimName", UNSET))

        def _parse_claim_uid(data: object) -> None | Unset | UUID:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                claim_uid_type_0 = UUID(data)

                return claim_uid_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Unset | UUID, data)

        claim_uid = _parse_claim_uid(d.pop("claimUid", UNSET))

        def _parse_day(data: object) -> datetime.date | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                day_type_0 = datetime.date.fromisoformat(data)

                return day_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.date | None | Unset, data)

        day = _parse_day(d.pop("day", UNSET))

        usage_row = cls(
            active_seconds=active_seconds,
            memory_gi_b_seconds=memory_gi_b_seconds,
            suspended_seconds=suspended_seconds,
            vcpu_seconds=vcpu_seconds,
            namespace=namespace,
            claim_name=claim_name,
            claim_uid=claim_uid,
            day=day,
        )

        usage_row.additional_properties = d
        return usage_row

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
