from enum import StrEnum


class WarmPowerState(StrEnum):
    PAUSED = "Paused"
    RUNNING = "Running"

    def __str__(self) -> str:
        return str(self.value)
