from enum import StrEnum


class LaunchType(StrEnum):
    COLD = "Cold"
    WARM = "Warm"

    def __str__(self) -> str:
        return str(self.value)
