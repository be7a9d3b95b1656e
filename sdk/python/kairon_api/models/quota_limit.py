from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.quota_amounts import QuotaAmounts


T = TypeVar("T", bound="QuotaLimit")


@_attrs_define
class QuotaLimit:
    """One KaironQuota's limits, and use against them.

    Attributes:
        hard (QuotaAmounts): Amounts of what a namespace's Machines hold. In a quota's `spec.hard` an absent amount is
            not
            limited; in its status every amount is reported.
        name (str):
        summary (str): Use against the limits, e.g. `machines: 3/10, cpu: 3/8`.
    """

    hard: QuotaAmounts
    name: str
    summary: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        hard = self.hard.to_dict()

        name = self.name

        summary = self.summary

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "hard": hard,
                "name": name,
                "summary": summary,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.quota_amounts import QuotaAmounts

        d = dict(src_dict)
        hard = QuotaAmounts.from_dict(d.pop("hard"))

        name = d.pop("name")

        summary = d.pop("summary")

        quota_limit = cls(
            hard=hard,
            name=name,
            summary=summary,
        )

        quota_limit.additional_properties = d
        return quota_limit

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
