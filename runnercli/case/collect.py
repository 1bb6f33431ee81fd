"""The `Collect` stage: the case's result from how its run ended, and where it ran.

The status (an agent whose stream ended in an error is an `error`, though its process ran to
its end), the output (stdout, or what a stage put in its place), the stderr tail, the exit code and
duration, usage the harness printed, and the fingerprint: this machine, the digest of the
harness content executed, and the versions of the tools behind it.
"""

from __future__ import annotations

import functools
import json
import platform
import time
from typing import Any, Literal

from runnercli.case.pipeline import CaseContext, Given, Stage
from runnercli.case.tools import ToolVersions
from runnercli.config import os_name, runnercli_version
from runnercli.protocol import (
    MAX_OUTPUT_BYTES,
    MAX_RUNNER_INFO_CHARS,
    MAX_RUNNERCLI_VERSION_CHARS,
    MAX_TOOL_VERSION_CHARS,
    CaseJob,
    CaseResult,
    Fingerprint,
    harness_digest,
)
from runnercli.protocol.verifying import Phases
from runnercli.text.utf8 import clip_utf8

USAGE_FIELDS = ("total_cost_usd", "input_tokens", "output_tokens")


def advisory_usage(output: str) -> dict[str, Any] | None:
    """Usage the harness printed as JSON (`total_cost_usd`, tokens); the server re-derives it."""
    try:
        parsed = json.loads(output)
    except ValueError:
        return None
    if not isinstance(parsed, dict):
        return None
    usage: dict[str, Any] = {}
    for source in (parsed.get("usage"), parsed):
        if isinstance(source, dict):
            for name in USAGE_FIELDS:
                value = source.get(name)
                if isinstance(value, int | float) and not isinstance(value, bool):
                    usage.setdefault(name, value)
    return usage or None


@functools.cache
def machine_fingerprint() -> Fingerprint:
    """This machine and runner as every result reports them (read once per session)."""
    return Fingerprint(
        runnercli_version=runnercli_version()[:MAX_RUNNERCLI_VERSION_CHARS],
        os=os_name()[:MAX_RUNNER_INFO_CHARS],
        os_version=platform.release()[:MAX_TOOL_VERSION_CHARS],
        arch=platform.machine()[:MAX_RUNNER_INFO_CHARS],
        python=platform.python_version(),
    )


def fingerprint(
    job: CaseJob, tools: dict[str, str] | None = None, added: dict[str, Any] | None = None
) -> Fingerprint:
    """The machine's fingerprint with the digest of the harness content this case executed
    (and the versions of its tools, when asked, and what the case's stages `added`)."""
    update: dict[str, Any] = {"harness_digest": harness_digest(job.harness.spec)}
    if tools:
        update["tools"] = tools
    return machine_fingerprint().model_copy(update={**update, **(added or {})})


def phases(case: CaseContext) -> Phases | None:
    """Seconds in each phase: setting up (worktree, services), the agent, the verifier, and
    collecting since the agent ended (its diff, protected paths, this result) but for the
    verifier."""
    if case.agent_started is None or case.agent_ended is None:
        return None
    now = time.monotonic()
    return Phases(
        setup_s=round(max(case.agent_started - case.began, 0.0), 3),
        agent_s=round(max(case.agent_ended - case.agent_started, 0.0), 3),
        verify_s=round(case.verify_s, 3),
        collect_s=round(max(now - case.agent_ended - case.verify_s, 0.0), 3),
    )


class Collect(Stage):
    """Build `case.result` from `case.outcome`, once the stages before it have finished."""

    name = "collect"
    needs = frozenset({Given.OUTCOME})
    gives = frozenset({Given.RESULT})

    def __init__(self, tools: ToolVersions | None = None) -> None:
        # The session's tool versions (each probed once); none for a case run on its own.
        self.tools = tools

    async def finish(self, case: CaseContext) -> None:
        outcome = case.outcome
        if outcome is None:  # nothing ran
            return
        completed = outcome.status == "completed"
        output = outcome.stdout if case.output is None else clip_utf8(case.output, MAX_OUTPUT_BYTES)
        tools = None
        # A case killed is not reported as a result: its tools are not asked.
        if self.tools is not None and outcome.status != "canceled":
            tools = await self.tools.of(case.job)
        status: Literal["completed", "error", "timeout", "canceled"] = outcome.status
        if status == "completed" and case.error is not None:
            status = "error"
        case.result = CaseResult(
            status=status,
            exit_code=outcome.exit_code,
            output=output,
            stderr_tail=outcome.stderr_tail,
            duration_ms=outcome.duration_ms,
            usage=self._usage(case, output, completed),
            fingerprint=fingerprint(case.job, tools, case.fingerprint),
            phases=phases(case),
            **case.adds,
        )

    @staticmethod
    def _usage(case: CaseContext, output: str, completed: bool) -> dict[str, Any] | None:
        """What a stage read of the case's usage (a parsed stream's final result), else what
        a completed harness printed as JSON."""
        if case.usage is not None:
            return case.usage
        return advisory_usage(output) if completed else None
