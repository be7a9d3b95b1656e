from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.claim_phase import ClaimPhase
from ..models.launch_type import LaunchType
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.claim_usage import ClaimUsage
    from ..models.condition import Condition


T = TypeVar("T", bound="MachineClaimStatus")


@_attrs_define
class MachineClaimStatus:
    """
    Attributes:
        bound_time (datetime.datetime | None | Unset):
        conditions (list[Condition] | Unset):
        launch_type (LaunchType | None | Unset):
        machine_name (None | str | Unset):
        phase (ClaimPhase | None | Unset):
        usage (ClaimUsage | None | Unset):
        wait_seconds (float | None | Unset): Seconds from the claim's creation to its binding.
    """

    bound_time: datetime.datetime | None | Unset = UNSET
    conditions: list[Condition] | Unset = UNSET
    launch_type: LaunchType | None | Unset = UNSET
    machine_name: None | str | Unset = UNSET
    phase: ClaimPhase | None | Unset = UNSET
    usage: ClaimUsage | None | Unset = UNSET
    wait_seconds: float | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.claim_usage import ClaimUsage

        bound_time: None | str | Unset
        if isinstance(self.bound_time, Unset):
            bound_time = UNSET
        elif isinstance(self.bound_time, datetime.datetime):
            bound_time = self.bound_time.isoformat()
        else:
            bound_time = self.bound_time

        conditions: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.conditions, Unset):
            conditions = []
            for conditions_item_data in self.conditions:
                conditions_item = conditions_item_data.to_dict()
                conditions.append(conditions_item)

        launch_type: None | str | Unset
        if isinstance(self.launch_type, Unset):
            launch_type = UNSET
        elif isinstance(self.launch_type, LaunchType):
            launch_type = self.launch_type.value
        else:
            launch_type = self.launch_type

        machine_name: None | str | Unset
        if isinstance(self.machine_name, Unset):
            machine_name = UNSET
        else:
            machine_name = self.machine_name

        phase: None | str | Unset
        if isinstance(self.phase, Unset):
            phase = UNSET
        elif isinstance(self.phase, ClaimPhase):
            phase = self.phase.value
        else:
            phase = self.phase

        usage: dict[str, Any] | None | Unset
        if isinstance(self.usage, Unset):
            usage = UNSET
        elif isinstance(self.usage, ClaimUsage):
            usage = self.usage.to_dict()
        else:
            usage = self.usage

        wait_seconds: float | None | Unset
        if isinstance(self.wait_seconds, Unset):
            wait_seconds = UNSET
        else:
            wait_seconds = self.wait_seconds

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({})
        if bound_time is not UNSET:
            field_dict["boundTime"] = bound_time
        if conditions is not UNSET:
            field_dict["conditions"] = conditions
        if launch_type is not UNSET:
            field_dict["launchType"] = launch_type
        if machine_name is not UNSET:
            field_dict["machineName"] = machine_name
        if phase is not UNSET:
            field_dict["phase"] = phase
        if usage is not UNSET:
            field_dict["usage"] = usage
        if wait_seconds is not UNSET:
            field_dict["waitSeconds"] = wait_seconds

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.claim_usage import ClaimUsage
        from ..models.condition import Condition

        d = dict(src_dict)

        def _parse_bound_time(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                bound_time_type_0 = datetime.datetime.fromisoformat(data)

                return bound_time_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        bound_time = _parse_bound_time(d.pop("boundTime", UNSET))

        _conditions = d.pop("conditions", UNSET)
        conditions: list[Condition] | Unset = UNSET
        if _conditions is not UNSET:
            conditions = []
            for conditions_item_data in _conditions:
                conditions_item = Condition.from_dict(conditions_item_data)

                conditions.append(conditions_item)

        def _parse_launch_type(data: object) -> LaunchType | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                launch_type_type_0 = LaunchType(data)

                return launch_type_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(LaunchType | None | Unset, data)

        launch_type = _parse_launch_type(d.pop("launchType", UNSET))

        def _parse_machine_name(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        machine_name = _parse_machine_name(d.pop("machineName", UNSET))

        def _parse_phase(data: object) -> ClaimPhase | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                phase_type_0 = ClaimPhase(data)

                return phase_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(ClaimPhase | None | Unset, data)

        phase = _parse_phase(d.pop("phase", UNSET))

        def _parse_usage(data: object) -> ClaimUsage | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                usage_type_0 = ClaimUsage.from_dict(data)

                return usage_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(ClaimUsage | None | Unset, data)

        usage = _parse_usage(d.pop("usage", UNSET))

        def _parse_wait_seconds(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        wait_seconds = _parse_wait_seconds(d.pop("waitSeconds", UNSET))

        machine_claim_status = cls(
            bound_time=bound_time,
            conditions=conditions,
            launch_type=launch_type,
            machine_name=machine_name,
            phase=phase,
            usage=usage,
            wait_seconds=wait_seconds,
        )

        machine_claim_status.additional_properties = d
        return machine_claim_status

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
