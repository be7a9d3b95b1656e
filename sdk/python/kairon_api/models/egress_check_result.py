from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="EgressCheckResult")


@_attrs_define
class EgressCheckResult:
    """Whether a sandbox on this node may reach a host; never the credential itself.

    Attributes:
        allow (bool):
        reason (str):
        would_inject_credential (bool): Whether a credential would be injected for this host (its value is never
            returned).
    """

    allow: bool
    reason: str
    would_inject_credential: bool
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        allow = self.allow

        reason = self.reason

        would_inject_credential = self.would_inject_credential

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "allow": allow,
                "reason": reason,
                "wouldInjectCredential": would_inject_credential,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        allow = d.pop("allow")

        reason = d.pop("reason")

        would_inject_credential = d.pop("wouldInjectCredential")

        egress_check_result = cls(
            allow=allow,
            reason=reason,
            would_inject_credential=would_inject_credential,
        )

        egress_check_result.additional_properties = d
        return egress_check_result

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
