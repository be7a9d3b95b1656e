from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="Condition")


@_attrs_define
class Condition:
    """A status condition, as Kubernetes writes them.

    Attributes:
        status (str): `True`, `False` or `Unknown`.
        type_ (str): The condition's name, e.g. `Scheduled`, `Ready`.
        last_transition_time (datetime.datetime | None | Unset):
        message (str | Unset): What happened and what to do about it.
        observed_generation (int | None | Unset):
        reason (str | Unset): A machine-readable CamelCase reason.
    """

    status: str
    type_: str
    last_transition_time: datetime.datetime | None | Unset = UNSET
    message: str | Unset = UNSET
    observed_generation: int | None | Unset = UNSET
    reason: str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        status = self.status

        type_ = self.type_

        last_transition_time: None | str | Unset
        if isinstance(self.last_transition_time, Unset):
            last_transition_time = UNSET
        elif isinstance(self.last_transition_time, datetime.datetime):
            last_transition_time = self.last_transition_time.isoformat()
        else:
            last_transition_time = self.last_transition_time

        message = self.message

        observed_generation: int | None | Unset
        if isinstance(self.observed_generation, Unset):
            observed_generation = UNSET
        else:
            observed_generation = self.observed_generation

        reason = self.reason

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "status": status,
                "type": type_,
            }
        )
        if last_transition_time is not UNSET:
            field_dict["lastTransitionTime"] = last_transition_time
        if message is not UNSET:
            field_dict["message"] = message
        if observed_generation is not UNSET:
            field_dict["observedGeneration"] = observed_generation
        if reason is not UNSET:
            field_dict["reason"] = reason

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        status = d.pop("status")

        type_ = d.pop("type")

        def _parse_last_transition_time(
            data: object,
        ) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                last_transition_time_type_0 = datetime.datetime.fromisoformat(data)

                return last_transition_time_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        last_transition_time = _parse_last_transition_time(
            d.pop("lastTransitionTime", UNSET)
        )

        message = d.pop("message", UNSET)

        def _parse_observed_generation(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        observed_generation = _parse_observed_generation(
            d.pop("observedGeneration", UNSET)
        )

        reason = d.pop("reason", UNSET)

        condition = cls(
            status=status,
            type_=type_,
            last_transition_time=last_transition_time,
            message=message,
            observed_generation=observed_generation,
            reason=reason,
        )

        condition.additional_properties = d
        return condition

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
