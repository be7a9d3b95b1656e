from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.event_regarding import EventRegarding
    from ..models.event_series import EventSeries
    from ..models.object_meta import ObjectMeta


T = TypeVar("T", bound="Event")


@_attrs_define
class Event:
    """An Event about an object (`events.k8s.io/v1`).

    Attributes:
        metadata (ObjectMeta): Kubernetes object metadata: `name`, `namespace`, `labels`, `annotations`, `uid`,
            `resourceVersion`, `creationTimestamp`, `deletionTimestamp`, `ownerReferences`, `finalizers`.
        regarding (EventRegarding):
        action (None | str | Unset):
        event_time (None | str | Unset):
        note (None | str | Unset):
        reason (None | str | Unset):
        reporting_controller (None | str | Unset):
        series (EventSeries | None | Unset):
        type_ (None | str | Unset): `Normal` or `Warning`.
    """

    metadata: ObjectMeta
    regarding: EventRegarding
    action: None | str | Unset = UNSET
    event_time: None | str | Unset = UNSET
    note: None | str | Unset = UNSET
    reason: None | str | Unset = UNSET
    reporting_controller: None | str | Unset = UNSET
    series: EventSeries | None | Unset = UNSET
    type_: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.event_series import EventSeries

        metadata = self.metadata.to_dict()

        regarding = self.regarding.to_dict()

        action: None | str | Unset
        if isinstance(self.action, Unset):
            action = UNSET
        else:
            action = self.action

        event_time: None | str | Unset
        if isinstance(self.event_time, Unset):
            event_time = UNSET
        else:
            event_time = self.event_time

        note: None | str | Unset
        if isinstance(self.note, Unset):
            note = UNSET
        else:
            note = self.note

        reason: None | str | Unset
        if isinstance(self.reason, Unset):
            reason = UNSET
        else:
            reason = self.reason

        reporting_controller: None | str | Unset
        if isinstance(self.reporting_controller, Unset):
            reporting_controller = UNSET
        else:
            reporting_controller = self.reporting_controller

        series: dict[str, Any] | None | Unset
        if isinstance(self.series, Unset):
            series = UNSET
        elif isinstance(self.series, EventSeries):
            series = self.series.to_dict()
        else:
            series = self.series

        type_: None | str | Unset
        if isinstance(self.type_, Unset):
            type_ = UNSET
        else:
            type_ = self.type_

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "metadata": metadata,
                "regarding": regarding,
            }
        )
        if action is not UNSET:
            field_dict["action"] = action
        if event_time is not UNSET:
            field_dict["eventTime"] = event_time
        if note is not UNSET:
            field_dict["note"] = note
        if reason is not UNSET:
            field_dict["reason"] = reason
        if reporting_controller is not UNSET:
            field_dict["reportingController"] = reporting_controller
        if series is not UNSET:
            field_dict["series"] = series
        if type_ is not UNSET:
            field_dict["type"] = type_

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.event_regarding import EventRegarding
        from ..models.event_series import EventSeries
        from ..models.object_meta import ObjectMeta

        d = dict(src_dict)
        metadata = ObjectMeta.from_dict(d.pop("metadata"))

        regarding = EventRegarding.from_dict(d.pop("regarding"))

        def _parse_action(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        action = _parse_action(d.pop("action", UNSET))

        def _parse_event_time(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        event_time = _parse_event_time(d.pop("eventTime", UNSET))

        def _parse_note(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        note = _parse_note(d.pop("note", UNSET))

        def _parse_reason(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        reason = _parse_reason(d.pop("reason", UNSET))

        def _parse_reporting_controller(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        reporting_controller = _parse_reporting_controller(
            d.pop("reportingController", UNSET)
        )

        def _parse_series(data: object) -> EventSeries | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                series_type_0 = EventSeries.from_dict(data)

                return series_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(EventSeries | None | Unset, data)

        series = _parse_series(d.pop("series", UNSET))

        def _parse_type_(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        type_ = _parse_type_(d.pop("type", UNSET))

        event = cls(
            metadata=metadata,
            regarding=regarding,
            action=action,
            event_time=event_time,
            note=note,
            reason=reason,
            reporting_controller=reporting_controller,
            series=series,
            type_=type_,
        )

        event.additional_properties = d
        return event

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
