from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.egress_mode import EgressMode
from ..types import UNSET, Unset

T = TypeVar("T", bound="EgressSpec")


@_attrs_define
class EgressSpec:
    """A Machine's own egress rule, enforced by its node below the node's policy: `Internet`
    leaves the node's policy alone; `None` refuses every host; `Allowlist` admits only the
    hosts of `allow` (names and patterns for DNS, HTTP and HTTPS; IPv4 addresses and CIDRs
    also for other protocols). A refusal is an `EgressDenied` Event on the Machine.

        Attributes:
            allow (list[str] | Unset): Host patterns (`pypi.org`, `.pythonhosted.org`, `*.example.com`), IP addresses or
                CIDRs; read in mode `Allowlist` only (at most 64).
            mode (EgressMode | Unset):
    """

    allow: list[str] | Unset = UNSET
    mode: EgressMode | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        allow: list[str] | Unset = UNSET
        if not isinstance(self.allow, Unset):
            allow = self.allow

        mode: str | Unset = UNSET
        if not isinstance(self.mode, Unset):
            mode = self.mode.value

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({})
        if allow is not UNSET:
            field_dict["allow"] = allow
        if mode is not UNSET:
            field_dict["mode"] = mode

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        allow = cast(list[str], d.pop("allow", UNSET))

        _mode = d.pop("mode", UNSET)
        mode: EgressMode | Unset
        if isinstance(_mode, Unset):
            mode = UNSET
        else:
            mode = EgressMode(_mode)

        egress_spec = cls(
            allow=allow,
            mode=mode,
        )

        egress_spec.additional_properties = d
        return egress_spec

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
