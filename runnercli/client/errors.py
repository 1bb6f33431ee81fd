"""How a runner tool call fails, sorted by what to do next."""

from __future__ import annotations

from runnercli.protocol import ToolFailure


class RunnerError(Exception):
    """A runner tool call that did not produce a reply."""


class RevokedError(RunnerError):
    """The server refused the token (HTTP 401): this runner was revoked or never paired."""


class ServerUnavailable(RunnerError):
    """The server could not be reached or failed (refused, reset, 5xx, timeout): retry later."""


class ServerBusy(ServerUnavailable):
    """The server refused the call for its own trouble (its database unavailable or locked, a
    deadlock): a tool error whose structured content says `retryable`. Retry later."""

    def __init__(self, failure: ToolFailure) -> None:
        super().__init__(f"server trouble ({failure.code}): {failure.message}")
        self.failure = failure


class ToolCallError(RunnerError):
    """The tool answered with an error: the call itself was refused, for good."""


def leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaves(inner)]
    return [exc]
