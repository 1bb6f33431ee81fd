"""One case as a pipeline of stages, and the context they share.

A stage is a small object with three hooks, each optional:

- `start` sets the case up, stage after stage in pipeline order (`Execute`'s start runs the
  harness to its end, so a stage listed before it prepares the run, one after it starts once
  the run is over);
- `finish`, once every stage has started, takes what the case left, in the same order (a
  diff of the repo, the final text of a parsed stream, the result, its artifacts);
- `cleanup` always runs, for every stage whose start was entered, in reverse order — after a
  stage that failed, a kill, a timeout, a cancel or the member's Ctrl-C alike.

A stage ends the case by raising `CaseEnded` (or `StartError`: the harness could not be
started), or, while the harness runs, with `case.end(...)`, which kills it: the stages after
it do not start, and `case.ending` says how the case ended. Whoever answers for the lease
(the `Deliver` stage, first in the runner's pipeline so that its cleanup comes last) reports
that ending, or else the result.

A new stage is one more object in the list: it reads and writes the `CaseContext` — the
working directory, environment variables, argv placeholders, observers of stdout and stderr,
the outcome of the run, the output, the result being built and its artifacts — and touches
no other stage. What it needs that an earlier stage gives (the case's directory, the run's
outcome, the result) it names in `needs`, the stage that gives it in `gives`: a pipeline in
which a stage comes before what it needs is refused when it is built, not found wanting
while a case runs.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, ClassVar, Literal

from runnercli.case.argv import StartError
from runnercli.case.stageclock import StageClock, stage_clock
from runnercli.case.streams import ChunkSink, LineSink
from runnercli.protocol import CaseJob, CaseResult, Lease
from runnercli.session import JobRun

EndStatus = Literal["completed", "timeout", "canceled"]


@dataclass(frozen=True)
class Failed:
    """The case could not run, or a stage ended it: reported with `fail_job` (final)."""

    reason: str
    # What the runner's output calls it ("✗ refused: …"), and what its status line keeps.
    verb: str = "failed"
    summary: str = ""


@dataclass(frozen=True)
class HandedBack:
    """Not the case's fault: back to the queue (`release_job`), no attempt spent."""

    reason: str = "the runner was stopped by its owner"


@dataclass(frozen=True)
class Stopped:
    """The server took the job back (canceled, lease lost): nothing more is reported."""

    reason: str


Ending = Failed | HandedBack | Stopped


class CaseEnded(Exception):
    """Raised by a stage to end the case; `ending` says how."""

    def __init__(self, ending: Ending) -> None:
        super().__init__(ending.reason)
        self.ending = ending


@dataclass(frozen=True)
class RunOutcome:
    """How the harness's process ended, before anything is made of it."""

    status: EndStatus
    exit_code: int | None
    # The first MAX_OUTPUT_BYTES of stdout, and how many bytes it wrote in all.
    stdout: str
    stdout_bytes: int
    stderr_tail: str
    duration_ms: int


@dataclass(frozen=True)
class Artifact:
    """A file the result names: the path it is shown under, where its bytes are here."""

    path: str
    source: Path
    media_type: str = "application/octet-stream"


class Given(Enum):
    """What a stage leaves for the stages after it."""

    DIRECTORY = "the case's directory"
    OUTCOME = "how the harness's run ended"
    RESULT = "the case's result"


class MissingGiven(LookupError):
    """A stage read what no stage before it gave: a pipeline built out of order."""

    def __init__(self, given: Given) -> None:
        super().__init__(f"no stage before this one gives {given.value}")


class PipelineError(ValueError):
    """A pipeline whose stages come before what they need."""


@dataclass
class CaseContext:
    """What the stages of one case read and write."""

    # The job and its lease (a new grant replaces the lease) and its kill event.
    job_run: JobRun
    # What stages add to the harness's environment and to its argv placeholders
    # (`{case.file}`; `{NAME}` for any NAME a stage adds).
    env: dict[str, str] = field(default_factory=dict)
    placeholders: dict[str, str] = field(default_factory=dict)
    # The argv to run when a stage changed the spec's (flags added), before placeholders.
    argv: list[str] | None = None
    # Who follows the harness as it runs: stdout chunk by chunk (`streams.Lines` turns an
    # observer of lines into one), stderr line by line; and who hears the runner's notes.
    stdout_chunks: list[ChunkSink] = field(default_factory=list)
    stderr_lines: list[LineSink] = field(default_factory=list)
    notes: list[LineSink] = field(default_factory=list)
    # Set once the harness's process is gone: a stage's background task stops on it.
    exited: asyncio.Event = field(default_factory=asyncio.Event)
    outcome: RunOutcome | None = None
    # The case's output when not stdout itself (the final text of a parsed stream), and its
    # usage when a stage read it (the final result event of that stream).
    output: str | None = None
    usage: dict[str, Any] | None = None
    # Why a case whose process ran to its end is an error all the same (the agent's stream
    # ended in the model API's error); its output is then that message.
    error: str | None = None
    # What stages add to the result's fingerprint, by its field (`repo`: the repo state the
    # case ran on), as the fingerprint's own models.
    fingerprint: dict[str, Any] = field(default_factory=dict)
    result: CaseResult | None = None
    # What stages add to the result besides the run's outcome (`verify`, `tampered`,
    # `stopped`), by the result's field.
    adds: dict[str, Any] = field(default_factory=dict)
    # The harness's process (its group's id), and the phases' clock: when the case began,
    # when the harness started and ended, the seconds its verifier took.
    agent_pid: int | None = None
    began: float = field(default_factory=time.monotonic)
    agent_started: float | None = None
    agent_ended: float | None = None
    verify_s: float = 0.0
    # Set to stop the agent without ending the case (a budget spent): TERM, then KILL.
    stop_agent: asyncio.Event = field(default_factory=asyncio.Event)
    artifacts: list[Artifact] = field(default_factory=list)
    ending: Ending | None = None
    # The task running the case was cancelled (the runner is going): nothing is reported.
    cancelled: bool = False
    # Whether the server took the report of this case.
    reported: bool = False
    # The case's own directory, and where the harness runs (the same, unless a stage moves
    # it: a worktree of the member's repo); read through `directory` and `workdir`.
    _directory: Path | None = field(default=None, repr=False)
    _workdir: Path | None = field(default=None, repr=False)

    @property
    def directory(self) -> Path:
        """The case's own directory: given by the stage that makes it (`Given.DIRECTORY`)."""
        if self._directory is None:
            raise MissingGiven(Given.DIRECTORY)
        return self._directory

    @directory.setter
    def directory(self, path: Path) -> None:
        self._directory = path

    @property
    def workdir(self) -> Path:
        """Where the harness runs: the case's directory, unless a stage moved it."""
        return self._workdir or self.directory

    @workdir.setter
    def workdir(self, path: Path) -> None:
        self._workdir = path

    @property
    def job(self) -> CaseJob:
        return self.job_run.job

    @property
    def lease(self) -> Lease:
        return self.job_run.lease

    @property
    def kill(self) -> asyncio.Event:
        return self.job_run.kill

    def note(self, line: str) -> None:
        """Say something about the case (its log)."""
        for sink in self.notes:
            sink(line)

    def end(self, ending: Ending) -> None:
        """End the case now (the harness, if it runs, is killed); the first ending stands."""
        if self.ending is None:
            self.ending = ending
        self.kill.set()


class Stage:
    """One step of a case. Every hook is optional; see the module's docstring for when each
    runs. A `cleanup` may find its `start` half done, or not done at all."""

    name = "stage"
    # What it reads that an earlier stage gives, and what it gives those after it.
    needs: ClassVar[frozenset[Given]] = frozenset()
    gives: ClassVar[frozenset[Given]] = frozenset()

    async def start(self, case: CaseContext) -> None:
        """Set the case up (in pipeline order)."""

    async def finish(self, case: CaseContext) -> None:
        """Take what the case left, once every stage has started (in pipeline order)."""

    async def cleanup(self, case: CaseContext) -> None:
        """Undo what `start` did, whatever happened since (in reverse order)."""


class Pipeline:
    """Run a case through its stages."""

    def __init__(self, stages: Sequence[Stage]) -> None:
        self.stages = list(stages)
        given: set[Given] = set()
        for stage in self.stages:
            if missing := stage.needs - given:
                what = ", ".join(sorted(need.value for need in missing))
                raise PipelineError(
                    f"the {stage.name} stage needs {what}: no stage before it gives it"
                )
            given |= stage.gives

    async def run(self, case: CaseContext) -> None:
        """Start, finish and clean up every stage; how the case ended is on `case`. A
        cancel is re-raised once every cleanup has run; so is a stage's unexpected error."""
        entered: list[Stage] = []
        clock = stage_clock if stage_clock.on else None
        try:
            for stage in self.stages:
                entered.append(stage)
                began = time.perf_counter() if clock else 0.0
                await stage.start(case)
                if clock:
                    clock.add(stage.name, time.perf_counter() - began)
                if case.ending is not None:
                    return
            for stage in self.stages:
                began = time.perf_counter() if clock else 0.0
                await stage.finish(case)
                if clock:
                    clock.add(stage.name, time.perf_counter() - began)
                if case.ending is not None:
                    return
        except CaseEnded as exc:
            case.ending = case.ending or exc.ending
        except StartError as exc:
            case.ending = case.ending or Failed(str(exc))
        except asyncio.CancelledError:
            case.cancelled = True
            raise
        finally:
            await _clean_up(reversed(entered), case, clock)
            if clock:
                clock.cases += 1


async def _clean_up(
    stages: Iterable[Stage], case: CaseContext, clock: StageClock | None = None
) -> None:
    """Every stage's cleanup, even when one fails or the task is cancelled meanwhile."""
    cancelled = False
    for stage in stages:
        began = time.perf_counter() if clock else 0.0
        try:
            await stage.cleanup(case)
        except asyncio.CancelledError:
            # The other stages still clean up; the cancel goes on after them.
            case.cancelled = cancelled = True
        except Exception as exc:
            case.note(f"⚠ {stage.name}: cleanup failed: {type(exc).__name__}: {exc}")
        if clock:
            clock.add(stage.name, time.perf_counter() - began)
    if cancelled:
        raise asyncio.CancelledError
