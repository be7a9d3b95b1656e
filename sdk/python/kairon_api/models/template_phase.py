from enum import StrEnum


class TemplatePhase(StrEnum):
    BUILDING = "Building"
    FAILED = "Failed"
    PENDING = "Pending"
    READY = "Ready"

    def __str__(self) -> str:
        return str(self.value)
