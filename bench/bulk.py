"""Runs of 10,000 or 100,000 settled results, written with bulk inserts (never through a runner):
for `run_page.py`, `compare_runs.py` and `search.py`, and for the tests that prove the pages,
replies and exports stay bounded; and the in-process reads those benchmarks time."""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from itertools import islice
from typing import Any

from django.utils import timezone

from runnercli.protocol import HarnessSpec
from runners import queue
from runners.models import JobStatus, RunnerJob
from scorecards.models import Case, CaseResult, DatasetVersion, Run, RunStatus, Workspace
from scorecards.services import harness_create
from scorecards.services.jobs import case_job

ECHO: dict[str, Any] = {
    "command": ["python", "-c", "print('{input.text}')"],
    "timeout_s": 30,
    "output": "text",
    "grader": {"type": "exact"},
}
BATCH = 5000


def _verdict_all_pass(case: int, repeat: int) -> str:
    return "pass"


def seeded_run(
    user: Any,
    *,
    slug: str = "acme",
    name: str = "bulk",
    cases: int,
    repeats: int = 1,
    verdict: Callable[[int, int], str] = _verdict_all_pass,
    output: Callable[[int, int], str] = lambda case, repeat: f"answer {case}",
    status: str = RunStatus.SUCCEEDED,
    attempts: bool = False,
) -> Run:
    """A finished run of `cases` cases, `repeats` times each, every job succeeded and every result
    settled in case order (seq 1…n); the harness is created through the service, the rest in
    bulk."""
    workspace = Workspace.objects.get(slug=slug)
    harness = harness_create(user=user, workspace_slug=slug, name=name, spec=ECHO)
    version = DatasetVersion.objects.filter(workspace=workspace, name=name).count() + 1
    dataset = DatasetVersion.objects.create(
        workspace=workspace, name=name, version=version, created_by=user, case_count=cases
    )
    new_cases = (
        Case(dataset=dataset, position=i, key=f"c{i}", input={"i": i}, expected=f"answer {i}")
        for i in range(cases)
    )
    while batch := list(islice(new_cases, BATCH)):
        Case.objects.bulk_create(batch)
    now = timezone.now()
    run = Run.objects.create(
        workspace=workspace,
        harness=harness,
        dataset=dataset,
        runtime="self:any",
        repeats=repeats,
        submitted_by=user,
        status=status,
        started_at=now,
        finished_at=now,
    )
    plan = case_job(run=run, spec=HarnessSpec.model_validate(harness.spec), name=name)
    queue.jobs_park(
        owner_id=user.pk,
        runner_id=None,
        run_id=run.pk,
        shared=plan.shared,
        jobs=[
            (f"c{i}", r, plan.own(f"c{i}", {"i": i}, r))
            for r in range(repeats)
            for i in range(cases)
        ],
        required_capabilities=[],
        admit=0,
        max_attempts=1,
    )
    RunnerJob.objects.filter(run=run).update(status=JobStatus.SUCCEEDED, finished_at=now)
    ids = dict(Case.objects.filter(dataset=dataset).values_list("position", "pk"))
    attempt_of = attempts_add(run) if attempts else None
    results_add(run, ids, repeats=repeats, verdict=verdict, output=output, attempt_of=attempt_of)
    return run


def attempts_add(run: Run) -> dict[tuple[int, int], int]:
    """One settled attempt for every job of the run, in bulk: (case position, repeat) → its id."""
    from runners.models import AttemptStatus, JobAttempt

    now = timezone.now()
    jobs = RunnerJob.objects.filter(run=run).values_list("pk", flat=True)
    pending = (
        JobAttempt(job_id=pk, epoch=1, status=AttemptStatus.SUCCEEDED, ended_at=now)
        for pk in jobs.iterator()
    )
    while batch := list(islice(pending, BATCH)):
        JobAttempt.objects.bulk_create(batch)
    rows = JobAttempt.objects.filter(job__run=run).values_list("job__case_key", "job__repeat", "pk")
    return {(int(key[1:]), repeat): pk for key, repeat, pk in rows}


def results_add(
    run: Run,
    case_ids: dict[int, int],
    *,
    repeats: int,
    verdict: Callable[[int, int], str],
    output: Callable[[int, int], str],
    first_seq: int = 1,
    attempt_of: dict[tuple[int, int], int] | None = None,
) -> None:
    """Settled results for these cases (position → id), in bulk, numbered from `first_seq`."""
    provenance = {"ran_on": "self-hosted", "runner": "1/bulk", "by": run.submitted_by.username}

    def rows() -> Any:
        seq = first_seq
        for r in range(repeats):
            for position, case_id in sorted(case_ids.items()):
                judged = verdict(position, r)
                yield CaseResult(
                    run=run,
                    case_id=case_id,
                    repeat=r,
                    seq=seq,
                    attempt_id=attempt_of[(position, r)] if attempt_of else None,
                    verdict=judged,
                    score=1.0 if judged == "pass" else 0.0,
                    status="completed",
                    output=output(position, r),
                    reason="" if judged == "pass" else "expected `x`, got `y`",
                    duration_ms=5,
                    usage={"total_cost_usd": 0.001},
                    provenance=provenance,
                )
                seq += 1

    pending = rows()
    while batch := list(islice(pending, BATCH)):
        CaseResult.objects.bulk_create(batch)


def traces_add(run: Run, *, events: int, data: Callable[[int, int], dict[str, Any]]) -> int:
    """`events` trace events (`data(case, n)`) for the settled attempt of each result of a run
    seeded with `attempts=True`, in bulk (PostgreSQL: by COPY); the number written."""
    from django.db import connection

    # Read whole first: the COPY holds the connection while the rows are written.
    results = list(
        CaseResult.objects.filter(run=run, attempt__isnull=False).values_list(
            "attempt_id", "case__position"
        )
    )
    ts = 1_700_000_000_000

    def rows() -> Any:
        for attempt_id, position in results:
            for n in range(events):
                body = data(position, n)
                kind = str(body.get("kind", "message"))
                yield attempt_id, n, ts + n, kind, body

    if connection.vendor == "postgresql":
        return _traces_copied(rows(), rebuild=len(results) * events >= REBUILT_FROM)
    from scorecards.traces.models import TraceEvent

    pending = (
        TraceEvent(attempt_id=a, seq=n, ts=t, kind=k, data=body, size=len(str(body)))
        for a, n, t, k, body in rows()
    )
    written = 0
    while batch := list(islice(pending, BATCH)):
        TraceEvent.objects.bulk_create(batch)
        written += len(batch)
    return written


# From this many events, the trace's search index is built once after the COPY rather than
# kept up row by row (a million events: minutes less).
REBUILT_FROM = 100_000
_TRACE_INDEX = "search_traceevent_data_trgm"


def _traces_copied(rows: Any, *, rebuild: bool) -> int:
    from django.db import connection

    copy = "COPY scorecards_traceevent (attempt_id, seq, ts, kind, name, data, size) FROM STDIN"
    written = 0
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s", [_TRACE_INDEX])
        index = cursor.fetchone() if rebuild else None
        if index:
            cursor.execute(f"DROP INDEX {_TRACE_INDEX}")
        with cursor.cursor.copy(copy) as out:
            for attempt_id, seq, ts, kind, body in rows:
                text = json.dumps(body)
                out.write_row((attempt_id, seq, ts, kind, "", text, len(str(body))))
                written += 1
        if index:
            cursor.execute(index[0])
            cursor.execute("ANALYZE scorecards_traceevent")
    return written


def analyzed() -> None:
    """Refresh the planner's statistics after a bulk seed, as autovacuum would soon after
    (PostgreSQL; a no-op on SQLite)."""
    from django.db import connection

    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")


def member_client(user: Any) -> Any:
    """Django's test client signed in as `user`: a request through the whole stack, in
    process."""
    from django.test import Client

    client = Client(HTTP_HOST="127.0.0.1")
    client.force_login(user)
    return client


def median_ms(
    work: Callable[[], Any], repeat: int, before: Callable[[], None] | None = None
) -> float:
    """Median milliseconds of `repeat` calls of `work` (a request answering 200; `before` runs
    untimed ahead of each)."""
    times = []
    for _ in range(repeat):
        if before is not None:
            before()
        began = time.perf_counter()
        response = work()
        times.append((time.perf_counter() - began) * 1000)
        assert response.status_code == 200, response.content[:300]
    return statistics.median(times)
