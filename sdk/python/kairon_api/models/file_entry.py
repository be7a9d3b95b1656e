from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="FileEntry")


@_attrs_define
class FileEntry:
    """
    Attributes:
        is_dir (bool):
        mode (int):
        name (str):
        size (int):
        link_target (None | str | Unset):
        modified (None | str | Unset): When its content last changed (RFC 3339, UTC).
    """

    is_dir: bool
    mode: int
    name: str
    size: int
    link_target: None | str | Unset = UNSET
    modified: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        is_dir = self.is_dir

        mode = self.mode

        name = self.name

        size = self.size

        link_target: None | str | Unset
        if isinstance(self.link_target, Unset):
            link_target = UNSET
        else:
            link_target = self.link_target

        modified: None | str | Unset
        if isinstance(self.modified, Unset):
            modified = UNSET
        else:
            modified = self.modified

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "isDir": is_dir,
                "mode": mode,
                "name": name,
                "size": size,
            }
        )
        if link_target is not UNSET:
            field_dict["linkTarget"] = link_target
        if modified is not UNSET:
            field_dict["modified"] = modified

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        is_dir = d.pop("isDir")

        mode = d.pop("mode")

        name = d.pop("name")

        size = d.pop("size")

        def _parse_link_target(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        link_target = _parse_link_target(d.pop("linkTarget", UNSET))

        def _parse_modified(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        modified = _parse_modified(d.pop("modified", UNSET))

        file_entry = cls(
            is_dir=is_dir,
            mode=mode,
            name=name,
            size=size,
            link_target=link_target,
            modified=modified,
        )

        file_entry.additional_properties = d
        return file_entry

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
