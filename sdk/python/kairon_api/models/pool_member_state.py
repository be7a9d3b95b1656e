from enum import StrEnum


class PoolMemberState(StrEnum):
    BOOTING = "Booting"
    CLAIMED = "Claimed"
    READY = "Ready"

    def __str__(self) -> str:
        return str(self.value)
