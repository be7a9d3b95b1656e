from enum import StrEnum


class Backend(StrEnum):
    FLUX_VM = "flux-vm"
    QEMU = "qemu"
    RUNC = "runc"

    def __str__(self) -> str:
        return str(self.value)
