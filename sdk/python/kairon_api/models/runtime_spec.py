from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.backend import Backend
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.kernel_spec import KernelSpec


T = TypeVar("T", bound="RuntimeSpec")


@_attrs_define
class RuntimeSpec:
    """
    Attributes:
        backend (Backend | None | Unset):
        kernel (KernelSpec | None | Unset):
    """

    backend: Backend | None | Unset = UNSET
    kernel: KernelSpec | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.kernel_spec import KernelSpec

        backend: None | str | Unset
        if isinstance(self.backend, Unset):
            backend = UNSET
        elif isinstance(self.backend, Backend):
            backend = self.backend.value
        else:
            backend = self.backend

        kernel: dict[str, Any] | None | Unset
        if isinstance(self.kernel, Unset):
            kernel = UNSET
        elif isinstance(self.kernel, KernelSpec):
            kernel = self.kernel.to_dict()
        else:
            kernel = self.kernel

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({})
        if backend is not UNSET:
            field_dict["backend"] = backend
        if kernel is not UNSET:
            field_dict["kernel"] = kernel

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.kernel_spec import KernelSpec

        d = dict(src_dict)

        def _parse_backend(data: object) -> Backend | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                backend_type_0 = Backend(data)

                return backend_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(Backend | None | Unset, data)

        backend = _parse_backend(d.pop("backend", UNSET))

        def _parse_kernel(data: object) -> KernelSpec | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                kernel_type_0 = KernelSpec.from_dict(data)

                return kernel_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(KernelSpec | None | Unset, data)

        kernel = _parse_kernel(d.pop("kernel", UNSET))

        runtime_spec = cls(
            backend=backend,
            kernel=kernel,
        )

        runtime_spec.additional_properties = d
        return runtime_spec

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
