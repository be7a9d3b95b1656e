from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.secret_key_ref import SecretKeyRef


T = TypeVar("T", bound="MachineClaimSpecSecretEnv")


@_attrs_define
class MachineClaimSpecSecretEnv:
    """Secret keys for every exec and process in the bound Machine, as a Machine's
    `spec.secretEnv` (written onto the member when the claim binds, over its own; immutable).

    """

    additional_properties: dict[str, SecretKeyRef] = _attrs_field(
        init=False, factory=dict
    )

    def to_dict(self) -> dict[str, Any]:

        field_dict: dict[str, Any] = {}
        for prop_name, prop in self.additional_properties.items():
            field_dict[prop_name] = prop.to_dict()

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.secret_key_ref import SecretKeyRef

        d = dict(src_dict)
        machine_claim_spec_secret_env = cls()

        additional_properties = {}
        for prop_name, prop_dict in d.items():
            additional_property = SecretKeyRef.from_dict(prop_dict)

            additional_properties[prop_name] = additional_property

        machine_claim_spec_secret_env.additional_properties = additional_properties
        return machine_claim_spec_secret_env

    @property
    def additional_keys(self) -> list[str]:
        return list(self.additional_properties.keys())

    def __getitem__(self, key: str) -> SecretKeyRef:
        return self.additional_properties[key]

    def __setitem__(self, key: str, value: SecretKeyRef) -> None:
        self.additional_properties[key] = value

    def __delitem__(self, key: str) -> None:
        del self.additional_properties[key]

    def __contains__(self, key: str) -> bool:
        return key in self.additional_properties
