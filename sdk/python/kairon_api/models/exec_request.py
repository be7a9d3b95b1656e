from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.exec_request_env import ExecRequestEnv


T = TypeVar("T", bound="ExecRequest")


@_attrs_define
class ExecRequest:
    """`Debug` names the environment's variables, never their values (they may be a Machine's
    `spec.secretEnv`).

        Attributes:
            command (list[str]):
            cwd (None | str | Unset):
            env (ExecRequestEnv | Unset):
            keep_stdin_open (bool | Unset): Background processes only: keep stdin open (after `stdin`, if given) for
                `POST .../processes/{pid}/stdin`, until that closes it.
            stdin (None | str | Unset): Sent to the command's standard input, then closed.
            timeout_seconds (int | None | Unset):
            user (None | str | Unset): Run as `uid[:gid]` instead of root.
    """

    command: list[str]
    cwd: None | str | Unset = UNSET
    env: ExecRequestEnv | Unset = UNSET
    keep_stdin_open: bool | Unset = UNSET
    stdin: None | str | Unset = UNSET
    timeout_seconds: int | None | Unset = UNSET
    user: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        command = []
        for command_item_data in self.command:
            command_item: str
            command_item = command_item_data
            command.append(command_item)

        cwd: None | str | Unset
        if isinstance(self.cwd, Unset):
            cwd = UNSET
        else:
            cwd = self.cwd

        env: dict[str, Any] | Unset = UNSET
        if not isinstance(self.env, Unset):
            env = self.env.to_dict()

        keep_stdin_open = self.keep_stdin_open

        stdin: None | str | Unset
        if isinstance(self.stdin, Unset):
            stdin = UNSET
        else:
            stdin = self.stdin

        timeout_seconds: int | None | Unset
        if isinstance(self.timeout_seconds, Unset):
            timeout_seconds = UNSET
        else:
            timeout_seconds = self.timeout_seconds

        user: None | str | Unset
        if isinstance(self.user, Unset):
            user = UNSET
        else:
            user = self.user

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "command": command,
            }
        )
        if cwd is not UNSET:
            field_dict["cwd"] = cwd
        if env is not UNSET:
            field_dict["env"] = env
        if keep_stdin_open is not UNSET:
            field_dict["keepStdinOpen"] = keep_stdin_open
        if stdin is not UNSET:
            field_dict["stdin"] = stdin
        if timeout_seconds is not UNSET:
            field_dict["timeoutSeconds"] = timeout_seconds
        if user is not UNSET:
            field_dict["user"] = user

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.exec_request_env import ExecRequestEnv

        d = dict(src_dict)
        command = []
        _command = d.pop("command")
        for command_item_data in _command:

            def _parse_command_item(data: object) -> str:
                return cast(str, data)

            command_item = _parse_command_item(command_item_data)

            command.append(command_item)

        def _parse_cwd(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        cwd = _parse_cwd(d.pop("cwd", UNSET))

        _env = d.pop("env", UNSET)
        env: ExecRequestEnv | Unset
        if isinstance(_env, Unset):
            env = UNSET
        else:
            env = ExecRequestEnv.from_dict(_env)

        keep_stdin_open = d.pop("keepStdinOpen", UNSET)

        def _parse_stdin(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        stdin = _parse_stdin(d.pop("stdin", UNSET))

        def _parse_timeout_seconds(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        timeout_seconds = _parse_timeout_seconds(d.pop("timeoutSeconds", UNSET))

        def _parse_user(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        user = _parse_user(d.pop("user", UNSET))

        exec_request = cls(
            command=command,
            cwd=cwd,
            env=env,
            keep_stdin_open=keep_stdin_open,
            stdin=stdin,
            timeout_seconds=timeout_seconds,
            user=user,
        )

        exec_request.additional_properties = d
        return exec_request

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
