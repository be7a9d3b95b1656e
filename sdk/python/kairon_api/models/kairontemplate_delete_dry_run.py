from enum import StrEnum


class KairontemplateDeleteDryRun(StrEnum):
    ALL = "All"
    VALUE_1 = ""

    def __str__(self) -> str:
        return str(self.value)
