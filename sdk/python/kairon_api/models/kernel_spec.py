from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="KernelSpec")


@_attrs_define
class KernelSpec:
    """
    Attributes:
        path (str): Kernel image path on the node.
        cmdline (None | str | Unset):
        initrd (None | str | Unset):
    """

    path: str
    cmdline: None | str | Unset = UNSET
    initrd: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        path = self.path

        cmdline: None | str | Unset
        if isinstance(self.cmdline, Unset):
            cmdline = UNSET
        else:
            cmdline = self.cmdline

        initrd: None | str | Unset
        if isinstance(self.initrd, Unset):
            initrd = UNSET
        else:
            initrd = self.initrd

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "path": path,
            }
        )
        if cmdline is not UNSET:
            field_dict["cmdline"] = cmdline
        if initrd is not UNSET:
            field_dict["initrd"] = initrd

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        path = d.pop("path")

        def _parse_cmdline(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        cmdline = _parse_cmdline(d.pop("cmdline", UNSET))

        def _parse_initrd(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        initrd = _parse_initrd(d.pop("initrd", UNSET))

        kernel_spec = cls(
            path=path,
            cmdline=cmdline,
            initrd=initrd,
        )

        kernel_spec.additional_properties = d
        return kernel_spec

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
