from enum import StrEnum


class WatchEventType(StrEnum):
    ADDED = "ADDED"
    BOOKMARK = "BOOKMARK"
    DELETED = "DELETED"
    ERROR = "ERROR"
    MODIFIED = "MODIFIED"

    def __str__(self) -> str:
        return str(self.value)
