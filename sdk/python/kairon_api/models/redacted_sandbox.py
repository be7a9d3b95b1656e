from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.vm_state import VmState

T = TypeVar("T", bound="RedactedSandbox")


@_attrs_define
class RedactedSandbox:
    """A sandbox outside the caller's namespaces (or owned by no Machine): what it is, not whose.

    Attributes:
        backend (str):
        id (str):
        state (VmState): The state of an instance.
    """

    backend: str
    id: str
    state: VmState
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        backend = self.backend

        id = self.id

        state = self.state.value

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "backend": backend,
                "id": id,
                "state": state,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        backend = d.pop("backend")

        id = d.pop("id")

        state = VmState(d.pop("state"))

        redacted_sandbox = cls(
            backend=backend,
            id=id,
            state=state,
        )

        redacted_sandbox.additional_properties = d
        return redacted_sandbox

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
