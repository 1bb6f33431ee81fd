"""A case run here on its own, with no server: prepared, executed and collected."""

from __future__ import annotations

import asyncio

from runnercli.case.argv import StartError
from runnercli.case.collect import Collect
from runnercli.case.execute import Execute
from runnercli.case.pipeline import CaseContext, Pipeline
from runnercli.case.prepare import Prepare
from runnercli.case.spawn import TERM_GRACE_S
from runnercli.case.streams import LineSink
from runnercli.protocol import CaseJob, CaseResult, Lease
from runnercli.session import JobRun


async def run_case(
    job: CaseJob,
    *,
    on_stderr_line: LineSink,
    on_note: LineSink | None = None,
    kill: asyncio.Event | None = None,
    term_grace_s: float = TERM_GRACE_S,
) -> CaseResult:
    """Run the case to completion, timeout or `kill`; raise StartError if it cannot start.

    A set `kill` event ends the process group at once and gives status `canceled`; so does
    cancelling the task that runs this, which then re-raises.
    """
    # No server: the lease is the one the job names.
    lease = Lease(job_id=job.job_id, lease_epoch=job.lease_epoch, lease_ttl_ms=0, heartbeat_ms=0)
    case = CaseContext(
        JobRun(job, lease, kill=kill or asyncio.Event()),
        stderr_lines=[on_stderr_line],
        notes=[on_note] if on_note is not None else [],
    )
    await Pipeline([Prepare(), Execute(term_grace_s=term_grace_s), Collect()]).run(case)
    if case.ending is not None:
        raise StartError(case.ending.reason)
    if case.result is None:  # `Collect` gives it whenever no stage ended the case
        raise StartError("the case ended without a result")
    return case.result
