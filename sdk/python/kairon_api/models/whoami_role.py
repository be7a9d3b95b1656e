from enum import StrEnum


class WhoamiRole(StrEnum):
    ADMIN = "admin"
    CONTROLLER = "controller"
    METRICS = "metrics"
    NODE = "node"
    OPERATOR = "operator"
    VIEWER = "viewer"

    def __str__(self) -> str:
        return str(self.value)
