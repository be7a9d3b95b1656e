from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.machine import Machine
    from ..models.vm import Vm


T = TypeVar("T", bound="PoolClaimResult")


@_attrs_define
class PoolClaimResult:
    """The answer of a claim with `createMachine`.

    Attributes:
        vm (Vm): An instance as the runtime reports it.
        machine (Machine | None | Unset):
        machine_error (None | str | Unset):
    """

    vm: Vm
    machine: Machine | None | Unset = UNSET
    machine_error: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.machine import Machine

        vm = self.vm.to_dict()

        machine: dict[str, Any] | None | Unset
        if isinstance(self.machine, Unset):
            machine = UNSET
        elif isinstance(self.machine, Machine):
            machine = self.machine.to_dict()
        else:
            machine = self.machine

        machine_error: None | str | Unset
        if isinstance(self.machine_error, Unset):
            machine_error = UNSET
        else:
            machine_error = self.machine_error

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "vm": vm,
            }
        )
        if machine is not UNSET:
            field_dict["machine"] = machine
        if machine_error is not UNSET:
            field_dict["machineError"] = machine_error

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.machine import Machine
        from ..models.vm import Vm

        d = dict(src_dict)
        vm = Vm.from_dict(d.pop("vm"))

        def _parse_machine(data: object) -> Machine | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                machine_type_0 = Machine.from_dict(data)

                return machine_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(Machine | None | Unset, data)

        machine = _parse_machine(d.pop("machine", UNSET))

        def _parse_machine_error(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        machine_error = _parse_machine_error(d.pop("machineError", UNSET))

        pool_claim_result = cls(
            vm=vm,
            machine=machine,
            machine_error=machine_error,
        )

        pool_claim_result.additional_properties = d
        return pool_claim_result

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
