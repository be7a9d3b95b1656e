from enum import StrEnum


class NodeBackend(StrEnum):
    SANDBOX = "sandbox"
    VM = "vm"

    def __str__(self) -> str:
        return str(self.value)
