from enum import StrEnum


class MigrationMode(StrEnum):
    COLD = "Cold"
    LIVE = "Live"

    def __str__(self) -> str:
        return str(self.value)
