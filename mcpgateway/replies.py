"""Structured replies of the personal tools.

The shapes are those of the REST API (built by the same `*_items`/`*_reply` functions);
these models only declare them, so each tool publishes an output schema and answers with
`structuredContent`. Keys a shared reply function adds later pass through unchanged
(`extra="allow"`), so the MCP and REST replies cannot drift apart.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Shape(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class RunnerItem(_Shape):
    id: int
    label: str
    os: str
    capabilities: list[str]
    online: bool
    last_seen_at: str | None
    status: str
    revoked: bool


class RunnerList(_Shape):
    runners: list[RunnerItem]


class PairedRunner(_Shape):
    id: int
    label: str
    os: str
    capabilities: list[str]
    token: str = Field(description="The runner token, shown this once: only its hash is kept.")


class Revoked(_Shape):
    revoked: bool


class ApiKeyItem(_Shape):
    id: int
    name: str
    prefix: str
    created_at: str
    last_used_at: str | None


class ApiKeyList(_Shape):
    keys: list[ApiKeyItem]


class RunRef(_Shape):
    name: str
    version: int


class RunSummary(_Shape):
    total: int
    pending: int
    running: int
    pass_: int = Field(alias="pass")
    fail: int
    error: int
    pass_rate: float | None
    mean_score: float | None
    cost_usd: float


class RunEvent(_Shape):
    at: str
    level: str
    message: str


class RunResult(_Shape):
    case: str
    verdict: str
    score: float
    status: str
    output: str
    error: str
    duration_ms: int
    usage: dict[str, Any] | None
    provenance: dict[str, Any]
    runner: int | None


class RunReply(_Shape):
    """A scorecard run as `GET /api/runs/<id>` shows it: summary, events, settled results."""

    id: int
    workspace: str
    harness: RunRef
    dataset: RunRef
    status: str
    runtime: str
    submitted_by: str
    created_at: str
    finished_at: str | None
    summary: RunSummary
    events: list[RunEvent]
    results: list[RunResult]
