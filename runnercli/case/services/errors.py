"""What goes wrong with a service, said so the member can act on it."""

from __future__ import annotations

from runnercli.protocol import FAIL_MESSAGE_CHARS

# The lines of a service's log a failure shows.
FAILURE_LOG_LINES = 50


class ServiceError(Exception):
    """A service could not be started, did not become ready, or died.

    `summary` names the service and what happened (and the probe it waited on); `log_tail`
    holds the last lines of its log. `str()` is both, within what `fail_job` carries.
    """

    def __init__(self, service: str, summary: str, log_tail: list[str] | None = None) -> None:
        self.service = service
        self.summary = summary
        self.log_tail = list(log_tail or [])[-FAILURE_LOG_LINES:]
        super().__init__(failure_message(summary, self.log_tail))


class NoDocker(ServiceError):
    """A container service, and no Docker daemon answers (or no docker SDK to talk to it)."""


def failure_message(summary: str, log_tail: list[str], limit: int = FAIL_MESSAGE_CHARS) -> str:
    """`summary`, then as many of the newest lines of `log_tail` as fit within `limit`."""
    if not log_tail:
        return f"{summary} (its log is empty)"[:limit]
    head = f"{summary}; the last lines of its log:"
    kept: list[str] = []
    room = limit - len(head)
    for line in reversed(log_tail):
        line = line[:500]
        if len(line) + 1 > room:
            break
        kept.append(line)
        room -= len(line) + 1
    if not kept:
        return head[:limit]
    return "\n".join([head, *reversed(kept)])
