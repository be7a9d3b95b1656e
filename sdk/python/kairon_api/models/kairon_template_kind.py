from enum import StrEnum


class KaironTemplateKind(StrEnum):
    KAIRONTEMPLATE = "KaironTemplate"

    def __str__(self) -> str:
        return str(self.value)
