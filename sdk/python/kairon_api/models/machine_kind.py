from enum import StrEnum


class MachineKind(StrEnum):
    MACHINE = "Machine"

    def __str__(self) -> str:
        return str(self.value)
