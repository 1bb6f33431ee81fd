"""How the runner stops: its exit codes, the exception that carries one, what the member reads."""

from __future__ import annotations

EXIT_OK = 0
EXIT_NOT_REPORTED = 1
EXIT_REVOKED = 3
EXIT_UPDATE_REQUIRED = 4

REVOKED_MESSAGE = "this runner was revoked — pair again"


class RunnerExit(Exception):
    """Stop the runner with this exit code and message."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
