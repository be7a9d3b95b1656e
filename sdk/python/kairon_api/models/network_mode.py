from enum import StrEnum


class NetworkMode(StrEnum):
    BRIDGE = "Bridge"
    NONE = "None"
    TAP = "Tap"
    USER = "User"

    def __str__(self) -> str:
        return str(self.value)
