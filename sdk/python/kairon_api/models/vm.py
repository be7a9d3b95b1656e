from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.vm_state import VmState
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.create_vm_request import CreateVmRequest


T = TypeVar("T", bound="Vm")


@_attrs_define
class Vm:
    """An instance as the runtime reports it.

    Attributes:
        backend (str): `runc` (sandbox) or `qemu`.
        created_at (str):
        id (str):
        name (str):
        spec (CreateVmRequest): What to run: the runtime fields of a Machine spec. Pools take it as their template.
        state (VmState): The state of an instance.
        expires_at (None | str | Unset): When the runtime deletes it (from `ttlSeconds`, counted from creation or
            claim).
        guest_ip (None | str | Unset):
        message (None | str | Unset):
        owner_uid (None | str | Unset): The UID of the Machine that owns the instance; none for a pool member, a fresh
            fork or
            clone, or an instance made outside Kairon. Only an owner's node agent adopts it.
        pid (int | None | Unset): The VMM process (for a sandbox: its init process).
        power_generation (int | None | Unset): The newest Machine generation whose power state was applied to the
            instance: a power
            request for an older one is refused (409 `Stale`), so a reconcile working from a stale
            view cannot undo a newer wake or claim that thawed the instance directly.
        template (None | str | Unset):
    """

    backend: str
    created_at: str
    id: str
    name: str
    spec: CreateVmRequest
    state: VmState
    expires_at: None | str | Unset = UNSET
    guest_ip: None | str | Unset = UNSET
    message: None | str | Unset = UNSET
    owner_uid: None | str | Unset = UNSET
    pid: int | None | Unset = UNSET
    power_generation: int | None | Unset = UNSET
    template: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        backend = self.backend

        created_at = self.created_at

        id = self.id

        name = self.name

        spec = self.spec.to_dict()

        state = self.state.value

        expires_at: None | str | Unset
        if isinstance(self.expires_at, Unset):
            expires_at = UNSET
        else:
            expires_at = self.expires_at

        guest_ip: None | str | Unset
        if isinstance(self.guest_ip, Unset):
            guest_ip = UNSET
        else:
            guest_ip = self.guest_ip

        message: None | str | Unset
        if isinstance(self.message, Unset):
            message = UNSET
        else:
            message = self.message

        owner_uid: None | str | Unset
        if isinstance(self.owner_uid, Unset):
            owner_uid = UNSET
        else:
            owner_uid = self.owner_uid

        pid: int | None | Unset
        if isinstance(self.pid, Unset):
            pid = UNSET
        else:
            pid = self.pid

        power_generation: int | None | Unset
        if isinstance(self.power_generation, Unset):
            power_generation = UNSET
        else:
            power_generation = self.power_generation

        template: None | str | Unset
        if isinstance(self.template, Unset):
            template = UNSET
        else:
            template = self.template

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "backend": backend,
                "createdAt": created_at,
                "id": id,
                "name": name,
                "spec": spec,
                "state": state,
            }
        )
        if expires_at is not UNSET:
            field_dict["expiresAt"] = expires_at
        if guest_ip is not UNSET:
            field_dict["guestIp"] = guest_ip
        if message is not UNSET:
            field_dict["message"] = message
        if owner_uid is not UNSET:
            field_dict["ownerUid"] = owner_uid
        if pid is not UNSET:
            field_dict["pid"] = pid
        if power_generation is not UNSET:
            field_dict["powerGeneration"] = power_generation
        if template is not UNSET:
            field_dict["template"] = template

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.create_vm_request import CreateVmRequest

        d = dict(src_dict)
        backend = d.pop("backend")

        created_at = d.pop("createdAt")

        id = d.pop("id")

        name = d.pop("name")

        spec = CreateVmRequest.from_dict(d.pop("spec"))

        state = VmState(d.pop("state"))

        def _parse_expires_at(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        expires_at = _parse_expires_at(d.pop("expiresAt", UNSET))

        def _parse_guest_ip(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        guest_ip = _parse_guest_ip(d.pop("guestIp", UNSET))

        def _parse_message(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        message = _parse_message(d.pop("message", UNSET))

        def _parse_owner_uid(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        owner_uid = _parse_owner_uid(d.pop("ownerUid", UNSET))

        def _parse_pid(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        pid = _parse_pid(d.pop("pid", UNSET))

        def _parse_power_generation(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        power_generation = _parse_power_generation(d.pop("powerGeneration", UNSET))

        def _parse_template(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        template = _parse_template(d.pop("template", UNSET))

        vm = cls(
            backend=backend,
            created_at=created_at,
            id=id,
            name=name,
            spec=spec,
            state=state,
            expires_at=expires_at,
            guest_ip=guest_ip,
            message=message,
            owner_uid=owner_uid,
            pid=pid,
            power_generation=power_generation,
            template=template,
        )

        vm.additional_properties = d
        return vm

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
