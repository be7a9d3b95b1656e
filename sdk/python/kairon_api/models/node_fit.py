from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="NodeFit")


@_attrs_define
class NodeFit:
    """One node's answer to a migration.

    Attributes:
        fits (bool):
        node (str):
        reason (str): Why it does not fit (or, for the source, that the Machine runs there); empty when it fits.
    """

    fits: bool
    node: str
    reason: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        fits = self.fits

        node = self.node

        reason = self.reason

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "fits": fits,
                "node": node,
                "reason": reason,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        fits = d.pop("fits")

        node = d.pop("node")

        reason = d.pop("reason")

        node_fit = cls(
            fits=fits,
            node=node,
            reason=reason,
        )

        node_fit.additional_properties = d
        return node_fit

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
