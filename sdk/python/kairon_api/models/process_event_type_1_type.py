from enum import StrEnum


class ProcessEventType1Type(StrEnum):
    STDERR = "stderr"

    def __str__(self) -> str:
        return str(self.value)
