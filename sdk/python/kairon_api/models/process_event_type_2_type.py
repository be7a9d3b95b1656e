from enum import StrEnum


class ProcessEventType2Type(StrEnum):
    EXIT = "exit"

    def __str__(self) -> str:
        return str(self.value)
