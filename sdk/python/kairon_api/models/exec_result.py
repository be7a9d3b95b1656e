from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="ExecResult")


@_attrs_define
class ExecResult:
    """
    Attributes:
        exit_code (int):
        stderr (str):
        stdout (str):
        timed_out (bool | Unset):
        truncated (bool | Unset): The output went past the server's limit on each stream (16 MiB by default): what is
            here is its beginning, and the rest was not kept.
    """

    exit_code: int
    stderr: str
    stdout: str
    timed_out: bool | Unset = UNSET
    truncated: bool | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        exit_code = self.exit_code

        stderr = self.stderr

        stdout = self.stdout

        timed_out = self.timed_out

        truncated = self.truncated

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "exitCode": exit_code,
                "stderr": stderr,
                "stdout": stdout,
            }
        )
        if timed_out is not UNSET:
            field_dict["timedOut"] = timed_out
        if truncated is not UNSET:
            field_dict["truncated"] = truncated

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        exit_code = d.pop("exitCode")

        stderr = d.pop("stderr")

        stdout = d.pop("stdout")

        timed_out = d.pop("timedOut", UNSET)

        truncated = d.pop("truncated", UNSET)

        exec_result = cls(
            exit_code=exit_code,
            stderr=stderr,
            stdout=stdout,
            timed_out=timed_out,
            truncated=truncated,
        )

        exec_result.additional_properties = d
        return exec_result

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
