from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.condition import Condition


T = TypeVar("T", bound="MachinePoolStatus")


@_attrs_define
class MachinePoolStatus:
    """
    Attributes:
        claimed (int | Unset): Members bound to a claim.
        conditions (list[Condition] | Unset):
        hit_rate (float | None | Unset): Share of the claims that arrived over the autoscale window (10 minutes without
            autoscale)
            and were served by a warm member; absent before any.
        observed_generation (int | None | Unset):
        ready (int | Unset): Unclaimed members that have booted (Running or Paused).
        replicas (int | Unset): Unclaimed members, in any phase.
        warm (int | Unset): Unclaimed members warmed up and in the warm power state: what a claim can take now.
    """

    claimed: int | Unset = UNSET
    conditions: list[Condition] | Unset = UNSET
    hit_rate: float | None | Unset = UNSET
    observed_generation: int | None | Unset = UNSET
    ready: int | Unset = UNSET
    replicas: int | Unset = UNSET
    warm: int | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        claimed = self.claimed

        conditions: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.conditions, Unset):
            conditions = []
            for conditions_item_data in self.conditions:
                conditions_item = conditions_item_data.to_dict()
                conditions.append(conditions_item)

        hit_rate: float | None | Unset
        if isinstance(self.hit_rate, Unset):
            hit_rate = UNSET
        else:
            hit_rate = self.hit_rate

        observed_generation: int | None | Unset
        if isinstance(self.observed_generation, Unset):
            observed_generation = UNSET
        else:
            observed_generation = self.observed_generation

        ready = self.ready

        replicas = self.replicas

        warm = self.warm

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({})
        if claimed is not UNSET:
            field_dict["claimed"] = claimed
        if conditions is not UNSET:
            field_dict["conditions"] = conditions
        if hit_rate is not UNSET:
            field_dict["hitRate"] = hit_rate
        if observed_generation is not UNSET:
            field_dict["observedGeneration"] = observed_generation
        if ready is not UNSET:
            field_dict["ready"] = ready
        if replicas is not UNSET:
            field_dict["replicas"] = replicas
        if warm is not UNSET:
            field_dict["warm"] = warm

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.condition import Condition

        d = dict(src_dict)
        claimed = d.pop("claimed", UNSET)

        _conditions = d.pop("conditions", UNSET)
        conditions: list[Condition] | Unset = UNSET
        if _conditions is not UNSET:
            conditions = []
            for conditions_item_data in _conditions:
                conditions_item = Condition.from_dict(conditions_item_data)

                conditions.append(conditions_item)

        def _parse_hit_rate(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        hit_rate = _parse_hit_rate(d.pop("hitRate", UNSET))

        def _parse_observed_generation(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        observed_generation = _parse_observed_generation(
            d.pop("observedGeneration", UNSET)
        )

        ready = d.pop("ready", UNSET)

        replicas = d.pop("replicas", UNSET)

        warm = d.pop("warm", UNSET)

        machine_pool_status = cls(
            claimed=claimed,
            conditions=conditions,
            hit_rate=hit_rate,
            observed_generation=observed_generation,
            ready=ready,
            replicas=replicas,
            warm=warm,
        )

        machine_pool_status.additional_properties = d
        return machine_pool_status

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
