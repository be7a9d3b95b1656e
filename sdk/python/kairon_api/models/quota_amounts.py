from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="QuotaAmounts")


@_attrs_define
class QuotaAmounts:
    """Amounts of what a namespace's Machines hold. In a quota's `spec.hard` an absent amount is not
    limited; in its status every amount is reported.

        Attributes:
            cpu (None | str | Unset): The sum of the Machines' `resources.cpu` (a template sandbox counts 1).
            machines (int | None | Unset): Machines, whatever their power state.
            memory (None | str | Unset): The sum of the Machines' `resources.memory` (a template sandbox counts 512Mi).
            storage (None | str | Unset): The sum of the Machines' new empty volumes (`spec.volumes[].size`): disk the node
                allocates for them as they fill.
            templates (int | None | Unset): The namespace's own templates (KaironTemplates): each costs its nodes a pull, a
                build
                and the disk of its rootfs.
            warm_members (int | None | Unset): Pool members not claimed: the warm (or warming) members pools hold for
                claims, Paused in
                a Paused pool, which hold node memory while nobody uses them.
    """

    cpu: None | str | Unset = UNSET
    machines: int | None | Unset = UNSET
    memory: None | str | Unset = UNSET
    storage: None | str | Unset = UNSET
    templates: int | None | Unset = UNSET
    warm_members: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        cpu: None | str | Unset
        if isinstance(self.cpu, Unset):
            cpu = UNSET
        else:
            cpu = self.cpu

        machines: int | None | Unset
        if isinstance(self.machines, Unset):
            machines = UNSET
        else:
            machines = self.machines

        memory: None | str | Unset
        if isinstance(self.memory, Unset):
            memory = UNSET
        else:
            memory = self.memory

        storage: None | str | Unset
        if isinstance(self.storage, Unset):
            storage = UNSET
        else:
            storage = self.storage

        templates: int | None | Unset
        if isinstance(self.templates, Unset):
            templates = UNSET
        else:
            templates = self.templates

        warm_members: int | None | Unset
        if isinstance(self.warm_members, Unset):
            warm_members = UNSET
        else:
            warm_members = self.warm_members

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({})
        if cpu is not UNSET:
            field_dict["cpu"] = cpu
        if machines is not UNSET:
            field_dict["machines"] = machines
        if memory is not UNSET:
            field_dict["memory"] = memory
        if storage is not UNSET:
            field_dict["storage"] = storage
        if templates is not UNSET:
            field_dict["templates"] = templates
        if warm_members is not UNSET:
            field_dict["warmMembers"] = warm_members

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)

        def _parse_cpu(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        cpu = _parse_cpu(d.pop("cpu", UNSET))

        def _parse_machines(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        machines = _parse_machines(d.pop("machines", UNSET))

        def _parse_memory(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        memory = _parse_memory(d.pop("memory", UNSET))

        def _parse_storage(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        storage = _parse_storage(d.pop("storage", UNSET))

        def _parse_templates(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        templates = _parse_templates(d.pop("templates", UNSET))

        def _parse_warm_members(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        warm_members = _parse_warm_members(d.pop("warmMembers", UNSET))

        quota_amounts = cls(
            cpu=cpu,
            machines=machines,
            memory=memory,
            storage=storage,
            templates=templates,
            warm_members=warm_members,
        )

        quota_amounts.additional_properties = d
        return quota_amounts

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
