"""Reads of runs: one run (for members of its workspace), its summary and logs, the lists
behind the pages, and the runtimes a member may choose."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db.models import Count, Q, QuerySet

from core.errors import Invalid, NotFound
from core.fields import query_int
from runnercli.protocol import REPO_CAPABILITY_PREFIX
from runners.models import JobLogLine, Runner
from runners.presence import runner_statuses, status_severity
from scorecards.models import HarnessVersion, Run, RunStatus, Verdict
from scorecards.selectors.cursors import cursor_decode
from scorecards.selectors.results import limit_parse
from scorecards.selectors.workspaces import membership_for

if TYPE_CHECKING:
    from django.contrib.auth.models import User


def run_get(*, user: User, run_id: int) -> Run:
    """Return a run the user can see (a member of its workspace); others get NotFound."""
    run = (
        Run.objects.visible_to(user)
        .select_related("workspace", "harness", "dataset", "submitted_by", "runner", "graded_with")
        .filter(pk=run_id)
        .first()
    )
    if run is None:
        raise NotFound("Run not found.")
    return run


def repeat_of(run: Run, repeat: str | int | None) -> int:
    """Which repeat of the run a call names (0-based); a run with several needs it named."""
    if (repeat is None or repeat == "") and run.repeats > 1:
        says = f"This run has {run.repeats} repeats: say which, 0 to {run.repeats - 1}."
        raise Invalid({"repeat": [says]})
    return query_int("repeat", repeat, default=0, highest=run.repeats - 1)


# A log line as read: its sequence number, when it came, its case's key and the line.
LogRow = tuple[int, datetime, str, str]


def run_logs(*, user: User, run_id: int, after: int = 0, limit: int = 1000) -> list[LogRow]:
    """Log lines pushed by runners for a run, in order, after sequence number `after`."""
    run = run_get(user=user, run_id=run_id)
    rows = (
        JobLogLine.objects.filter(run=run, pk__gt=after)
        .order_by("pk")
        .values_list("pk", "at", "job__case_key", "line")[:limit]
    )
    return list(rows)


RUNTIME_ANY = "self:any"


def runtime_label(run: Run) -> str:
    """How a run's runtime reads on a page: which of the submitter's machines it targets."""
    if run.runner is not None:
        return f"{run.runner.label} (#{run.runner.pk}) of {run.submitted_by.get_username()}"
    if run.runtime == RUNTIME_ANY:
        return f"any of {run.submitted_by.get_username()}'s runners"
    return run.runtime


def runs_of(
    *,
    user: User,
    workspace_slug: str,
    harness: str | None = None,
    dataset: str | None = None,
    status: str | None = None,
) -> QuerySet[Run]:
    """The workspace's runs, newest first, annotated with `n_done` and `n_pass` settled
    results and `n_skipped` results its budget skipped; filtered by harness name, dataset
    name and status."""
    workspace = membership_for(user=user, slug=workspace_slug).workspace
    runs = Run.objects.filter(workspace=workspace)
    if status:
        if status not in RunStatus.values:
            raise Invalid({"status": [f"Unknown status {status!r}: one of {RunStatus.values}."]})
        runs = runs.filter(status=status)
    if harness:
        runs = runs.filter(harness__name=harness)
    if dataset:
        runs = runs.filter(dataset__name=dataset)
    return (
        runs.select_related("workspace", "harness", "dataset", "submitted_by", "runner")
        .annotate(
            n_done=Count("results"),
            n_pass=Count("results", filter=Q(results__verdict=Verdict.PASS)),
            n_skipped=Count("results", filter=Q(results__verdict=Verdict.SKIPPED)),
        )
        .order_by("-id")
    )


def runs_latest(*, user: User, workspace_slug: str, limit: int = 50) -> list[Run]:
    """The workspace's latest runs, annotated with `n_done` and `n_pass` settled cases."""
    return list(runs_of(user=user, workspace_slug=workspace_slug)[:limit])


def runs_page(
    *,
    user: User,
    workspace_slug: str,
    harness: str | None = None,
    dataset: str | None = None,
    status: str | None = None,
    cursor: str | None = None,
    limit: Any = None,
) -> tuple[list[Run], int | None]:
    """A page of runs as MCP asks for it, newest first (annotated as `runs_of` does), and the
    id to continue before (None at the end)."""
    runs = runs_of(
        user=user, workspace_slug=workspace_slug, harness=harness, dataset=dataset, status=status
    )
    before = cursor_decode(cursor)
    if before is not None:
        runs = runs.filter(pk__lt=before)
    size = limit_parse(limit)
    page = list(runs[: size + 1])
    more = len(page) > size
    page = page[:size]
    return page, page[-1].pk if more else None


@dataclass(frozen=True)
class RuntimeChoice:
    """One entry of the run form's runtime selector."""

    value: str
    label: str
    capabilities: list[str]
    online: bool
    status: str
    missing: list[str]
    features: list[str] = field(default_factory=list)
    # The runner features the harness needs that this runner lacks (it must be updated).
    outdated: list[str] = field(default_factory=list)

    @property
    def severity(self) -> str:
        return status_severity(self.status) if self.status else ""

    @property
    def disabled(self) -> bool:
        return bool(self.missing or self.outdated)

    @property
    def reason(self) -> str:
        """Why the form greys it out, saying what fixes it."""
        return runtime_refusal(self.missing, self.outdated)


# Capabilities a runner finds for itself on its machine (a program on its PATH): installing
# the program is what gives them.
INSTALLABLE = ("chromium",)


def runtime_refusal(missing: list[str], outdated: list[str]) -> str:
    """`lacks docker`, `map the repo: python -m runnercli repo add acme/app PATH`, `update
    the runner: it cannot run repo` — what keeps a runner from a harness, or ""."""
    repos = [c.removeprefix(REPO_CAPABILITY_PREFIX) for c in missing if c.startswith("repo:")]
    others = [c for c in missing if not c.startswith("repo:") and c not in INSTALLABLE]
    parts = [f"lacks {', '.join(others)}"] if others else []
    parts += [f"needs {c} (install it on that machine)" for c in missing if c in INSTALLABLE]
    parts += [f"map the repo: python -m runnercli repo add {name} PATH" for name in repos]
    if outdated:
        parts.append(f"update the runner: it cannot run {', '.join(outdated)}")
    return "; ".join(parts)


def runtime_choices(
    *, user: User, capabilities: list[str], features: list[str] | None = None
) -> list[RuntimeChoice]:
    """My active runners as runtimes, then "any of my runners"; those lacking `capabilities`
    or the runner `features` the harness needs carry what they miss (the form greys them
    out, saying what fixes it; dispatch would refuse them anyway)."""
    runners = list(Runner.objects.owned_by(user).active())
    statuses = runner_statuses([r.pk for r in runners])
    needed, wanted = set(capabilities), set(features or [])
    choices = [
        RuntimeChoice(
            value=f"self:{r.pk}",
            label=f"My local host — {r.label}",
            capabilities=sorted(r.capabilities or []),
            online=r.is_online,
            status=statuses.get(r.pk, ""),
            missing=sorted(needed - set(r.capabilities or [])),
            features=sorted(r.features or []),
            outdated=sorted(wanted - set(r.features or [])),
        )
        for r in runners
    ]
    choices.append(_any_choice(choices, needed, wanted))
    return choices


def _any_choice(mine: list[RuntimeChoice], needed: set[str], wanted: set[str]) -> RuntimeChoice:
    """ "Any of my runners": usable when one of them is; otherwise what they all lack."""
    able = [c for c in mine if not c.disabled]
    missing: list[str] = []
    outdated: list[str] = []
    if not mine:
        missing = ["a paired runner"]
    elif not able and any(not c.missing for c in mine):
        outdated = sorted(wanted)
    elif not able:
        missing = sorted(needed)
    return RuntimeChoice(
        value=RUNTIME_ANY,
        label="Any of my runners",
        capabilities=[],
        online=any(c.online for c in able),
        status="",
        missing=missing,
        outdated=outdated,
    )


def run_baseline(run: Run) -> Run | None:
    """The run this one is compared with by default: the latest earlier finished run (not a
    rerun, not canceled) of the same harness over the same dataset, in the same workspace."""
    return (
        Run.objects.filter(
            workspace_id=run.workspace_id,
            harness__name=run.harness.name,
            dataset__name=run.dataset.name,
            status__in=(RunStatus.SUCCEEDED, RunStatus.FAILED),
            parent__isnull=True,
            pk__lt=run.pk,
        )
        .select_related("workspace", "harness", "dataset")
        .order_by("-pk")
        .first()
    )


def comparable_runs(*, run: Run, limit: int = 20) -> list[Run]:
    """Other runs of the same dataset in the run's workspace, newest first."""
    return list(
        Run.objects.filter(workspace_id=run.workspace_id, dataset__name=run.dataset.name)
        .exclude(pk=run.pk)
        .select_related("harness", "dataset")
        .order_by("-created_at", "-id")[:limit]
    )


def harness_versions(run: Run) -> list[HarnessVersion]:
    """The versions of the run's harness, newest first: the graders a regrade may apply."""
    return list(
        HarnessVersion.objects.filter(workspace_id=run.workspace_id, name=run.harness.name)
        .only("pk", "name", "version")
        .order_by("-version")
    )
