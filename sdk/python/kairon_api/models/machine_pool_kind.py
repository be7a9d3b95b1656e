from enum import StrEnum


class MachinePoolKind(StrEnum):
    MACHINEPOOL = "MachinePool"

    def __str__(self) -> str:
        return str(self.value)
