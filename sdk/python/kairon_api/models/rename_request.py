from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define

T = TypeVar("T", bound="RenameRequest")


@_attrs_define
class RenameRequest:
    """Where a file moves.

    Attributes:
        from_ (str): Its absolute path now.
        to (str): Its new absolute path: a file there is replaced, a directory there must be empty.
    """

    from_: str
    to: str

    def to_dict(self) -> dict[str, Any]:
        from_ = self.from_

        to = self.to

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "from": from_,
                "to": to,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        from_ = d.pop("from")

        to = d.pop("to")

        rename_request = cls(
            from_=from_,
            to=to,
        )

        return rename_request
