from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.condition import Condition
    from ..models.node_capacity import NodeCapacity


T = TypeVar("T", bound="KaironNodeStatus")


@_attrs_define
class KaironNodeStatus:
    """
    Attributes:
        capacity (NodeCapacity | None | Unset):
        conditions (list[Condition] | Unset):
        heartbeat_time (datetime.datetime | None | Unset):
        templates (list[str] | None | Unset): The templates built on this node (Ready to start sandboxes from), as its
            agent last
            reported them with its heartbeat; absent until it has. The scheduler places a template
            sandbox on a node that has its template when one does.
    """

    capacity: NodeCapacity | None | Unset = UNSET
    conditions: list[Condition] | Unset = UNSET
    heartbeat_time: datetime.datetime | None | Unset = UNSET
    templates: list[str] | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.node_capacity import NodeCapacity

        capacity: dict[str, Any] | None | Unset
        if isinstance(self.capacity, Unset):
            capacity = UNSET
        elif isinstance(self.capacity, NodeCapacity):
            capacity = self.capacity.to_dict()
        else:
            capacity = self.capacity

        conditions: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.conditions, Unset):
            conditions = []
            for conditions_item_data in self.conditions:
                conditions_item = conditions_item_data.to_dict()
                conditions.append(conditions_item)

        heartbeat_time: None | str | Unset
        if isinstance(self.heartbeat_time, Unset):
            heartbeat_time = UNSET
        elif isinstance(self.heartbeat_time, datetime.datetime):
            heartbeat_time = self.heartbeat_time.isoformat()
        else:
            heartbeat_time = self.heartbeat_time

        templates: list[str] | None | Unset
        if isinstance(self.templates, Unset):
            templates = UNSET
        elif isinstance(self.templates, list):
            templates = self.templates

        else:
            templates = self.templates

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({})
        if capacity is not UNSET:
            field_dict["capacity"] = capacity
        if conditions is not UNSET:
            field_dict["conditions"] = conditions
        if heartbeat_time is not UNSET:
            field_dict["heartbeatTime"] = heartbeat_time
        if templates is not UNSET:
            field_dict["templates"] = templates

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.condition import Condition
        from ..models.node_capacity import NodeCapacity

        d = dict(src_dict)

        def _parse_capacity(data: object) -> NodeCapacity | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                capacity_type_0 = NodeCapacity.from_dict(data)

                return capacity_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(NodeCapacity | None | Unset, data)

        capacity = _parse_capacity(d.pop("capacity", UNSET))

        _conditions = d.pop("conditions", UNSET)
        conditions: list[Condition] | Unset = UNSET
        if _conditions is not UNSET:
            conditions = []
            for conditions_item_data in _conditions:
                conditions_item = Condition.from_dict(conditions_item_data)

                conditions.append(conditions_item)

        def _parse_heartbeat_time(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                heartbeat_time_type_0 = datetime.datetime.fromisoformat(data)

                return heartbeat_time_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        heartbeat_time = _parse_heartbeat_time(d.pop("heartbeatTime", UNSET))

        def _parse_templates(data: object) -> list[str] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                templates_type_0 = cast(list[str], data)

                return templates_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[str] | None | Unset, data)

        templates = _parse_templates(d.pop("templates", UNSET))

        kairon_node_status = cls(
            capacity=capacity,
            conditions=conditions,
            heartbeat_time=heartbeat_time,
            templates=templates,
        )

        kairon_node_status.additional_properties = d
        return kairon_node_status

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
