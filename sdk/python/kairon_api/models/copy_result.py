from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.machine import Machine


T = TypeVar("T", bound="CopyResult")


@_attrs_define
class CopyResult:
    """The answer of a fork or clone.

    Attributes:
        live (bool): Whether memory and processes were copied too (a QEMU VM) or only the filesystem.
        machine (Machine):
    """

    live: bool
    machine: Machine
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        live = self.live

        machine = self.machine.to_dict()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "live": live,
                "machine": machine,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.machine import Machine

        d = dict(src_dict)
        live = d.pop("live")

        machine = Machine.from_dict(d.pop("machine"))

        copy_result = cls(
            live=live,
            machine=machine,
        )

        copy_result.additional_properties = d
        return copy_result

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
