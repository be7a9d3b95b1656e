from enum import StrEnum


class HugepagesPageSize(StrEnum):
    VALUE_0 = "2Mi"
    VALUE_1 = "1Gi"

    def __str__(self) -> str:
        return str(self.value)
