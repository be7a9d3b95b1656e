from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.quota_amounts import QuotaAmounts
    from ..models.quota_limit import QuotaLimit


T = TypeVar("T", bound="QuotaReport")


@_attrs_define
class QuotaReport:
    """What a namespace's Machines hold, and each KaironQuota's limits on it.

    Attributes:
        namespace (str):
        quotas (list[QuotaLimit]): Each KaironQuota of the namespace, by name (none: nothing is limited).
        used (QuotaAmounts): Amounts of what a namespace's Machines hold. In a quota's `spec.hard` an absent amount is
            not
            limited; in its status every amount is reported.
    """

    namespace: str
    quotas: list[QuotaLimit]
    used: QuotaAmounts
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        namespace = self.namespace

        quotas = []
        for quotas_item_data in self.quotas:
            quotas_item = quotas_item_data.to_dict()
            quotas.append(quotas_item)

        used = self.used.to_dict()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "namespace": namespace,
                "quotas": quotas,
                "used": used,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.quota_amounts import QuotaAmounts
        from ..models.quota_limit import QuotaLimit

        d = dict(src_dict)
        namespace = d.pop("namespace")

        quotas = []
        _quotas = d.pop("quotas")
        for quotas_item_data in _quotas:
            quotas_item = QuotaLimit.from_dict(quotas_item_data)

            quotas.append(quotas_item)

        used = QuotaAmounts.from_dict(d.pop("used"))

        quota_report = cls(
            namespace=namespace,
            quotas=quotas,
            used=used,
        )

        quota_report.additional_properties = d
        return quota_report

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
