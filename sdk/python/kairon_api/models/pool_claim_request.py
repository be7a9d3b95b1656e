from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="PoolClaimRequest")


@_attrs_define
class PoolClaimRequest:
    """
    Attributes:
        create_machine (bool | Unset): Also create a Machine for the claimed instance, which this node then adopts.
        machine_name (None | str | Unset): The Machine's name (required with createMachine).
        name (None | str | Unset): The claimed instance's new runtime name (replaced when createMachine is set).
        namespace (None | str | Unset): The Machine's namespace (default `default`).
        ttl_seconds (int | None | Unset): Delete the claimed instance this many seconds after the claim.
    """

    create_machine: bool | Unset = UNSET
    machine_name: None | str | Unset = UNSET
    name: None | str | Unset = UNSET
    namespace: None | str | Unset = UNSET
    ttl_seconds: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        create_machine = self.create_machine

        machine_name: None | str | Unset
        if isinstance(self.machine_name, Unset):
            machine_name = UNSET
        else:
            machine_name = self.machine_name

        name: None | str | Unset
        if isinstance(self.name, Unset):
            name = UNSET
        else:
            name = self.name

        namespace: None | str | Unset
        if isinstance(self.namespace, Unset):
            namespace = UNSET
        else:
            namespace = self.namespace

        ttl_seconds: int | None | Unset
        if isinstance(self.ttl_seconds, Unset):
            ttl_seconds = UNSET
        else:
            ttl_seconds = self.ttl_seconds

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({})
        if create_machine is not UNSET:
            field_dict["createMachine"] = create_machine
        if machine_name is not UNSET:
            field_dict["machineName"] = machine_name
        if name is not UNSET:
            field_dict["name"] = name
        if namespace is not UNSET:
            field_dict["namespace"] = namespace
        if ttl_seconds is not UNSET:
            field_dict["ttlSeconds"] = ttl_seconds

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        create_machine = d.pop("createMachine", UNSET)

        def _parse_machine_name(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        machine_name = _parse_machine_name(d.pop("machineName", UNSET))

        def _parse_name(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        name = _parse_name(d.pop("name", UNSET))

        def _parse_namespace(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        namespace = _parse_namespace(d.pop("namespace", UNSET))

        def _parse_ttl_seconds(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        ttl_seconds = _parse_ttl_seconds(d.pop("ttlSeconds", UNSET))

        pool_claim_request = cls(
            create_machine=create_machine,
            machine_name=machine_name,
            name=name,
            namespace=namespace,
            ttl_seconds=ttl_seconds,
        )

        pool_claim_request.additional_properties = d
        return pool_claim_request

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
