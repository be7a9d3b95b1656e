from enum import StrEnum


class ProcessEventType0Type(StrEnum):
    STDOUT = "stdout"

    def __str__(self) -> str:
        return str(self.value)
