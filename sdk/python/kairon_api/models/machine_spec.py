from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.power_state import PowerState
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.device_claim import DeviceClaim
    from ..models.guest_agent import GuestAgent
    from ..models.hugepages import Hugepages
    from ..models.image_source import ImageSource
    from ..models.lifecycle import Lifecycle
    from ..models.machine_spec_env import MachineSpecEnv
    from ..models.machine_spec_secret_env import MachineSpecSecretEnv
    from ..models.network_spec import NetworkSpec
    from ..models.numa_spec import NumaSpec
    from ..models.resources import Resources
    from ..models.runtime_spec import RuntimeSpec
    from ..models.sandbox_spec import SandboxSpec
    from ..models.volume import Volume


T = TypeVar("T", bound="MachineSpec")


@_attrs_define
class MachineSpec:
    """A Machine: a VM (`spec.image`) or a sandbox (`spec.sandbox`).

    Attributes:
        cpu_set (None | str | Unset): Host CPUs to pin vCPUs to, e.g. `0-3,6` (admin-only, QEMU backend).
        device_claims (list[DeviceClaim] | Unset): PCI passthrough (VFIO) devices; refused on a sandbox.
        env (MachineSpecEnv | Unset): Environment variables of every exec and process in the guest (a request's own
            `env`
            wins). A claimed pool member also gets its claim's. Not for secrets (see `secretEnv`): every reader of the
            namespace sees them (SECURITY.md).
        guest_agent (GuestAgent | None | Unset):
        hugepages (Hugepages | None | Unset):
        image (ImageSource | None | Unset):
        lifecycle (Lifecycle | None | Unset):
        network (NetworkSpec | None | Unset):
        node_name (None | str | Unset): Pin the Machine to a node; unset lets the scheduler choose.
        numa (None | NumaSpec | Unset):
        power_state (None | PowerState | Unset):
        resources (None | Resources | Unset):
        runtime (None | RuntimeSpec | Unset):
        sandbox (None | SandboxSpec | Unset):
        secret_env (MachineSpecSecretEnv | Unset): Environment variables whose values are keys of Secrets in the
            Machine's namespace: the
            api reads them when it relays an exec, process or terminal and sends them to the
            Machine's runtime in that request alone (never stored on the Machine, its status, Events
            or logs). Only Opaque Secrets labelled `kairon.zyvor.dev/secret-env=true` are read; over
            `env`, under a request's own.
        ttl_seconds (int | None | Unset): Delete the Machine this many seconds after creation.
        volumes (list[Volume] | Unset): Disks that outlive Stop.
    """

    cpu_set: None | str | Unset = UNSET
    device_claims: list[DeviceClaim] | Unset = UNSET
    env: MachineSpecEnv | Unset = UNSET
    guest_agent: GuestAgent | None | Unset = UNSET
    hugepages: Hugepages | None | Unset = UNSET
    image: ImageSource | None | Unset = UNSET
    lifecycle: Lifecycle | None | Unset = UNSET
    network: NetworkSpec | None | Unset = UNSET
    node_name: None | str | Unset = UNSET
    numa: None | NumaSpec | Unset = UNSET
    power_state: None | PowerState | Unset = UNSET
    resources: None | Resources | Unset = UNSET
    runtime: None | RuntimeSpec | Unset = UNSET
    sandbox: None | SandboxSpec | Unset = UNSET
    secret_env: MachineSpecSecretEnv | Unset = UNSET
    ttl_seconds: int | None | Unset = UNSET
    volumes: list[Volume] | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.guest_agent import GuestAgent
        from ..models.hugepages import Hugepages
        from ..models.image_source import ImageSource
        from ..models.lifecycle import Lifecycle
        from ..models.network_spec import NetworkSpec
        from ..models.numa_spec import NumaSpec
        from ..models.resources import Resources
        from ..models.runtime_spec import RuntimeSpec
        from ..models.sandbox_spec import SandboxSpec

        cpu_set: None | str | Unset
        if isinstance(self.cpu_set, Unset):
            cpu_set = UNSET
        else:
            cpu_set = self.cpu_set

        device_claims: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.device_claims, Unset):
            device_claims = []
            for device_claims_item_data in self.device_claims:
                device_claims_item = device_claims_item_data.to_dict()
                device_claims.append(device_claims_item)

        env: dict[str, Any] | Unset = UNSET
        if not isinstance(self.env, Unset):
            env = self.env.to_dict()

        guest_agent: dict[str, Any] | None | Unset
        if isinstance(self.guest_agent, Unset):
            guest_agent = UNSET
        elif isinstance(self.guest_agent, GuestAgent):
            guest_agent = self.guest_agent.to_dict()
        else:
            guest_agent = self.guest_agent

        hugepages: dict[str, Any] | None | Unset
        if isinstance(self.hugepages, Unset):
            hugepages = UNSET
        elif isinstance(self.hugepages, Hugepages):
            hugepages = self.hugepages.to_dict()
        else:
            hugepages = self.hugepages

        image: dict[str, Any] | None | Unset
        if isinstance(self.image, Unset):
            image = UNSET
        elif isinstance(self.image, ImageSource):
            image = self.image.to_dict()
        else:
            image = self.image

        lifecycle: dict[str, Any] | None | Unset
        if isinstance(self.lifecycle, Unset):
            lifecycle = UNSET
        elif isinstance(self.lifecycle, Lifecycle):
            lifecycle = self.lifecycle.to_dict()
        else:
            lifecycle = self.lifecycle

        network: dict[str, Any] | None | Unset
        if isinstance(self.network, Unset):
            network = UNSET
        elif isinstance(self.network, NetworkSpec):
            network = self.network.to_dict()
        else:
            network = self.network

        node_name: None | str | Unset
        if isinstance(self.node_name, Unset):
            node_name = UNSET
        else:
            node_name = self.node_name

        numa: dict[str, Any] | None | Unset
        if isinstance(self.numa, Unset):
            numa = UNSET
        elif isinstance(self.numa, NumaSpec):
            numa = self.numa.to_dict()
        else:
            numa = self.numa

        power_state: None | str | Unset
        if isinstance(self.power_state, Unset):
            power_state = UNSET
        elif isinstance(self.power_state, PowerState):
            power_state = self.power_state.value
        else:
            power_state = self.power_state

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

        secret_env: dict[str, Any] | Unset = UNSET
        if not isinstance(self.secret_env, Unset):
            secret_env = self.secret_env.to_dict()

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
        field_dict.update({})
        if cpu_set is not UNSET:
            field_dict["cpuSet"] = cpu_set
        if device_claims is not UNSET:
            field_dict["deviceClaims"] = device_claims
        if env is not UNSET:
            field_dict["env"] = env
        if guest_agent is not UNSET:
            field_dict["guestAgent"] = guest_agent
        if hugepages is not UNSET:
            field_dict["hugepages"] = hugepages
        if image is not UNSET:
            field_dict["image"] = image
        if lifecycle is not UNSET:
            field_dict["lifecycle"] = lifecycle
        if network is not UNSET:
            field_dict["network"] = network
        if node_name is not UNSET:
            field_dict["nodeName"] = node_name
        if numa is not UNSET:
            field_dict["numa"] = numa
        if power_state is not UNSET:
            field_dict["powerState"] = power_state
        if resources is not UNSET:
            field_dict["resources"] = resources
        if runtime is not UNSET:
            field_dict["runtime"] = runtime
        if sandbox is not UNSET:
            field_dict["sandbox"] = sandbox
        if secret_env is not UNSET:
            field_dict["secretEnv"] = secret_env
        if ttl_seconds is not UNSET:
            field_dict["ttlSeconds"] = ttl_seconds
        if volumes is not UNSET:
            field_dict["volumes"] = volumes

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.device_claim import DeviceClaim
        from ..models.guest_agent import GuestAgent
        from ..models.hugepages import Hugepages
        from ..models.image_source import ImageSource
        from ..models.lifecycle import Lifecycle
        from ..models.machine_spec_env import MachineSpecEnv
        from ..models.machine_spec_secret_env import MachineSpecSecretEnv
        from ..models.network_spec import NetworkSpec
        from ..models.numa_spec import NumaSpec
        from ..models.resources import Resources
        from ..models.runtime_spec import RuntimeSpec
        from ..models.sandbox_spec import SandboxSpec
        from ..models.volume import Volume

        d = dict(src_dict)

        def _parse_cpu_set(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        cpu_set = _parse_cpu_set(d.pop("cpuSet", UNSET))

        _device_claims = d.pop("deviceClaims", UNSET)
        device_claims: list[DeviceClaim] | Unset = UNSET
        if _device_claims is not UNSET:
            device_claims = []
            for device_claims_item_data in _device_claims:
                device_claims_item = DeviceClaim.from_dict(device_claims_item_data)

                device_claims.append(device_claims_item)

        _env = d.pop("env", UNSET)
        env: MachineSpecEnv | Unset
        if isinstance(_env, Unset):
            env = UNSET
        else:
            env = MachineSpecEnv.from_dict(_env)

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

        def _parse_hugepages(data: object) -> Hugepages | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                hugepages_type_0 = Hugepages.from_dict(data)

                return hugepages_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(Hugepages | None | Unset, data)

        hugepages = _parse_hugepages(d.pop("hugepages", UNSET))

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

        def _parse_lifecycle(data: object) -> Lifecycle | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                lifecycle_type_0 = Lifecycle.from_dict(data)

                return lifecycle_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(Lifecycle | None | Unset, data)

        lifecycle = _parse_lifecycle(d.pop("lifecycle", UNSET))

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

        def _parse_node_name(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        node_name = _parse_node_name(d.pop("nodeName", UNSET))

        def _parse_numa(data: object) -> None | NumaSpec | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                numa_type_0 = NumaSpec.from_dict(data)

                return numa_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | NumaSpec | Unset, data)

        numa = _parse_numa(d.pop("numa", UNSET))

        def _parse_power_state(data: object) -> None | PowerState | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                power_state_type_0 = PowerState(data)

                return power_state_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | PowerState | Unset, data)

        power_state = _parse_power_state(d.pop("powerState", UNSET))

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

        _secret_env = d.pop("secretEnv", UNSET)
        secret_env: MachineSpecSecretEnv | Unset
        if isinstance(_secret_env, Unset):
            secret_env = UNSET
        else:
            secret_env = MachineSpecSecretEnv.from_dict(_secret_env)

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

        machine_spec = cls(
            cpu_set=cpu_set,
            device_claims=device_claims,
            env=env,
            guest_agent=guest_agent,
            hugepages=hugepages,
            image=image,
            lifecycle=lifecycle,
            network=network,
            node_name=node_name,
            numa=numa,
            power_state=power_state,
            resources=resources,
            runtime=runtime,
            sandbox=sandbox,
            secret_env=secret_env,
            ttl_seconds=ttl_seconds,
            volumes=volumes,
        )

        machine_spec.additional_properties = d
        return machine_spec

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
