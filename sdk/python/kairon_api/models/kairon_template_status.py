from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.template_phase import TemplatePhase
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.condition import Condition
    from ..models.template_node_build import TemplateNodeBuild


T = TypeVar("T", bound="KaironTemplateStatus")


@_attrs_define
class KaironTemplateStatus:
    """
    Attributes:
        conditions (list[Condition] | Unset):
        message (None | str | Unset): What the last build said: its progress, or why it failed.
        nodes (list[TemplateNodeBuild] | Unset): Each node's build.
        phase (TemplatePhase | Unset): Where a template's builds stand.
    """

    conditions: list[Condition] | Unset = UNSET
    message: None | str | Unset = UNSET
    nodes: list[TemplateNodeBuild] | Unset = UNSET
    phase: TemplatePhase | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        conditions: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.conditions, Unset):
            conditions = []
            for conditions_item_data in self.conditions:
                conditions_item = conditions_item_data.to_dict()
                conditions.append(conditions_item)

        message: None | str | Unset
        if isinstance(self.message, Unset):
            message = UNSET
        else:
            message = self.message

        nodes: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.nodes, Unset):
            nodes = []
            for nodes_item_data in self.nodes:
                nodes_item = nodes_item_data.to_dict()
                nodes.append(nodes_item)

        phase: str | Unset = UNSET
        if not isinstance(self.phase, Unset):
            phase = self.phase.value

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({})
        if conditions is not UNSET:
            field_dict["conditions"] = conditions
        if message is not UNSET:
            field_dict["message"] = message
        if nodes is not UNSET:
            field_dict["nodes"] = nodes
        if phase is not UNSET:
            field_dict["phase"] = phase

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.condition import Condition
        from ..models.template_node_build import TemplateNodeBuild

        d = dict(src_dict)
        _conditions = d.pop("conditions", UNSET)
        conditions: list[Condition] | Unset = UNSET
        if _conditions is not UNSET:
            conditions = []
            for conditions_item_data in _conditions:
                conditions_item = Condition.from_dict(conditions_item_data)

                conditions.append(conditions_item)

        def _parse_message(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        message = _parse_message(d.pop("message", UNSET))

        _nodes = d.pop("nodes", UNSET)
        nodes: list[TemplateNodeBuild] | Unset = UNSET
        if _nodes is not UNSET:
            nodes = []
            for nodes_item_data in _nodes:
                nodes_item = TemplateNodeBuild.from_dict(nodes_item_data)

                nodes.append(nodes_item)

        _phase = d.pop("phase", UNSET)
        phase: TemplatePhase | Unset
        if isinstance(_phase, Unset):
            phase = UNSET
        else:
            phase = TemplatePhase(_phase)

        kairon_template_status = cls(
            conditions=conditions,
            message=message,
            nodes=nodes,
            phase=phase,
        )

        kairon_template_status.additional_properties = d
        return kairon_template_status

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
