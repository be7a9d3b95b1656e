from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="MachineMetrics")


@_attrs_define
class MachineMetrics:
    """What a Machine uses now.

    Attributes:
        cpu_limit_cores (float): The CPU the Machine may use, in cores (its `resources.cpu`, or the default it runs
            with). Example: 1.0.
        cpu_percent (float): CPU used over the window, in percent of one core (`top`'s way: 200 is two cores busy).
            Example: 12.5.
        disk_read_bytes (int): Bytes read from and written to disk since it started.
        disk_write_bytes (int):
        memory_limit_bytes (int): The memory the Machine may use (its `resources.memory`, or the default it runs with).
        memory_used_bytes (int): Memory in use now: the sandbox's cgroup, or the VM's QEMU process (resident).
        process_count (int): Processes running (a VM counts as one: its QEMU).
        sampled_at (datetime.datetime): When the second sample was taken.
        window_millis (int): The window the CPU was measured over.
        disk_used_bytes (int | None | Unset): What it takes on its node's disk: a sandbox's writable layer, a VM's disk
            overlay.
        network_rx_bytes (int | None | Unset): Bytes received and sent on its network since it started (sandboxes on a
            network; a
            VM's user network has no interface on the node to count).
        network_tx_bytes (int | None | Unset):
    """

    cpu_limit_cores: float
    cpu_percent: float
    disk_read_bytes: int
    disk_write_bytes: int
    memory_limit_bytes: int
    memory_used_bytes: int
    process_count: int
    sampled_at: datetime.datetime
    window_millis: int
    disk_used_bytes: int | None | Unset = UNSET
    network_rx_bytes: int | None | Unset = UNSET
    network_tx_bytes: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        cpu_limit_cores = self.cpu_limit_cores

        cpu_percent = self.cpu_percent

        disk_read_bytes = self.disk_read_bytes

        disk_write_bytes = self.disk_write_bytes

        memory_limit_bytes = self.memory_limit_bytes

        memory_used_bytes = self.memory_used_bytes

        process_count = self.process_count

        sampled_at = self.sampled_at.isoformat()

        window_millis = self.window_millis

        disk_used_bytes: int | None | Unset
        if isinstance(self.disk_used_bytes, Unset):
            disk_used_bytes = UNSET
        else:
            disk_used_bytes = self.disk_used_bytes

        network_rx_bytes: int | None | Unset
        if isinstance(self.network_rx_bytes, Unset):
            network_rx_bytes = UNSET
        else:
            network_rx_bytes = self.network_rx_bytes

        network_tx_bytes: int | None | Unset
        if isinstance(self.network_tx_bytes, Unset):
            network_tx_bytes = UNSET
        else:
            network_tx_bytes = self.network_tx_bytes

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "cpuLimitCores": cpu_limit_cores,
                "cpuPercent": cpu_percent,
                "diskReadBytes": disk_read_bytes,
                "diskWriteBytes": disk_write_bytes,
                "memoryLimitBytes": memory_limit_bytes,
                "memoryUsedBytes": memory_used_bytes,
                "processCount": process_count,
                "sampledAt": sampled_at,
                "windowMillis": window_millis,
            }
        )
        if disk_used_bytes is not UNSET:
            field_dict["diskUsedBytes"] = disk_used_bytes
        if network_rx_bytes is not UNSET:
            field_dict["networkRxBytes"] = network_rx_bytes
        if network_tx_bytes is not UNSET:
            field_dict["networkTxBytes"] = network_tx_bytes

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        cpu_limit_cores = d.pop("cpuLimitCores")

        cpu_percent = d.pop("cpuPercent")

        disk_read_bytes = d.pop("diskReadBytes")

        disk_write_bytes = d.pop("diskWriteBytes")

        memory_limit_bytes = d.pop("memoryLimitBytes")

        memory_used_bytes = d.pop("memoryUsedBytes")

        process_count = d.pop("processCount")

        sampled_at = datetime.datetime.fromisoformat(d.pop("sampledAt"))

        window_millis = d.pop("windowMillis")

        def _parse_disk_used_bytes(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        disk_used_bytes = _parse_disk_used_bytes(d.pop("diskUsedBytes", UNSET))

        def _parse_network_rx_bytes(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        network_rx_bytes = _parse_network_rx_bytes(d.pop("networkRxBytes", UNSET))

        def _parse_network_tx_bytes(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        network_tx_bytes = _parse_network_tx_bytes(d.pop("networkTxBytes", UNSET))

        machine_metrics = cls(
            cpu_limit_cores=cpu_limit_cores,
            cpu_percent=cpu_percent,
            disk_read_bytes=disk_read_bytes,
            disk_write_bytes=disk_write_bytes,
            memory_limit_bytes=memory_limit_bytes,
            memory_used_bytes=memory_used_bytes,
            process_count=process_count,
            sampled_at=sampled_at,
            window_millis=window_millis,
            disk_used_bytes=disk_used_bytes,
            network_rx_bytes=network_rx_bytes,
            network_tx_bytes=network_tx_bytes,
        )

        machine_metrics.additional_properties = d
        return machine_metrics

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
