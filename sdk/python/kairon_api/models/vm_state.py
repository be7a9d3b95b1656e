from enum import StrEnum


class VmState(StrEnum):
    CREATING = "Creating"
    FAILED = "Failed"
    HALTED = "Halted"
    HIBERNATED = "Hibernated"
    PAUSED = "Paused"
    RUNNING = "Running"
    STOPPED = "Stopped"

    def __str__(self) -> str:
        return str(self.value)
