from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.create_vm_request import CreateVmRequest
    from ..models.pool_member import PoolMember


T = TypeVar("T", bound="Pool")


@_attrs_define
class Pool:
    """
    Attributes:
        created_at (str):
        members (list[PoolMember]):
        name (str):
        size (int):
        template (CreateVmRequest): What to run: the runtime fields of a Machine spec. Pools take it as their template.
        message (None | str | Unset): The last error while filling, if the pool cannot reach its size.
    """

    created_at: str
    members: list[PoolMember]
    name: str
    size: int
    template: CreateVmRequest
    message: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        created_at = self.created_at

        members = []
        for members_item_data in self.members:
            members_item = members_item_data.to_dict()
            members.append(members_item)

        name = self.name

        size = self.size

        template = self.template.to_dict()

        message: None | str | Unset
        if isinstance(self.message, Unset):
            message = UNSET
        else:
            message = self.message

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "createdAt": created_at,
                "members": members,
                "name": name,
                "size": size,
                "template": template,
            }
        )
        if message is not UNSET:
            field_dict["message"] = message

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.create_vm_request import CreateVmRequest
        from ..models.pool_member import PoolMember

        d = dict(src_dict)
        created_at = d.pop("createdAt")

        members = []
        _members = d.pop("members")
        for members_item_data in _members:
            members_item = PoolMember.from_dict(members_item_data)

            members.append(members_item)

        name = d.pop("name")

        size = d.pop("size")

        template = CreateVmRequest.from_dict(d.pop("template"))

        def _parse_message(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        message = _parse_message(d.pop("message", UNSET))

        pool = cls(
            created_at=created_at,
            members=members,
            name=name,
            size=size,
            template=template,
            message=message,
        )

        pool.additional_properties = d
        return pool

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
