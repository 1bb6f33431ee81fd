"""How the runner stops: its exit codes, the exception that carries one, what the member reads."""

from __future__ import annotations

EXIT_OK = 0
EXIT_NOT_REPORTED = 1
EXIT_REVOKED = 3
EXIT_UPDATE_REQUIRED = 4

REVOKED_MESSAGE = "this runner was revoked — pair again"
UPGRADE_MESSAGE = (
    "the server needs a newer runner (this one speaks protocol {protocol}) — upgrade it with "
    "`{command}`, then start it again"
)


def upgrade_message(protocol: int) -> str:
    """What a runner told to update says: the command that updates it as it was installed."""
    from runnercli.updates import update_command  # reads the install's metadata: only now

    return UPGRADE_MESSAGE.format(protocol=protocol, command=update_command())


class RunnerExit(Exception):
    """Stop the runner with this exit code and message."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
