from enum import StrEnum


class MachineClaimKind(StrEnum):
    MACHINECLAIM = "MachineClaim"

    def __str__(self) -> str:
        return str(self.value)
