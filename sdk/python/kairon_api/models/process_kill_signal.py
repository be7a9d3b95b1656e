from enum import StrEnum


class ProcessKillSignal(StrEnum):
    HUP = "HUP"
    INT = "INT"
    KILL = "KILL"
    QUIT = "QUIT"
    TERM = "TERM"
    USR1 = "USR1"
    USR2 = "USR2"

    def __str__(self) -> str:
        return str(self.value)
