from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.template_state import TemplateState
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.image_config import ImageConfig


T = TypeVar("T", bound="Template")


@_attrs_define
class Template:
    """
    Attributes:
        bytes_done (int): Progress while building.
        created_at (str):
        image_ref (str): Where it came from: an image reference, or `builtin:busybox` / `builtin:python`.
        name (str):
        state (TemplateState):
        bytes_total (int | None | Unset):
        config (ImageConfig | Unset): The image config a template keeps (entrypoint, env, working dir).
        digest (None | str | Unset):
        message (None | str | Unset):
        steps (list[str] | Unset): The build steps, run in order over the image (as the build request gave them).
        steps_done (int | Unset): How many steps have finished: progress while Building, and on a Failed build the step
            that failed is the next one.
    """

    bytes_done: int
    created_at: str
    image_ref: str
    name: str
    state: TemplateState
    bytes_total: int | None | Unset = UNSET
    config: ImageConfig | Unset = UNSET
    digest: None | str | Unset = UNSET
    message: None | str | Unset = UNSET
    steps: list[str] | Unset = UNSET
    steps_done: int | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        bytes_done = self.bytes_done

        created_at = self.created_at

        image_ref = self.image_ref

        name = self.name

        state = self.state.value

        bytes_total: int | None | Unset
        if isinstance(self.bytes_total, Unset):
            bytes_total = UNSET
        else:
            bytes_total = self.bytes_total

        config: dict[str, Any] | Unset = UNSET
        if not isinstance(self.config, Unset):
            config = self.config.to_dict()

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

        steps: list[str] | Unset = UNSET
        if not isinstance(self.steps, Unset):
            steps = self.steps

        steps_done = self.steps_done

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "bytesDone": bytes_done,
                "createdAt": created_at,
                "imageRef": image_ref,
                "name": name,
                "state": state,
            }
        )
        if bytes_total is not UNSET:
            field_dict["bytesTotal"] = bytes_total
        if config is not UNSET:
            field_dict["config"] = config
        if digest is not UNSET:
            field_dict["digest"] = digest
        if message is not UNSET:
            field_dict["message"] = message
        if steps is not UNSET:
            field_dict["steps"] = steps
        if steps_done is not UNSET:
            field_dict["stepsDone"] = steps_done

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.image_config import ImageConfig

        d = dict(src_dict)
        bytes_done = d.pop("bytesDone")

        created_at = d.pop("createdAt")

        image_ref = d.pop("imageRef")

        name = d.pop("name")

        state = TemplateState(d.pop("state"))

        def _parse_bytes_total(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        bytes_total = _parse_bytes_total(d.pop("bytesTotal", UNSET))

        _config = d.pop("config", UNSET)
        config: ImageConfig | Unset
        if isinstance(_config, Unset):
            config = UNSET
        else:
            config = ImageConfig.from_dict(_config)

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

        steps = cast(list[str], d.pop("steps", UNSET))

        steps_done = d.pop("stepsDone", UNSET)

        template = cls(
            bytes_done=bytes_done,
            created_at=created_at,
            image_ref=image_ref,
            name=name,
            state=state,
            bytes_total=bytes_total,
            config=config,
            digest=digest,
            message=message,
            steps=steps,
            steps_done=steps_done,
        )

        template.additional_properties = d
        return template

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
