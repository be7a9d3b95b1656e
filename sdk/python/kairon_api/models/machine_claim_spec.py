from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.machine_claim_spec_env import MachineClaimSpecEnv
    from ..models.machine_claim_spec_secret_env import MachineClaimSpecSecretEnv


T = TypeVar("T", bound="MachineClaimSpec")


@_attrs_define
class MachineClaimSpec:
    """Binds one warm member of a MachinePool; its usage accrues while bound.

    Attributes:
        pool_name (str): The MachinePool (same namespace) to take a member from.
        env (MachineClaimSpecEnv | Unset): Environment variables for every exec and process in the bound Machine, over
            its own
            `spec.env` (written onto the member when the claim binds, so a warm member gets them
            without a cold start; immutable). Not for secrets: every reader of the namespace sees them.
        secret_env (MachineClaimSpecSecretEnv | Unset): Secret keys for every exec and process in the bound Machine, as
            a Machine's
            `spec.secretEnv` (written onto the member when the claim binds, over its own; immutable).
        ttl_seconds (int | None | Unset): Release the claim this many seconds after it binds.
    """

    pool_name: str
    env: MachineClaimSpecEnv | Unset = UNSET
    secret_env: MachineClaimSpecSecretEnv | Unset = UNSET
    ttl_seconds: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        pool_name = self.pool_name

        env: dict[str, Any] | Unset = UNSET
        if not isinstance(self.env, Unset):
            env = self.env.to_dict()

        secret_env: dict[str, Any] | Unset = UNSET
        if not isinstance(self.secret_env, Unset):
            secret_env = self.secret_env.to_dict()

        ttl_seconds: int | None | Unset
        if isinstance(self.ttl_seconds, Unset):
            ttl_seconds = UNSET
        else:
            ttl_seconds = self.ttl_seconds

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "poolName": pool_name,
            }
        )
        if env is not UNSET:
            field_dict["env"] = env
        if secret_env is not UNSET:
            field_dict["secretEnv"] = secret_env
        if ttl_seconds is not UNSET:
            field_dict["ttlSeconds"] = ttl_seconds

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.machine_claim_spec_env import MachineClaimSpecEnv
        from ..models.machine_claim_spec_secret_env import MachineClaimSpecSecretEnv

        d = dict(src_dict)
        pool_name = d.pop("poolName")

        _env = d.pop("env", UNSET)
        env: MachineClaimSpecEnv | Unset
        if isinstance(_env, Unset):
            env = UNSET
        else:
            env = MachineClaimSpecEnv.from_dict(_env)

        _secret_env = d.pop("secretEnv", UNSET)
        secret_env: MachineClaimSpecSecretEnv | Unset
        if isinstance(_secret_env, Unset):
            secret_env = UNSET
        else:
            secret_env = MachineClaimSpecSecretEnv.from_dict(_secret_env)

        def _parse_ttl_seconds(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        ttl_seconds = _parse_ttl_seconds(d.pop("ttlSeconds", UNSET))

        machine_claim_spec = cls(
            pool_name=pool_name,
            env=env,
            secret_env=secret_env,
            ttl_seconds=ttl_seconds,
        )

        machine_claim_spec.additional_properties = d
        return machine_claim_spec

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
