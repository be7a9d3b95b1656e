from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.totals import Totals
    from ..models.usage_interval_row import UsageIntervalRow


T = TypeVar("T", bound="ClaimUsageHistory")


@_attrs_define
class ClaimUsageHistory:
    """
    Attributes:
        claim_name (str):
        claim_uid (UUID):
        intervals (list[UsageIntervalRow]):
        namespace (str):
        total (Totals): Summed usage.
    """

    claim_name: str
    claim_uid: UUID
    intervals: list[UsageIntervalRow]
    namespace: str
    total: Totals
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        claim_name = self.claim_name

        claim_uid = str(self.claim_uid)

        intervals = []
        for intervals_item_data in self.intervals:
            intervals_item = intervals_item_data.to_dict()
            intervals.append(intervals_item)

        namespace = self.namespace

        total = self.total.to_dict()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "claimName": claim_name,
                "claimUid": claim_uid,
                "intervals": intervals,
                "namespace": namespace,
                "total": total,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.totals import Totals
        from ..models.usage_interval_row import UsageIntervalRow

        d = dict(src_dict)
        claim_name = d.pop("claimName")

        claim_uid = UUID(d.pop("claimUid"))

        intervals = []
        _intervals = d.pop("intervals")
        for intervals_item_data in _intervals:
            intervals_item = UsageIntervalRow.from_dict(intervals_item_data)

            intervals.append(intervals_item)

        namespace = d.pop("namespace")

        total = Totals.from_dict(d.pop("total"))

        claim_usage_history = cls(
            claim_name=claim_name,
            claim_uid=claim_uid,
            intervals=intervals,
            namespace=namespace,
            total=total,
        )

        claim_usage_history.additional_properties = d
        return claim_usage_history

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
