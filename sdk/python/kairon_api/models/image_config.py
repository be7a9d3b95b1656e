from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="ImageConfig")


@_attrs_define
class ImageConfig:
    """The image config a template keeps (entrypoint, env, working dir).

    Attributes:
        cmd (list[str] | Unset):
        entrypoint (list[str] | Unset):
        env (list[str] | Unset):
        user (None | str | Unset):
        working_dir (None | str | Unset):
    """

    cmd: list[str] | Unset = UNSET
    entrypoint: list[str] | Unset = UNSET
    env: list[str] | Unset = UNSET
    user: None | str | Unset = UNSET
    working_dir: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        cmd: list[str] | Unset = UNSET
        if not isinstance(self.cmd, Unset):
            cmd = self.cmd

        entrypoint: list[str] | Unset = UNSET
        if not isinstance(self.entrypoint, Unset):
            entrypoint = self.entrypoint

        env: list[str] | Unset = UNSET
        if not isinstance(self.env, Unset):
            env = self.env

        user: None | str | Unset
        if isinstance(self.user, Unset):
            user = UNSET
        else:
            user = self.user

        working_dir: None | str | Unset
        if isinstance(self.working_dir, Unset):
            working_dir = UNSET
        else:
            working_dir = self.working_dir

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({})
        if cmd is not UNSET:
            field_dict["cmd"] = cmd
        if entrypoint is not UNSET:
            field_dict["entrypoint"] = entrypoint
        if env is not UNSET:
            field_dict["env"] = env
        if user is not UNSET:
            field_dict["user"] = user
        if working_dir is not UNSET:
            field_dict["workingDir"] = working_dir

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        cmd = cast(list[str], d.pop("cmd", UNSET))

        entrypoint = cast(list[str], d.pop("entrypoint", UNSET))

        env = cast(list[str], d.pop("env", UNSET))

        def _parse_user(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        user = _parse_user(d.pop("user", UNSET))

        def _parse_working_dir(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        working_dir = _parse_working_dir(d.pop("workingDir", UNSET))

        image_config = cls(
            cmd=cmd,
            entrypoint=entrypoint,
            env=env,
            user=user,
            working_dir=working_dir,
        )

        image_config.additional_properties = d
        return image_config

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
