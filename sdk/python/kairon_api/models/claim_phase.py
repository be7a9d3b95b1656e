from enum import StrEnum


class ClaimPhase(StrEnum):
    BOUND = "Bound"
    PENDING = "Pending"
    RELEASED = "Released"

    def __str__(self) -> str:
        return str(self.value)
