from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="PoolAutoscale")


@_attrs_define
class PoolAutoscale:
    """How a pool sizes itself: the smallest `replicas` in `[minReplicas, maxReplicas]` expected to
    serve `targetHitRate` of claims from a warm member, at the rate claims arrived over
    `windowSeconds` (or faster lately) and the time a member takes to become warm; it shrinks only
    after needing fewer members for `scaleDownDelaySeconds`.

        Attributes:
            max_replicas (int):
            min_replicas (int):
            scale_down_delay_seconds (int | Unset): How long the pool must need fewer members before it shrinks.
            target_hit_rate (float | Unset): Share of claims to serve warm, in (0, 1].
            window_seconds (int | Unset): How far back claim arrivals count.
    """

    max_replicas: int
    min_replicas: int
    scale_down_delay_seconds: int | Unset = UNSET
    target_hit_rate: float | Unset = UNSET
    window_seconds: int | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        max_replicas = self.max_replicas

        min_replicas = self.min_replicas

        scale_down_delay_seconds = self.scale_down_delay_seconds

        target_hit_rate = self.target_hit_rate

        window_seconds = self.window_seconds

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "maxReplicas": max_replicas,
                "minReplicas": min_replicas,
            }
        )
        if scale_down_delay_seconds is not UNSET:
            field_dict["scaleDownDelaySeconds"] = scale_down_delay_seconds
        if target_hit_rate is not UNSET:
            field_dict["targetHitRate"] = target_hit_rate
        if window_seconds is not UNSET:
            field_dict["windowSeconds"] = window_seconds

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        max_replicas = d.pop("maxReplicas")

        min_replicas = d.pop("minReplicas")

        scale_down_delay_seconds = d.pop("scaleDownDelaySeconds", UNSET)

        target_hit_rate = d.pop("targetHitRate", UNSET)

        window_seconds = d.pop("windowSeconds", UNSET)

        pool_autoscale = cls(
            max_replicas=max_replicas,
            min_replicas=min_replicas,
            scale_down_delay_seconds=scale_down_delay_seconds,
            target_hit_rate=target_hit_rate,
            window_seconds=window_seconds,
        )

        pool_autoscale.additional_properties = d
        return pool_autoscale

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
