from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.machine_phase import MachinePhase
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.condition import Condition
    from ..models.lifecycle_status import LifecycleStatus
    from ..models.migration_status import MigrationStatus
    from ..models.resources import Resources


T = TypeVar("T", bound="MachineStatus")


@_attrs_define
class MachineStatus:
    """
    Attributes:
        conditions (list[Condition] | Unset):
        guest_ip (None | str | Unset):
        lifecycle (LifecycleStatus | None | Unset):
        migration (MigrationStatus | None | Unset):
        node_name (None | str | Unset): The node the scheduler placed the Machine on.
        observed_generation (int | None | Unset):
        phase (MachinePhase | None | Unset):
        resources (None | Resources | Unset):
        runtime_id (None | str | Unset): The runtime's id of the instance.
    """

    conditions: list[Condition] | Unset = UNSET
    guest_ip: None | str | Unset = UNSET
    lifecycle: LifecycleStatus | None | Unset = UNSET
    migration: MigrationStatus | None | Unset = UNSET
    node_name: None | str | Unset = UNSET
    observed_generation: int | None | Unset = UNSET
    phase: MachinePhase | None | Unset = UNSET
    resources: None | Resources | Unset = UNSET
    runtime_id: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.lifecycle_status import LifecycleStatus
        from ..models.migration_status import MigrationStatus
        from ..models.resources import Resources

        conditions: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.conditions, Unset):
            conditions = []
            for conditions_item_data in self.conditions:
                conditions_item = conditions_item_data.to_dict()
                conditions.append(conditions_item)

        guest_ip: None | str | Unset
        if isinstance(self.guest_ip, Unset):
            guest_ip = UNSET
        else:
            guest_ip = self.guest_ip

        lifecycle: dict[str, Any] | None | Unset
        if isinstance(self.lifecycle, Unset):
            lifecycle = UNSET
        elif isinstance(self.lifecycle, LifecycleStatus):
            lifecycle = self.lifecycle.to_dict()
        else:
            lifecycle = self.lifecycle

        migration: dict[str, Any] | None | Unset
        if isinstance(self.migration, Unset):
            migration = UNSET
        elif isinstance(self.migration, MigrationStatus):
            migration = self.migration.to_dict()
        else:
            migration = self.migration

        node_name: None | str | Unset
        if isinstance(self.node_name, Unset):
            node_name = UNSET
        else:
            node_name = self.node_name

        observed_generation: int | None | Unset
        if isinstance(self.observed_generation, Unset):
            observed_generation = UNSET
        else:
            observed_generation = self.observed_generation

        phase: None | str | Unset
        if isinstance(self.phase, Unset):
            phase = UNSET
        elif isinstance(self.phase, MachinePhase):
            phase = self.phase.value
        else:
            phase = self.phase

        resources: dict[str, Any] | None | Unset
        if isinstance(self.resources, Unset):
            resources = UNSET
        elif isinstance(self.resources, Resources):
            resources = self.resources.to_dict()
        else:
            resources = self.resources

        runtime_id: None | str | Unset
        if isinstance(self.runtime_id, Unset):
            runtime_id = UNSET
        else:
            runtime_id = self.runtime_id

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({})
        if conditions is not UNSET:
            field_dict["conditions"] = conditions
        if guest_ip is not UNSET:
            field_dict["guestIP"] = guest_ip
        if lifecycle is not UNSET:
            field_dict["lifecycle"] = lifecycle
        if migration is not UNSET:
            field_dict["migration"] = migration
        if node_name is not UNSET:
            field_dict["nodeName"] = node_name
        if observed_generation is not UNSET:
            field_dict["observedGeneration"] = observed_generation
        if phase is not UNSET:
            field_dict["phase"] = phase
        if resources is not UNSET:
            field_dict["resources"] = resources
        if runtime_id is not UNSET:
            field_dict["runtimeID"] = runtime_id

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.condition import Condition
        from ..models.lifecycle_status import LifecycleStatus
        from ..models.migration_status import MigrationStatus
        from ..models.resources import Resources

        d = dict(src_dict)
        _conditions = d.pop("conditions", UNSET)
        conditions: list[Condition] | Unset = UNSET
        if _conditions is not UNSET:
            conditions = []
            for conditions_item_data in _conditions:
                conditions_item = Condition.from_dict(conditions_item_data)

                conditions.append(conditions_item)

        def _parse_guest_ip(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        guest_ip = _parse_guest_ip(d.pop("guestIP", UNSET))

        def _parse_lifecycle(data: object) -> LifecycleStatus | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                lifecycle_type_0 = LifecycleStatus.from_dict(data)

                return lifecycle_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(LifecycleStatus | None | Unset, data)

        lifecycle = _parse_lifecycle(d.pop("lifecycle", UNSET))

        def _parse_migration(data: object) -> MigrationStatus | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                migration_type_0 = MigrationStatus.from_dict(data)

                return migration_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(MigrationStatus | None | Unset, data)

        migration = _parse_migration(d.pop("migration", UNSET))

        def _parse_node_name(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        node_name = _parse_node_name(d.pop("nodeName", UNSET))

        def _parse_observed_generation(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        observed_generation = _parse_observed_generation(
            d.pop("observedGeneration", UNSET)
        )

        def _parse_phase(data: object) -> MachinePhase | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                phase_type_0 = MachinePhase(data)

                return phase_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(MachinePhase | None | Unset, data)

        phase = _parse_phase(d.pop("phase", UNSET))

        def _parse_resources(data: object) -> None | Resources | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                resources_type_0 = Resources.from_dict(data)

                return resources_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Resources | Unset, data)

        resources = _parse_resources(d.pop("resources", UNSET))

        def _parse_runtime_id(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        runtime_id = _parse_runtime_id(d.pop("runtimeID", UNSET))

        machine_status = cls(
            conditions=conditions,
            guest_ip=guest_ip,
            lifecycle=lifecycle,
            migration=migration,
            node_name=node_name,
            observed_generation=observed_generation,
            phase=phase,
            resources=resources,
            runtime_id=runtime_id,
        )

        machine_status.additional_properties = d
        return machine_status

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
