from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.acceleration import Acceleration
from ..models.node_backend import NodeBackend
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.node_capacity import NodeCapacity


T = TypeVar("T", bound="KaironNodeSpec")


@_attrs_define
class KaironNodeSpec:
    """A node that runs Machines: where its runtime listens, what it holds, which backends it has.

    Attributes:
        runtime_endpoint (str): The FluxVM v1 API of this node's runtime (a URL or `unix:/path`).
        acceleration (Acceleration | None | Unset):
        backends (list[NodeBackend] | Unset): Backends the runtime offers.
        capacity (NodeCapacity | None | Unset):
        runtime_certificate_sha_256 (None | str | Unset): The SHA-256 (64 lowercase hex digits) of the certificate this
            node's `https` runtime
            serves, registered by its node agent: the api trusts that certificate alone for this
            node, so no other node's certificate passes for it. Only the node itself (and admins)
            may write its KaironNode.
    """

    runtime_endpoint: str
    acceleration: Acceleration | None | Unset = UNSET
    backends: list[NodeBackend] | Unset = UNSET
    capacity: NodeCapacity | None | Unset = UNSET
    runtime_certificate_sha_256: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.node_capacity import NodeCapacity

        runtime_endpoint = self.runtime_endpoint

        acceleration: None | str | Unset
        if isinstance(self.acceleration, Unset):
            acceleration = UNSET
        elif isinstance(self.acceleration, Acceleration):
            acceleration = self.acceleration.value
        else:
            acceleration = self.acceleration

        backends: list[str] | Unset = UNSET
        if not isinstance(self.backends, Unset):
            backends = []
            for backends_item_data in self.backends:
                backends_item = backends_item_data.value
                backends.append(backends_item)

        capacity: dict[str, Any] | None | Unset
        if isinstance(self.capacity, Unset):
            capacity = UNSET
        elif isinstance(self.capacity, NodeCapacity):
            capacity = self.capacity.to_dict()
        else:
            capacity = self.capacity

        runtime_certificate_sha_256: None | str | Unset
        if isinstance(self.runtime_certificate_sha_256, Unset):
            runtime_certificate_sha_256 = UNSET
        else:
            runtime_certificate_sha_256 = self.runtime_certificate_sha_256

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "runtimeEndpoint": runtime_endpoint,
            }
        )
        if acceleration is not UNSET:
            field_dict["acceleration"] = acceleration
        if backends is not UNSET:
            field_dict["backends"] = backends
        if capacity is not UNSET:
            field_dict["capacity"] = capacity
        if runtime_certificate_sha_256 is not UNSET:
            field_dict["runtimeCertificateSha256"] = runtime_certificate_sha_256

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.node_capacity import NodeCapacity

        d = dict(src_dict)
        runtime_endpoint = d.pop("runtimeEndpoint")

        def _parse_acceleration(data: object) -> Acceleration | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                acceleration_type_0 = Acceleration(data)

                return acceleration_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(Acceleration | None | Unset, data)

        acceleration = _parse_acceleration(d.pop("acceleration", UNSET))

        _backends = d.pop("backends", UNSET)
        backends: list[NodeBackend] | Unset = UNSET
        if _backends is not UNSET:
            backends = []
            for backends_item_data in _backends:
                backends_item = NodeBackend(backends_item_data)

                backends.append(backends_item)

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

        def _parse_runtime_certificate_sha_256(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        runtime_certificate_sha_256 = _parse_runtime_certificate_sha_256(
            d.pop("runtimeCertificateSha256", UNSET)
        )

        kairon_node_spec = cls(
            runtime_endpoint=runtime_endpoint,
            acceleration=acceleration,
            backends=backends,
            capacity=capacity,
            runtime_certificate_sha_256=runtime_certificate_sha_256,
        )

        kairon_node_spec.additional_properties = d
        return kairon_node_spec

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
