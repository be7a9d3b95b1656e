from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.template_phase import TemplatePhase
from ..types import UNSET, Unset

T = TypeVar("T", bound="TemplateNodeBuild")


@_attrs_define
class TemplateNodeBuild:
    """A template's build on one node.

    Attributes:
        node (str):
        phase (TemplatePhase): Where a template's builds stand.
        bytes_done (int | Unset):
        bytes_total (int | None | Unset):
        digest (None | str | Unset): The image's digest, once pulled.
        message (None | str | Unset):
        steps_done (int | Unset):
    """

    node: str
    phase: TemplatePhase
    bytes_done: int | Unset = UNSET
    bytes_total: int | None | Unset = UNSET
    digest: None | str | Unset = UNSET
    message: None | str | Unset = UNSET
    steps_done: int | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        node = self.node

        phase = self.phase.value

        bytes_done = self.bytes_done

        bytes_total: int | None | Unset
        if isinstance(self.bytes_total, Unset):
            bytes_total = UNSET
        else:
            bytes_total = self.bytes_total

        digest: None | str | Unset
        if isinstance(self.digest, Unset):
            digest = UNSET
        else:
            digest = self.digest

        message: None | str | Unset
        if isinstance(self.message, Unset):
            message = UNSET
        else:
            message = self.message

        steps_done = self.steps_done

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "node": node,
                "phase": phase,
            }
        )
        if bytes_done is not UNSET:
            field_dict["bytesDone"] = bytes_done
        if bytes_total is not UNSET:
            field_dict["bytesTotal"] = bytes_total
        if digest is not UNSET:
            field_dict["digest"] = digest
        if message is not UNSET:
            field_dict["message"] = message
        if steps_done is not UNSET:
            field_dict["stepsDone"] = steps_done

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        node = d.pop("node")

        phase = TemplatePhase(d.pop("phase"))

        bytes_done = d.pop("bytesDone", UNSET)

        def _parse_bytes_total(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        bytes_total = _parse_bytes_total(d.pop("bytesTotal", UNSET))

        def _parse_digest(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        digest = _parse_digest(d.pop("digest", UNSET))

        def _parse_message(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        message = _parse_message(d.pop("message", UNSET))

        steps_done = d.pop("stepsDone", UNSET)

        template_node_build = cls(
            node=node,
            phase=phase,
            bytes_done=bytes_done,
            bytes_total=bytes_total,
            digest=digest,
            message=message,
            steps_done=steps_done,
        )

        template_node_build.additional_properties = d
        return template_node_build

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
