from enum import StrEnum


class UsageReportGroupBy(StrEnum):
    CLAIM = "claim"
    DAY = "day"
    NAMESPACE = "namespace"

    def __str__(self) -> str:
        return str(self.value)
