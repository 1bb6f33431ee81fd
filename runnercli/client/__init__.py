"""The runner's client of the server: typed calls to the runner tools over one MCP session."""

from runnercli.client.calls import RunnerClient
from runnercli.client.errors import (
    RevokedError,
    RunnerError,
    ServerBusy,
    ServerUnavailable,
    ToolCallError,
)

__all__ = [
    "RevokedError",
    "RunnerClient",
    "RunnerError",
    "ServerBusy",
    "ServerUnavailable",
    "ToolCallError",
]
