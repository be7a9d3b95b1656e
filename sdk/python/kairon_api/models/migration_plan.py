from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.migration_mode import MigrationMode

if TYPE_CHECKING:
    from ..models.node_fit import NodeFit


T = TypeVar("T", bound="MigrationPlan")


@_attrs_define
class MigrationPlan:
    """Where a Machine would move, how, and why each node fits or not.

    Attributes:
        mode (MigrationMode): How a Machine moves between nodes.
        nodes (list[NodeFit]): Every node, in name order, and whether it could take the Machine.
        source (str): The node it runs on.
        steps (list[str]): What the migration does, in order.
        target (str): The node it moves to.
    """

    mode: MigrationMode
    nodes: list[NodeFit]
    source: str
    steps: list[str]
    target: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        mode = self.mode.value

        nodes = []
        for nodes_item_data in self.nodes:
            nodes_item = nodes_item_data.to_dict()
            nodes.append(nodes_item)

        source = self.source

        steps = self.steps

        target = self.target

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "mode": mode,
                "nodes": nodes,
                "source": source,
                "steps": steps,
                "target": target,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.node_fit import NodeFit

        d = dict(src_dict)
        mode = MigrationMode(d.pop("mode"))

        nodes = []
        _nodes = d.pop("nodes")
        for nodes_item_data in _nodes:
            nodes_item = NodeFit.from_dict(nodes_item_data)

            nodes.append(nodes_item)

        source = d.pop("source")

        steps = cast(list[str], d.pop("steps"))

        target = d.pop("target")

        migration_plan = cls(
            mode=mode,
            nodes=nodes,
            source=source,
            steps=steps,
            target=target,
        )

        migration_plan.additional_properties = d
        return migration_plan

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
