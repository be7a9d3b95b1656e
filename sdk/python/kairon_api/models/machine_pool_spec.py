from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.warm_power_state import WarmPowerState
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.machine_template import MachineTemplate
    from ..models.pool_autoscale import PoolAutoscale


T = TypeVar("T", bound="MachinePoolSpec")


@_attrs_define
class MachinePoolSpec:
    """Keeps `replicas` warm members, Running or Paused, for MachineClaims to take.

    Attributes:
        replicas (int): How many unclaimed members to keep.
        template (MachineTemplate):
        autoscale (None | PoolAutoscale | Unset):
        warm_power_state (WarmPowerState | Unset):
        warmup_seconds (int | Unset): How long a member runs after booting before it is paused (Paused pools).
    """

    replicas: int
    template: MachineTemplate
    autoscale: None | PoolAutoscale | Unset = UNSET
    warm_power_state: WarmPowerState | Unset = UNSET
    warmup_seconds: int | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.pool_autoscale import PoolAutoscale

        replicas = self.replicas

        template = self.template.to_dict()

        autoscale: dict[str, Any] | None | Unset
        if isinstance(self.autoscale, Unset):
            autoscale = UNSET
        elif isinstance(self.autoscale, PoolAutoscale):
            autoscale = self.autoscale.to_dict()
        else:
            autoscale = self.autoscale

        warm_power_state: str | Unset = UNSET
        if not isinstance(self.warm_power_state, Unset):
            warm_power_state = self.warm_power_state.value

        warmup_seconds = self.warmup_seconds

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "replicas": replicas,
                "template": template,
            }
        )
        if autoscale is not UNSET:
            field_dict["autoscale"] = autoscale
        if warm_power_state is not UNSET:
            field_dict["warmPowerState"] = warm_power_state
        if warmup_seconds is not UNSET:
            field_dict["warmupSeconds"] = warmup_seconds

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.machine_template import MachineTemplate
        from ..models.pool_autoscale import PoolAutoscale

        d = dict(src_dict)
        replicas = d.pop("replicas")

        template = MachineTemplate.from_dict(d.pop("template"))

        def _parse_autoscale(data: object) -> None | PoolAutoscale | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                autoscale_type_0 = PoolAutoscale.from_dict(data)

                return autoscale_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | PoolAutoscale | Unset, data)

        autoscale = _parse_autoscale(d.pop("autoscale", UNSET))

        _warm_power_state = d.pop("warmPowerState", UNSET)
        warm_power_state: WarmPowerState | Unset
        if isinstance(_warm_power_state, Unset):
            warm_power_state = UNSET
        else:
            warm_power_state = WarmPowerState(_warm_power_state)

        warmup_seconds = d.pop("warmupSeconds", UNSET)

        machine_pool_spec = cls(
            replicas=replicas,
            template=template,
            autoscale=autoscale,
            warm_power_state=warm_power_state,
            warmup_seconds=warmup_seconds,
        )

        machine_pool_spec.additional_properties = d
        return machine_pool_spec

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
