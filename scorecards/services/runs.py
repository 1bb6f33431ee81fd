"""Starting and canceling scorecard runs: the runtime resolved against the submitter's own
runners, one job per case parked in the queue, the first `concurrency` admitted at once."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from pydantic import ValidationError

from core.errors import Forbidden, Invalid, NotFound, QuotaExceeded
from core.fields import ascii_int
from runnercli.protocol import REPO_CAPABILITY_PREFIX, HarnessSpec, spec_features
from runners import queue
from runners.models import Runner
from scorecards import lifecycle
from scorecards.models import (
    Dispatched,
    EventLevel,
    HarnessVersion,
    Run,
    RunEvent,
    RunStatus,
    Verdict,
    Workspace,
)
from scorecards.scoring import Grade
from scorecards.selectors.runs import run_get
from scorecards.selectors.starts import start_reads
from scorecards.selectors.workspaces import membership_for
from scorecards.services.events import event
from scorecards.services.grades import GRADE_STATE, grades_write
from scorecards.services.jobs import JobPlan, case_job
from scorecards.services.results import run_complete
from scorecards.services.run_rows import (
    CaseRow,
    run_events_insert,
    run_insert_parking_jobs,
    run_insert_reading_cases,
)

if TYPE_CHECKING:
    from django.contrib.auth.models import User

# ASCII digits only: `\d` would take other scripts' digits.
RUNTIME_RE = re.compile(r"^self:(any|[0-9]{1,18})$")
MAX_CONCURRENCY = 256
MAX_REPEATS = 20
MAX_METADATA_BYTES = 4096
# A run's own budget (`max_cost_usd`), in USD.
MIN_BUDGET_USD = Decimal("0.0001")
MAX_BUDGET_USD = Decimal("100000")
GIT_SHA_RE = re.compile(r"[0-9a-fA-F]{7,40}")
OFFLINE_HINT = "start it with `python -m runnercli run`"
CANCELED_WHILE_JUDGING = Grade(verdict="error", score=0.0, detail="canceled while judging")


@dataclass(frozen=True)
class Target:
    runner: Runner | None  # None: any of the submitter's capable runners
    candidates: list[Runner]


def _parse_runtime(runtime: str) -> int | None:
    """The runner id a runtime names; None for `self:any`."""
    match = RUNTIME_RE.match(runtime or "")
    if match is None:
        raise Invalid(
            {"runtime": [f"Unknown runtime {runtime!r}: use `self:<runner_id>` or `self:any`."]}
        )
    return None if match.group(1) == "any" else ascii_int(match.group(1))


def runtime_resolve(
    *, user: User, runtime: str, capabilities: list[str], features: Sequence[str] = ()
) -> Target:
    """Resolve a runtime against the submitter's own runners, never anyone else's.

    Someone else's runner id is NotFound even for a workspace admin; no runner is
    NotFound; none with the harness's capabilities, or none able to run what it uses (its
    runner `features`), is Invalid, saying what fixes it. Offline is not an error.
    """
    which = _parse_runtime(runtime)
    mine = Runner.objects.owned_by(user).active()
    runners = list(mine) if which is None else list(mine.filter(pk=which)[:1])
    return _target(which, runners, capabilities=capabilities, features=features)


def _target(
    which: int | None, runners: list[Runner], *, capabilities: list[str], features: Sequence[str]
) -> Target:
    """`runtime_resolve` over the submitter's active runners as read (only `which`, if named)."""
    if which is None:
        if not runners:
            raise NotFound("You have no runners: pair one on your account page first.")
        capable = [r for r in runners if r.has_capabilities(capabilities)]
        if not capable:
            held = set().union(*(r.capabilities or [] for r in runners))
            lacked = sorted(set(capabilities) - held)
            raise Invalid({"runtime": [_lacking(None, capabilities, lacked)]})
        able = [r for r in capable if r.has_features(features)]
        if not able:
            raise Invalid({"runtime": [_outdated(capable[0], features)]})
        return Target(runner=None, candidates=able)
    if not runners:
        raise NotFound(f"Runner {which} not found among your runners.")
    runner = runners[0]
    missing = sorted(set(capabilities) - set(runner.capabilities or []))
    if missing:
        raise Invalid({"runtime": [_lacking(runner, capabilities, missing)]})
    if not runner.has_features(features):
        raise Invalid({"runtime": [_outdated(runner, features)]})
    return Target(runner=runner, candidates=[runner])


def _lacking(runner: Runner | None, needed: list[str], missing: list[str]) -> str:
    """Why no runner may take the harness's jobs, and the command that fixes a missing repo."""
    who = f"Runner {runner.label!r} lacks" if runner else "None of your runners has"
    text = f"{who} the capabilities {missing if runner else needed}."
    repos = [c.removeprefix(REPO_CAPABILITY_PREFIX) for c in missing if c.startswith("repo:")]
    for name in repos:
        text += f" Map the repo on the machine: `python -m runnercli repo add {name} PATH`."
    return text


def _outdated(runner: Runner, features: Sequence[str]) -> str:
    lacking = ", ".join(sorted(set(features) - set(runner.features or [])))
    return f"update the runner on {runner.label}: it cannot run {lacking}"


def _check_quota(workspace: Workspace, now: datetime) -> None:
    if workspace.run_quota is None:
        return
    month_start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    used = Run.objects.filter(workspace=workspace, created_at__gte=month_start).count()
    if used >= workspace.run_quota:
        raise QuotaExceeded(
            f"Workspace {workspace.slug!r} has used its run quota "
            f"({workspace.run_quota} runs this month)."
        )


def run_start(
    *,
    user: User,
    workspace_slug: str,
    harness: str,
    dataset: str,
    runtime: str,
    concurrency: int = 1,
    harness_version: int | None = None,
    dataset_version: int | None = None,
    repeats: int = 1,
    metadata: dict[str, Any] | None = None,
    case_keys: Sequence[str] | None = None,
    parent: Run | None = None,
    rerun_of: str = "",
    max_cost_usd: Decimal | float | None = None,
) -> Run:
    """Start a scorecard run on the submitter's runner(s): one queued job per case and repeat
    (only the cases named by `case_keys`, when given: a rerun of `parent`).

    A self-hosted run spends the member's own login: it counts against the workspace's
    run quota but never draws its USD/token budget. `max_cost_usd` is the run's own budget:
    once its cases and judges reported that much, the cases not started are skipped.
    """
    if not 1 <= concurrency <= MAX_CONCURRENCY:
        raise Invalid({"concurrency": [f"Must be between 1 and {MAX_CONCURRENCY}."]})
    if not 1 <= repeats <= MAX_REPEATS:
        raise Invalid({"repeats": [f"Must be between 1 and {MAX_REPEATS}."]})
    _check_metadata(metadata)
    budget = _budget(max_cost_usd)
    try:
        which, unparsed = _parse_runtime(runtime), None
    except Invalid as exc:  # said after what the reads refuse, as before
        which, unparsed = None, exc
    with transaction.atomic():
        # The workspace row serializes run creation, so the quota holds under races: it is
        # locked with the membership that lets the submitter start a run.
        reads = start_reads(
            user=user,
            slug=workspace_slug,
            harness=harness,
            harness_version=harness_version,
            dataset=dataset,
            dataset_version=dataset_version,
            runner_id=which,
        )
        workspace, hv, dv = reads.membership.workspace, reads.harness, reads.dataset
        spec = _runnable_spec(hv)
        _check_repo_ref(spec, metadata)
        if unparsed is not None:
            raise unparsed
        target = _target(
            which,
            reads.runners,
            capabilities=spec.required_capabilities(),
            features=spec_features(spec),
        )
        # What a feature needs of the run's runners besides its cases (its judges).
        lifecycle.start_refusals(user=user, runtime=runtime, spec=spec)
        now = timezone.now()
        _check_quota(workspace, now)
        run = Run(
            workspace=workspace,
            harness=hv,
            dataset=dv,
            runtime=runtime,
            runner=target.runner,
            concurrency=concurrency,
            repeats=repeats,
            metadata=metadata or {},
            parent=parent,
            rerun_of=rerun_of,
            max_cost_usd=budget,
            submitted_by=user,
            created_at=now,
        )
        # A start of the whole dataset knows its jobs before it reads its cases: its events
        # are written with the run. A rerun's are written once its cases are read.
        planned = None if case_keys is not None else dv.case_count * repeats
        said = [] if planned is None else _dispatch_said(run, target, planned)
        if planned is not None and queue.parks_with_run(planned):
            count, events = run_insert_parking_jobs(run, said, now, _parking(run, spec, target))
        else:
            cases, events = run_insert_reading_cases(run, case_keys, said, now)
            count = _park_jobs(run, spec, target, cases)
        if planned is None:
            events = run_events_insert(run, _dispatch_said(run, target, count), now)
        elif count != planned:
            # The version's count of cases disagrees with its cases: say what was dispatched.
            first = events[0]
            first.message = _dispatch_said(run, target, count)[0][1]
            RunEvent.objects.filter(pk=first.pk).update(message=first.message)
        if count == 0:
            run_complete(run, now)
        else:
            run.dispatched = Dispatched(jobs=count, events=events)
    return run


def _dispatch_said(run: Run, target: Target, jobs: int) -> list[tuple[str, str]]:
    """The run's first events: what it dispatched to whom, and whether they are offline."""
    budget = run.max_cost_usd
    said: list[tuple[str, str]] = [
        (
            EventLevel.INFO,
            f"Dispatched {_jobs_text(jobs, run.repeats)} of {run.harness} over {run.dataset} "
            f"to {_target_name(target)}"
            + ("." if budget is None else f", within a run budget of ${budget:.2f}."),
        )
    ]
    offline = [r for r in target.candidates if not r.is_online]
    if offline and len(offline) == len(target.candidates):
        names = ", ".join(r.label for r in offline)
        said.append((EventLevel.WARNING, f"Runner {names} is offline — {OFFLINE_HINT}"))
    return said


def _budget(value: Decimal | float | None) -> Decimal | None:
    """The run's budget as stored (cents' hundredths), or Invalid saying the bounds."""
    if value is None:
        return None
    try:
        amount = Decimal(str(value))
    except ArithmeticError:
        amount = Decimal("NaN")
    if not amount.is_finite() or not MIN_BUDGET_USD <= amount <= MAX_BUDGET_USD:
        raise Invalid(
            {"max_cost_usd": [f"A number of USD from {MIN_BUDGET_USD} to {MAX_BUDGET_USD}."]}
        )
    return amount.quantize(Decimal("0.0001"))


def _check_metadata(metadata: Any) -> None:
    if metadata is None:
        return
    if not isinstance(metadata, dict):
        raise Invalid({"metadata": ['Must be a JSON object, e.g. {"git_sha": "…"}.']})
    size = len(json.dumps(metadata, ensure_ascii=False).encode())
    if size > MAX_METADATA_BYTES or "\\u0000" in json.dumps(metadata):
        raise Invalid(
            {"metadata": [f"At most {MAX_METADATA_BYTES} bytes of JSON, without NUL ({size})."]}
        )


def _check_repo_ref(spec: HarnessSpec, metadata: dict[str, Any] | None) -> None:
    """A harness whose cases run at the run's commit needs that commit in the metadata."""
    if spec.repo is None or spec.repo.ref != "run":
        return
    sha = (metadata or {}).get("git_sha")
    if not isinstance(sha, str) or not GIT_SHA_RE.fullmatch(sha):
        raise Invalid(
            {
                "metadata": [
                    f"The harness runs each case at the run's commit (repo.ref: run): give "
                    f'metadata {{"git_sha": "<commit>"}} (7-40 hex digits), not {sha!r}.'
                ]
            }
        )


def _jobs_text(jobs: int, repeats: int) -> str:
    if repeats == 1:
        return f"{jobs} cases"
    return f"{jobs // repeats} cases, {repeats} times each"


def _runnable_spec(harness: HarnessVersion) -> HarnessSpec:
    """The version's spec as today's runners accept it (a version stored under older rules,
    such as one setting PATH, is refused here, naming why, rather than on every machine)."""
    try:
        return HarnessSpec.model_validate(harness.spec)
    except ValidationError as exc:
        reasons = "; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors()[:3])
        raise Invalid({"harness": [f"{harness} cannot run: {reasons}"]}) from exc


def _target_name(target: Target) -> str:
    if target.runner is not None:
        return f"runner {target.runner.label} (#{target.runner.pk})"
    return "any of the submitter's runners"


def _parking(run: Run, spec: HarnessSpec, target: Target) -> queue.ParkWithRun:
    """What parks the jobs `_park_jobs` would, by the statement that inserts the run (which
    writes the run's id into what they share)."""
    plan = case_job(
        run=run, spec=spec, name=run.harness.name, needs_features=spec_features(spec), run_id=0
    )
    return queue.jobs_park_with_run(repeats=run.repeats, **_parked_as(run, target, plan))


def _park_jobs(run: Run, spec: HarnessSpec, target: Target, cases: list[CaseRow]) -> int:
    """Queue one job per case and repeat (every case once, then again for each repeat); the
    first `concurrency` are admitted at once."""
    plan = case_job(run=run, spec=spec, name=run.harness.name, needs_features=spec_features(spec))
    return queue.jobs_park(
        run_id=run.pk,
        jobs=(
            (key, repeat, plan.own(key, case_input, repeat, hidden=hidden))
            for repeat in range(run.repeats)
            for key, case_input, hidden in cases
        ),
        **_parked_as(run, target, plan),
    )


def _parked_as(run: Run, target: Target, plan: JobPlan) -> dict[str, Any]:
    """Whose, where and how a run's case jobs are parked: the first `concurrency` queued."""
    return {
        "owner_id": run.submitted_by_id,
        "runner_id": target.runner.pk if target.runner else None,
        "shared": plan.shared,
        "required_capabilities": plan.capabilities,
        "needs_features": plan.needs_features,
        "admit": run.concurrency,
        "max_attempts": settings.EVERDICT_MAX_ATTEMPTS,
    }


def run_cancel(*, user: User, run_id: int) -> Run:
    """Cancel a run: its own submitter (member) or a workspace admin may."""
    run = run_get(user=user, run_id=run_id)
    if not membership_for(user=user, slug=run.workspace.slug).may_cancel(run):
        raise Forbidden("Only the run's submitter or a workspace admin can cancel it.")
    with transaction.atomic():
        run = Run.objects.select_for_update(of=("self",)).get(pk=run_id)
        if run.is_terminal:
            return run
        canceled = queue.jobs_cancel(run_id=run.pk)
        # A case whose judges were canceled has no verdict to wait for any more.
        judging = run.results.filter(Q(verdict=Verdict.JUDGING) | Q(grader_verdict=Verdict.JUDGING))
        grades_write(run, [(row, CANCELED_WHILE_JUDGING) for row in judging.only(*GRADE_STATE)])
        now = timezone.now()
        run.status = RunStatus.CANCELED
        run.finished_at = now
        Run.objects.filter(pk=run.pk).update(status=RunStatus.CANCELED, finished_at=now)
        event(
            run,
            f"Canceled by {user.get_username()}: {len(canceled)} open cases stopped.",
            EventLevel.WARNING,
        )
    return run
