from enum import StrEnum


class EgressMode(StrEnum):
    ALLOWLIST = "Allowlist"
    INTERNET = "Internet"
    NONE = "None"

    def __str__(self) -> str:
        return str(self.value)
