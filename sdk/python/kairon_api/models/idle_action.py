from enum import StrEnum


class IdleAction(StrEnum):
    DELETE = "Delete"
    HALT = "Halt"
    HIBERNATE = "Hibernate"
    PAUSE = "Pause"
    STOP = "Stop"

    def __str__(self) -> str:
        return str(self.value)
