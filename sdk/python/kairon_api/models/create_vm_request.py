from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.create_vm_request_labels import CreateVmRequestLabels
    from ..models.guest_agent import GuestAgent
    from ..models.image_source import ImageSource
    from ..models.network_spec import NetworkSpec
    from ..models.resources import Resources
    from ..models.runtime_spec import RuntimeSpec
    from ..models.sandbox_spec import SandboxSpec
    from ..models.volume import Volume


T = TypeVar("T", bound="CreateVmRequest")


@_attrs_define
class CreateVmRequest:
    """What to run: the runtime fields of a Machine spec. Pools take it as their template.

    Attributes:
        name (str): The runtime name: `kairon-<namespace>-<name>` for a Machine.
        guest_agent (GuestAgent | None | Unset):
        image (ImageSource | None | Unset):
        labels (CreateVmRequestLabels | Unset):
        network (NetworkSpec | None | Unset):
        owner_uid (None | str | Unset): The UID of the Machine that owns the instance (the node agent sets it at
            create). The
            runtime moves it to `Vm::owner_uid`; a pool template, fork or clone never carries it.
        resources (None | Resources | Unset):
        runtime (None | RuntimeSpec | Unset):
        sandbox (None | SandboxSpec | Unset):
        start_paused (bool | Unset): Boot, then pause at once (not QEMU's -S: the guest runs briefly first).
        ttl_seconds (int | None | Unset): Delete the instance this long after it is created (or claimed, for a pool
            member).
        volumes (list[Volume] | Unset):
    """

    name: str
    guest_agent: GuestAgent | None | Unset = UNSET
    image: ImageSource | None | Unset = UNSET
    labels: CreateVmRequestLabels | Unset = UNSET
    network: NetworkSpec | None | Unset = UNSET
    owner_uid: None | str | Unset = UNSET
    resources: None | Resources | Unset = UNSET
    runtime: None | RuntimeSpec | Unset = UNSET
    sandbox: None | SandboxSpec | Unset = UNSET
    start_paused: bool | Unset = UNSET
    ttl_seconds: int | None | Unset = UNSET
    volumes: list[Volume] | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.guest_agent import GuestAgent
        from ..models.image_source import ImageSource
        from ..models.network_spec import NetworkSpec
        from ..models.resources import Resources
        from ..models.runtime_spec import RuntimeSpec
        from ..models.sandbox_spec import SandboxSpec

        name = self.name

        guest_agent: dict[str, Any] | None | Unset
        if isinstance(self.guest_agent, Unset):
            guest_agent = UNSET
        elif isinstance(self.guest_agent, GuestAgent):
            guest_agent = self.guest_agent.to_dict()
        else:
            guest_agent = self.guest_agent

        image: dict[str, Any] | None | Unset
        if isinstance(self.image, Unset):
            image = UNSET
        elif isinstance(self.image, ImageSource):
            image = self.image.to_dict()
        else:
            image = self.image

        labels: dict[str, Any] | Unset = UNSET
        if not isinstance(self.labels, Unset):
            labels = self.labels.to_dict()

        network: dict[str, Any] | None | Unset
        if isinstance(self.network, Unset):
            network = UNSET
        elif isinstance(self.network, NetworkSpec):
            network = self.network.to_dict()
        else:
            network = self.network

        owner_uid: None | str | Unset
        if isinstance(self.owner_uid, Unset):
            owner_uid = UNSET
        else:
            owner_uid = self.owner_uid

        resources: dict[str, Any] | None | Unset
        if isinstance(self.resources, Unset):
            resources = UNSET
        elif isinstance(self.resources, Resources):
            resources = self.resources.to_dict()
        else:
            resources = self.resources

        runtime: dict[str, Any] | None | Unset
        if isinstance(self.runtime, Unset):
            runtime = UNSET
        elif isinstance(self.runtime, RuntimeSpec):
            runtime = self.runtime.to_dict()
        else:
            runtime = self.runtime

        sandbox: dict[str, Any] | None | Unset
        if isinstance(self.sandbox, Unset):
            sandbox = UNSET
        elif isinstance(self.sandbox, SandboxSpec):
            sandbox = self.sandbox.to_dict()
        else:
            sandbox = self.sandbox

        start_paused = self.start_paused

        ttl_seconds: int | None | Unset
        if isinstance(self.ttl_seconds, Unset):
            ttl_seconds = UNSET
        else:
            ttl_seconds = self.ttl_seconds

        volumes: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.volumes, Unset):
            volumes = []
            for volumes_item_data in self.volumes:
                volumes_item = volumes_item_data.to_dict()
                volumes.append(volumes_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "name": name,
            }
        )
        if guest_agent is not UNSET:
            field_dict["guestAgent"] = guest_agent
        if image is not UNSET:
            field_dict["image"] = image
        if labels is not UNSET:
            field_dict["labels"] = labels
        if network is not UNSET:
            field_dict["network"] = network
        if owner_uid is not UNSET:
            field_dict["ownerUid"] = owner_uid
        if resources is not UNSET:
            field_dict["resources"] = resources
        if runtime is not UNSET:
            field_dict["runtime"] = runtime
        if sandbox is not UNSET:
            field_dict["sandbox"] = sandbox
        if start_paused is not UNSET:
            field_dict["startPaused"] = start_paused
        if ttl_seconds is not UNSET:
            field_dict["ttlSeconds"] = ttl_seconds
        if volumes is not UNSET:
            field_dict["volumes"] = volumes

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.create_vm_request_labels import CreateVmRequestLabels
        from ..models.guest_agent import GuestAgent
        from ..models.image_source import ImageSource
        from ..models.network_spec import NetworkSpec
        from ..models.resources import Resources
        from ..models.runtime_spec import RuntimeSpec
        from ..models.sandbox_spec import SandboxSpec
        from ..models.volume import Volume

        d = dict(src_dict)
        name = d.pop("name")

        def _parse_guest_agent(data: object) -> GuestAgent | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                guest_agent_type_0 = GuestAgent.from_dict(data)

                return guest_agent_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(GuestAgent | None | Unset, data)

        guest_agent = _parse_guest_agent(d.pop("guestAgent", UNSET))

        def _parse_image(data: object) -> ImageSource | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                image_type_0 = ImageSource.from_dict(data)

                return image_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(ImageSource | None | Unset, data)

        image = _parse_image(d.pop("image", UNSET))

        _labels = d.pop("labels", UNSET)
        labels: CreateVmRequestLabels | Unset
        if isinstance(_labels, Unset):
            labels = UNSET
        else:
            labels = CreateVmRequestLabels.from_dict(_labels)

        def _parse_network(data: object) -> NetworkSpec | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                network_type_0 = NetworkSpec.from_dict(data)

                return network_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(NetworkSpec | None | Unset, data)

        network = _parse_network(d.pop("network", UNSET))

        def _parse_owner_uid(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        owner_uid = _parse_owner_uid(d.pop("ownerUid", UNSET))

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

        def _parse_runtime(data: object) -> None | RuntimeSpec | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                runtime_type_0 = RuntimeSpec.from_dict(data)

                return runtime_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | RuntimeSpec | Unset, data)

        runtime = _parse_runtime(d.pop("runtime", UNSET))

        def _parse_sandbox(data: object) -> None | SandboxSpec | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                sandbox_type_0 = SandboxSpec.from_dict(data)

                return sandbox_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | SandboxSpec | Unset, data)

        sandbox = _parse_sandbox(d.pop("sandbox", UNSET))

        start_paused = d.pop("startPaused", UNSET)

        def _parse_ttl_seconds(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        ttl_seconds = _parse_ttl_seconds(d.pop("ttlSeconds", UNSET))

        _volumes = d.pop("volumes", UNSET)
        volumes: list[Volume] | Unset = UNSET
        if _volumes is not UNSET:
            volumes = []
            for volumes_item_data in _volumes:
                volumes_item = Volume.from_dict(volumes_item_data)

                volumes.append(volumes_item)

        create_vm_request = cls(
            name=name,
            guest_agent=guest_agent,
            image=image,
            labels=labels,
            network=network,
            owner_uid=owner_uid,
            resources=resources,
            runtime=runtime,
            sandbox=sandbox,
            start_paused=start_paused,
            ttl_seconds=ttl_seconds,
            volumes=volumes,
        )

        create_vm_request.additional_properties = d
        return create_vm_request

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
