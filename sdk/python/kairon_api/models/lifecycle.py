from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.idle_action import IdleAction
from ..types import UNSET, Unset

T = TypeVar("T", bound="Lifecycle")


@_attrs_define
class Lifecycle:
    """
    Attributes:
        idle_action (IdleAction | Unset): What the controller does to a Machine that has been idle for
            `idleTimeoutSeconds`.
        idle_cpu_millicores (int | Unset): Guest CPU use below this counts as idle.
        idle_timeout_seconds (int | None | Unset): Suspend after this many idle seconds (min 60). Unset: never idle-
            suspend.
        max_lifetime_seconds (int | None | Unset): Delete the Machine this many seconds after creation (or after a claim
            binds it).
        wake_on_connect (bool | Unset): Relay routes resume a Machine the controller idle-suspended.
        wake_timeout_seconds (int | Unset): How long a wake may take before the route answers 504.
    """

    idle_action: IdleAction | Unset = UNSET
    idle_cpu_millicores: int | Unset = UNSET
    idle_timeout_seconds: int | None | Unset = UNSET
    max_lifetime_seconds: int | None | Unset = UNSET
    wake_on_connect: bool | Unset = UNSET
    wake_timeout_seconds: int | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        idle_action: str | Unset = UNSET
        if not isinstance(self.idle_action, Unset):
            idle_action = self.idle_action.value

        idle_cpu_millicores = self.idle_cpu_millicores

        idle_timeout_seconds: int | None | Unset
        if isinstance(self.idle_timeout_seconds, Unset):
            idle_timeout_seconds = UNSET
        else:
            idle_timeout_seconds = self.idle_timeout_seconds

        max_lifetime_seconds: int | None | Unset
        if isinstance(self.max_lifetime_seconds, Unset):
            max_lifetime_seconds = UNSET
        else:
            max_lifetime_seconds = self.max_lifetime_seconds

        wake_on_connect = self.wake_on_connect

        wake_timeout_seconds = self.wake_timeout_seconds

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({})
        if idle_action is not UNSET:
            field_dict["idleAction"] = idle_action
        if idle_cpu_millicores is not UNSET:
            field_dict["idleCPUMillicores"] = idle_cpu_millicores
        if idle_timeout_seconds is not UNSET:
            field_dict["idleTimeoutSeconds"] = idle_timeout_seconds
        if max_lifetime_seconds is not UNSET:
            field_dict["maxLifetimeSeconds"] = max_lifetime_seconds
        if wake_on_connect is not UNSET:
            field_dict["wakeOnConnect"] = wake_on_connect
        if wake_timeout_seconds is not UNSET:
            field_dict["wakeTimeoutSeconds"] = wake_timeout_seconds

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        _idle_action = d.pop("idleAction", UNSET)
        idle_action: IdleAction | Unset
        if isinstance(_idle_action, Unset):
            idle_action = UNSET
        else:
            idle_action = IdleAction(_idle_action)

        idle_cpu_millicores = d.pop("idleCPUMillicores", UNSET)

        def _parse_idle_timeout_seconds(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        idle_timeout_seconds = _parse_idle_timeout_seconds(
            d.pop("idleTimeoutSeconds", UNSET)
        )

        def _parse_max_lifetime_seconds(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        max_lifetime_seconds = _parse_max_lifetime_seconds(
            d.pop("maxLifetimeSeconds", UNSET)
        )

        wake_on_connect = d.pop("wakeOnConnect", UNSET)

        wake_timeout_seconds = d.pop("wakeTimeoutSeconds", UNSET)

        lifecycle = cls(
            idle_action=idle_action,
            idle_cpu_millicores=idle_cpu_millicores,
            idle_timeout_seconds=idle_timeout_seconds,
            max_lifetime_seconds=max_lifetime_seconds,
            wake_on_connect=wake_on_connect,
            wake_timeout_seconds=wake_timeout_seconds,
        )

        lifecycle.additional_properties = d
        return lifecycle

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
