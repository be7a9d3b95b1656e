from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.usage_row import UsageRow


T = TypeVar("T", bound="UsageReport")


@_attrs_define
class UsageReport:
    """
    Attributes:
        from_ (datetime.date):
        group_by (str):
        rows (list[UsageRow]):
        to (datetime.date):
    """

    from_: datetime.date
    group_by: str
    rows: list[UsageRow]
    to: datetime.date
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from_ = self.from_.isoformat()

        group_by = self.group_by

        rows = []
        for rows_item_data in self.rows:
            rows_item = rows_item_data.to_dict()
            rows.append(rows_item)

        to = self.to.isoformat()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "from": from_,
                "groupBy": group_by,
                "rows": rows,
                "to": to,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.usage_row import UsageRow

        d = dict(src_dict)
        from_ = datetime.date.fromisoformat(d.pop("from"))

        group_by = d.pop("groupBy")

        rows = []
        _rows = d.pop("rows")
        for rows_item_data in _rows:
            rows_item = UsageRow.from_dict(rows_item_data)

            rows.append(rows_item)

        to = datetime.date.fromisoformat(d.pop("to"))

        usage_report = cls(
            from_=from_,
            group_by=group_by,
            rows=rows,
            to=to,
        )

        usage_report.additional_properties = d
        return usage_report

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
