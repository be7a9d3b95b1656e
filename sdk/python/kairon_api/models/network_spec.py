from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.network_mode import NetworkMode
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.egress_spec import EgressSpec


T = TypeVar("T", bound="NetworkSpec")


@_attrs_define
class NetworkSpec:
    """
    Attributes:
        bridge (None | str | Unset): Host bridge to attach to (mode Bridge).
        egress (EgressSpec | None | Unset):
        mac_address (None | str | Unset): Fixed MAC address; generated when unset.
        mode (NetworkMode | Unset): How the guest is networked. `User` (SLIRP-like) has no guest IP; `Tap` and `Bridge`
            give
            the guest an address the sandbox HTTP proxy can dial.
    """

    bridge: None | str | Unset = UNSET
    egress: EgressSpec | None | Unset = UNSET
    mac_address: None | str | Unset = UNSET
    mode: NetworkMode | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.egress_spec import EgressSpec

        bridge: None | str | Unset
        if isinstance(self.bridge, Unset):
            bridge = UNSET
        else:
            bridge = self.bridge

        egress: dict[str, Any] | None | Unset
        if isinstance(self.egress, Unset):
            egress = UNSET
        elif isinstance(self.egress, EgressSpec):
            egress = self.egress.to_dict()
        else:
            egress = self.egress

        mac_address: None | str | Unset
        if isinstance(self.mac_address, Unset):
            mac_address = UNSET
        else:
            mac_address = self.mac_address

        mode: str | Unset = UNSET
        if not isinstance(self.mode, Unset):
            mode = self.mode.value

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({})
        if bridge is not UNSET:
            field_dict["bridge"] = bridge
        if egress is not UNSET:
            field_dict["egress"] = egress
        if mac_address is not UNSET:
            field_dict["macAddress"] = mac_address
        if mode is not UNSET:
            field_dict["mode"] = mode

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.egress_spec import EgressSpec

        d = dict(src_dict)

        def _parse_bridge(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        bridge = _parse_bridge(d.pop("bridge", UNSET))

        def _parse_egress(data: object) -> EgressSpec | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                egress_type_0 = EgressSpec.from_dict(data)

                return egress_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(EgressSpec | None | Unset, data)

        egress = _parse_egress(d.pop("egress", UNSET))

        def _parse_mac_address(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        mac_address = _parse_mac_address(d.pop("macAddress", UNSET))

        _mode = d.pop("mode", UNSET)
        mode: NetworkMode | Unset
        if isinstance(_mode, Unset):
            mode = UNSET
        else:
            mode = NetworkMode(_mode)

        network_spec = cls(
            bridge=bridge,
            egress=egress,
            mac_address=mac_address,
            mode=mode,
        )

        network_spec.additional_properties = d
        return network_spec

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
