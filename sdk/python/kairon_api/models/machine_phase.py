from enum import StrEnum


class MachinePhase(StrEnum):
    FAILED = "Failed"
    HALTED = "Halted"
    HALTING = "Halting"
    HIBERNATED = "Hibernated"
    HIBERNATING = "Hibernating"
    MIGRATING = "Migrating"
    PAUSED = "Paused"
    PAUSING = "Pausing"
    PENDING = "Pending"
    PROVISIONING = "Provisioning"
    RESUMING = "Resuming"
    RUNNING = "Running"
    STARTING = "Starting"
    STOPPED = "Stopped"
    STOPPING = "Stopping"
    TERMINATING = "Terminating"

    def __str__(self) -> str:
        return str(self.value)
