from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.whoami_role import WhoamiRole

T = TypeVar("T", bound="Whoami")


@_attrs_define
class Whoami:
    """Who the caller's token says they are, and what the server lets such a caller do.

    Attributes:
        legacy (bool): The legacy shared token (an operator with no identity, no guest access).
        namespaces (list[str]): The namespaces the token may use; `*` is every namespace.
        operator_exec (bool): Whether this server lets operators use the guest routes (exec, files, terminal) on
            Machines labelled `kairon.zyvor.dev/sandbox=true` (`KAIRON_UI_SANDBOX_OPERATOR_EXEC`).
            Admins always may; viewers never.
        role (WhoamiRole): A token's role.
        subject (str): The token's subject.
    """

    legacy: bool
    namespaces: list[str]
    operator_exec: bool
    role: WhoamiRole
    subject: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        legacy = self.legacy

        namespaces = self.namespaces

        operator_exec = self.operator_exec

        role = self.role.value

        subject = self.subject

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "legacy": legacy,
                "namespaces": namespaces,
                "operatorExec": operator_exec,
                "role": role,
                "subject": subject,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        legacy = d.pop("legacy")

        namespaces = cast(list[str], d.pop("namespaces"))

        operator_exec = d.pop("operatorExec")

        role = WhoamiRole(d.pop("role"))

        subject = d.pop("subject")

        whoami = cls(
            legacy=legacy,
            namespaces=namespaces,
            operator_exec=operator_exec,
            role=role,
            subject=subject,
        )

        whoami.additional_properties = d
        return whoami

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
