from enum import StrEnum


class PowerState(StrEnum):
    HALTED = "Halted"
    HIBERNATED = "Hibernated"
    PAUSED = "Paused"
    RUNNING = "Running"
    STOPPED = "Stopped"

    def __str__(self) -> str:
        return str(self.value)
