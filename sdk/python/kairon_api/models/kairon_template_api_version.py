from enum import StrEnum


class KaironTemplateApiVersion(StrEnum):
    KAIRON_ZYVOR_DEVV1 = "kairon.zyvor.dev/v1"

    def __str__(self) -> str:
        return str(self.value)
