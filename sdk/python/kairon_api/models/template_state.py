from enum import StrEnum


class TemplateState(StrEnum):
    BUILDING = "Building"
    FAILED = "Failed"
    PENDING = "Pending"
    READY = "Ready"

    def __str__(self) -> str:
        return str(self.value)
