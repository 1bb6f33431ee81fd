"""Runner tools: what `python -m runnercli` calls with its `rnr_` token. Arguments are flat.

Each tool authenticates the principal as a runner, lets the SDK validate the arguments
against the wire contract (a value over a bound is a tool error before anything is
stored), and calls one service. Every call after the lease carries `(job_id,
lease_epoch)`: the services fence on it and read the run from the lease.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated, Any

from django.conf import settings
from pydantic import AfterValidator, AwareDatetime, Field

from mcpgateway.auth import current_principal
from mcpgateway.calls import in_thread
from runnercli.protocol import (
    MAX_CAPABILITIES,
    MAX_FAIL_MESSAGE_CHARS,
    MAX_FEATURES,
    MAX_JOBS_PER_LEASE,
    MAX_LOG_LINE_BYTES,
    MAX_LOG_LINES_PER_CALL,
    MAX_RESULTS_PER_CALL,
    MAX_STATUS_CHARS,
    Ack,
    BatchAck,
    Capability,
    CaseResult,
    Feature,
    HeartbeatAck,
    Hello,
    LeaseGrant,
    LeaseReply,
    ResultReport,
)
from runners.presence import runner_touch
from runners.queue import job_lease_wait, job_report_log
from runners.queue.handback import MAX_PAUSE_REASON_CHARS
from runners.services import protocol_outdated, runner_hello
from scorecards.services import (
    failure_report,
    lease_hand_back,
    lease_heartbeat,
    result_submit,
    results_submit,
)


def _line_within_bounds(line: str) -> str:
    if len(line.encode()) > MAX_LOG_LINE_BYTES:
        raise ValueError(f"a log line is over {MAX_LOG_LINE_BYTES} bytes; split or truncate it")
    return line


Status = Annotated[
    str,
    Field(max_length=MAX_STATUS_CHARS, description="A short status line shown on the roster."),
]
Capabilities = Annotated[
    Sequence[Capability],
    Field(max_length=MAX_CAPABILITIES, description="What this runner has now (empty: unchanged)."),
]
Features = Annotated[
    Sequence[Feature],
    Field(
        max_length=MAX_FEATURES,
        description="Protocol 3: what this runner implements (repo, artifacts, trace, screens, "
        "services, judge, slots, files); a job needing one it lacks is left for another.",
    ),
]


def _features(protocol: int, features: Sequence[str]) -> tuple[int, list[str]]:
    # A runner of protocol 2 can do none of them, whatever it sends.
    return protocol, list(features) if protocol >= 3 else []


LogLine = Annotated[str, Field(max_length=MAX_LOG_LINE_BYTES), AfterValidator(_line_within_bounds)]
LogLines = Annotated[list[LogLine], Field(max_length=MAX_LOG_LINES_PER_CALL)]


PausedReason = Annotated[
    str | None,
    Field(
        max_length=100,
        description='Why this runner leases nothing of its own accord ("on battery"); '
        '"" when it leases again; omitted: unchanged.',
    ),
]


async def hello(
    protocol: int,
    capabilities: Capabilities = (),
    status: Status = "",
    features: Features = (),
    paused_reason: PausedReason = None,
) -> Hello:
    """Say who this runner is and whether its protocol is still served; marks it present."""
    runner = current_principal().require_runner("hello")
    protocol, reported = _features(protocol, features)
    return await in_thread(
        runner_hello,
        runner=runner,
        protocol=protocol,
        capabilities=capabilities,
        status=status,
        features=reported,
        paused_reason=paused_reason,
    )


async def lease_job(
    protocol: int,
    wait_ms: int = 0,
    capabilities: Capabilities = (),
    status: Status = "",
    max_jobs: Annotated[
        int | None,
        Field(
            ge=1,
            le=MAX_JOBS_PER_LEASE,
            description="Lease up to this many jobs at once (a runner's free slots); "
            "the reply then lists them all in `jobs`.",
        ),
    ] = None,
    features: Features = (),
) -> LeaseReply:
    """Lease the next job for this runner, waiting up to `wait_ms` (≤ `hello.limits.max_wait_ms`).

    Answers `{job: null}` when none came in time (poll again), and
    `{job: null, update_required: true}` to a runner whose protocol is too old.
    """
    runner = current_principal().require_runner("lease_job")
    if protocol_outdated(protocol):
        # Presence only: an outdated runner never takes an attempt.
        await in_thread(runner_touch, runner=runner, status=status)
        return LeaseReply(update_required=True)
    leased = await job_lease_wait(
        runner=runner,
        capabilities=list(capabilities) or None,
        status=status,
        wait_ms=max(0, min(wait_ms, settings.EVERDICT_MAX_WAIT_MS)),
        max_jobs=max_jobs or 1,
        features=_features(protocol, features),
    )
    batch = None
    if max_jobs is not None:
        batch = [LeaseGrant(job=g.case_job, lease=g.lease) for g in leased]
    if not leased:
        return LeaseReply(jobs=batch)
    return LeaseReply(job=leased[0].case_job, lease=leased[0].lease, jobs=batch)


async def heartbeat_job(job_id: int, lease_epoch: int, status: Status = "") -> HeartbeatAck:
    """Extend this runner's lease of the job; `cancel: true` means stop the case now.

    `resumed: true` says the lease had lapsed (the runner slept) and was taken back: the
    case goes on. Refused (`accepted: false`) when another runner leased the job since.
    """
    runner = current_principal().require_runner("heartbeat_job")
    return await in_thread(
        lease_heartbeat, runner=runner, job_id=job_id, lease_epoch=lease_epoch, status=status
    )


async def submit_job_result(job_id: int, lease_epoch: int, result: CaseResult) -> Ack:
    """Report the case's outcome; the server scores it and stamps its provenance."""
    runner = current_principal().require_runner("submit_job_result")
    return await in_thread(
        result_submit, runner=runner, job_id=job_id, lease_epoch=lease_epoch, result=result
    )


async def submit_job_results(
    results: Annotated[list[ResultReport], Field(min_length=1, max_length=MAX_RESULTS_PER_CALL)],
) -> BatchAck:
    """Report several cases' outcomes at once (one transaction); one ack each, in order.

    Each result is fenced on its own `(job_id, lease_epoch)`: a stale one is refused in its
    ack while the others are accepted.
    """
    runner = current_principal().require_runner("submit_job_results")
    acks = await in_thread(results_submit, runner=runner, reports=results)
    return BatchAck(acks=acks)


async def fail_job(
    job_id: int,
    lease_epoch: int,
    message: Annotated[str, Field(max_length=MAX_FAIL_MESSAGE_CHARS)],
    retryable: bool = False,
) -> Ack:
    """Give up on the job: `retryable` puts it back in the queue while attempts remain."""
    runner = current_principal().require_runner("fail_job")
    return await in_thread(
        failure_report,
        runner=runner,
        job_id=job_id,
        lease_epoch=lease_epoch,
        message=message,
        retryable=retryable,
    )


async def release_job(
    job_id: int,
    lease_epoch: int,
    reason: Annotated[str, Field(min_length=1, max_length=MAX_PAUSE_REASON_CHARS)],
    paused_until: Annotated[
        AwareDatetime | None,
        Field(description="ISO-8601 with a time zone: lease nothing until then (a plan limit)."),
    ] = None,
) -> Ack:
    """Hand the job back to the queue without spending an attempt (a plan limit hit, the
    member stopping the runner). With `paused_until` this runner leases nothing until then
    (at most a week ahead); the roster and the run page say why."""
    runner = current_principal().require_runner("release_job")
    return await in_thread(
        lease_hand_back,
        runner=runner,
        job_id=job_id,
        lease_epoch=lease_epoch,
        reason=reason,
        paused_until=paused_until,
    )


async def report_case_log(job_id: int, lease_epoch: int, lines: LogLines) -> Ack:
    """Append log lines to the case; they appear on the run page and its logs API."""
    runner = current_principal().require_runner("report_case_log")
    return await in_thread(
        job_report_log, runner=runner, job_id=job_id, lease_epoch=lease_epoch, lines=lines
    )


RUNNER_TOOLS: list[Callable[..., Any]] = [
    hello,
    lease_job,
    heartbeat_job,
    submit_job_result,
    submit_job_results,
    fail_job,
    release_job,
    report_case_log,
]
