"""How features join a run's lifecycle: typed registries that the shared layer calls and the
features fill, so that starting, settling, summing up and watching a run never import one.

A feature registers when Django has loaded it (its AppConfig's `ready()` imports the module
whose decorators register):

- `@start_check`: may refuse a run before it starts (judges: a runner must run them too);
- `@result_check`: may refuse a reported result before it settles (artifacts: the blobs it
  names must be held by the job's workspace);
- `@results_stored`: keeps what the feature needs of results just stored (their artifacts;
  the judge jobs of a judge-graded case);
- `@lane(kind)`: a kind of job other than a case's (judge jobs): its report read before the
  settle transaction, recorded in it, or its loss when the job ends without one;
- `@summary_part`: figures of a run's summary (what its judges cost);
- `@live_part(name)`: a message of the live run page (its running cases, step and frame).

What names a blob, and what retention forgets of old runs, are the blob store's registries
(`scorecards.blobs.references`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from runnercli.protocol import CaseResult as WireResult
    from runnercli.protocol import HarnessSpec, ResultReport
    from runners.models import Runner, RunnerJob
    from scorecards.models import CaseResult, Run, Workspace

# What a live part remembers of each thing it sent a watcher, by id: sent again when changed.
Seen = dict[int, tuple[Any, ...]]


class StartCheck(Protocol):
    def __call__(self, *, user: User, runtime: str, spec: HarnessSpec) -> None: ...


class ResultCheck(Protocol):
    def __call__(self, *, runner: Runner, reports: Sequence[ResultReport]) -> dict[int, str]: ...


@dataclass(frozen=True)
class Stored:
    """A result just stored: its row, the report it came from, and the job it settled."""

    row: CaseResult
    result: WireResult
    job: RunnerJob


class ResultsStored(Protocol):
    def __call__(self, *, run: Run, stored: Sequence[Stored]) -> None: ...


class Lane(Protocol):
    """A kind of job whose report is not a case's result (a judge's answer)."""

    def read(self, result: WireResult) -> Any:
        """What the report says, read before the settle transaction (no lock held)."""

    def record(
        self, *, run: Run, job: RunnerJob, runner: Runner, result: WireResult, read: Any
    ) -> None:
        """Record it in the settle transaction, the run's row locked."""

    def lost(self, *, run: Run, job: RunnerJob, reason: str) -> None:
        """The job ended without a report (out of attempts, no runner, refused); the run's
        row is locked."""


@dataclass(frozen=True)
class Read:
    """A lane's report as read before the lock: what its `record` is handed."""

    lane: Lane
    value: Any


@dataclass(frozen=True)
class SummaryPart:
    figures: Callable[[Run], dict[str, Any]]
    # The same figures of a run that nothing has settled in yet.
    before: dict[str, Any]


class LivePart(Protocol):
    def __call__(self, run: Run, seen: Seen) -> dict[str, Any] | None: ...


START_CHECKS: list[StartCheck] = []
RESULT_CHECKS: list[ResultCheck] = []
RESULTS_STORED: list[ResultsStored] = []
LANES: dict[str, Lane] = {}
SUMMARY_PARTS: list[SummaryPart] = []
LIVE_PARTS: dict[str, LivePart] = {}
# What features add to a harness as listed and on the Harnesses page: figures(workspace, name).
HARNESS_PARTS: list[Callable[[Workspace, str], dict[str, Any]]] = []

T = TypeVar("T")


def start_check(check: StartCheck) -> StartCheck:
    """Register `check(user=, runtime=, spec=)`: it raises a ServiceError to refuse the run."""
    START_CHECKS.append(check)
    return check


def result_check(check: ResultCheck) -> ResultCheck:
    """Register `check(runner=, reports=)`: the reports it refuses, by job id, with why."""
    RESULT_CHECKS.append(check)
    return check


def results_stored(keep: ResultsStored) -> ResultsStored:
    """Register `keep(run=, stored=)`, called in the settle transaction, the run locked."""
    RESULTS_STORED.append(keep)
    return keep


def lane(kind: str) -> Callable[[type[T]], type[T]]:
    """Register a class whose instance is the lane of jobs of `kind`."""

    def register(cls: type[T]) -> type[T]:
        LANES[kind] = cls()  # type: ignore[assignment]
        return cls

    return register


def summary_part(**before: Any) -> Callable[[Callable[[Run], dict[str, Any]]], Any]:
    """Register `figures(run)`; `before` are those figures while nothing has settled."""

    def register(figures: Callable[[Run], dict[str, Any]]) -> Callable[[Run], dict[str, Any]]:
        SUMMARY_PARTS.append(SummaryPart(figures, before))
        return figures

    return register


def live_part(name: str) -> Callable[[LivePart], LivePart]:
    """Register `changes(run, seen)`: the message named `name` bringing a watcher up to date
    (advancing `seen`), or None when nothing changed."""

    def register(changes: LivePart) -> LivePart:
        LIVE_PARTS[name] = changes
        return changes

    return register


def start_refusals(*, user: User, runtime: str, spec: HarnessSpec) -> None:
    for check in START_CHECKS:
        check(user=user, runtime=runtime, spec=spec)


def result_refusals(*, runner: Runner, reports: Sequence[ResultReport]) -> dict[int, str]:
    refused: dict[int, str] = {}
    for check in RESULT_CHECKS:
        left = [report for report in reports if report.job_id not in refused]
        refused |= check(runner=runner, reports=left)
    return refused


def stored_keep(*, run: Run, stored: Sequence[Stored]) -> None:
    for keep in RESULTS_STORED:
        keep(run=run, stored=stored)


def summary_figures(run: Run) -> dict[str, Any]:
    return {name: value for part in SUMMARY_PARTS for name, value in part.figures(run).items()}


def summary_before() -> dict[str, Any]:
    return {name: value for part in SUMMARY_PARTS for name, value in part.before.items()}


def harness_part(
    figures: Callable[[Workspace, str], dict[str, Any]],
) -> Callable[[Workspace, str], dict[str, Any]]:
    """Register `figures(workspace, name)`: what a feature adds to a harness's reply and panel."""
    HARNESS_PARTS.append(figures)
    return figures


def harness_figures(workspace: Workspace, name: str) -> dict[str, Any]:
    return {key: value for part in HARNESS_PARTS for key, value in part(workspace, name).items()}
