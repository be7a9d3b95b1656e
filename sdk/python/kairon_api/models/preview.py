from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="Preview")


@_attrs_define
class Preview:
    """A preview link as the API shows it.

    Attributes:
        created_at (datetime.datetime):
        created_by (str): Who made it; requests through the link act as them.
        expires_at (datetime.datetime): After this the link answers 404.
        id (str): Names the link to revoke it; not the capability (which only the creator's answer holds).
        port (int): The guest port the link opens.
        url (None | str | Unset): The link, to open in a browser with no header: given once, in the answer that made it.
    """

    created_at: datetime.datetime
    created_by: str
    expires_at: datetime.datetime
    id: str
    port: int
    url: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        created_at = self.created_at.isoformat()

        created_by = self.created_by

        expires_at = self.expires_at.isoformat()

        id = self.id

        port = self.port

        url: None | str | Unset
        if isinstance(self.url, Unset):
            url = UNSET
        else:
            url = self.url

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "createdAt": created_at,
                "createdBy": created_by,
                "expiresAt": expires_at,
                "id": id,
                "port": port,
            }
        )
        if url is not UNSET:
            field_dict["url"] = url

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        created_at = datetime.datetime.fromisoformat(d.pop("createdAt"))

        created_by = d.pop("createdBy")

        expires_at = datetime.datetime.fromisoformat(d.pop("expiresAt"))

        id = d.pop("id")

        port = d.pop("port")

        def _parse_url(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        url = _parse_url(d.pop("url", UNSET))

        preview = cls(
            created_at=created_at,
            created_by=created_by,
            expires_at=expires_at,
            id=id,
            port=port,
            url=url,
        )

        preview.additional_properties = d
        return preview

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
