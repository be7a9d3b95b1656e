from enum import StrEnum


class Acceleration(StrEnum):
    KVM = "kvm"
    TCG = "tcg"

    def __str__(self) -> str:
        return str(self.value)
