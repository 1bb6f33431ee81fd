"""A case through its pipeline of stages: in what order they start, finish and clean up, how
a stage ends the case, and what a stage can give the harness and take from it.

The stages around the real `Prepare`, `Execute` and `Collect` are the tests' own: each one
is the shape of a stage still to come (a worktree of the member's repo, a service that
dies, a parser of the harness's stream) added without touching the others.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from runnercli.case.argv import StartError
from runnercli.case.collect import Collect
from runnercli.case.execute import Execute
from runnercli.case.pipeline import (
    Artifact,
    CaseContext,
    CaseEnded,
    Failed,
    HandedBack,
    MissingGiven,
    Pipeline,
    PipelineError,
    Stage,
)
from runnercli.case.prepare import Prepare
from runnercli.case.redact import Redact
from runnercli.case.streams import Lines
from runnercli.case.trace.stage import Trace
from runnercli.protocol import CaseJob
from runnercli.text.redact import Redactor
from tests.runnercli.conftest import make_job
from tests.runnercli.fakes import FakeClient, held

Script = Callable[[str], list[str]]


class Recorder(Stage):
    """Writes down each of its hooks as it runs; may fail its start or its cleanup."""

    def __init__(
        self,
        name: str,
        events: list[str],
        *,
        start_fails: Exception | None = None,
        cleanup_fails: bool = False,
    ) -> None:
        self.name = name
        self.events = events
        self.start_fails = start_fails
        self.cleanup_fails = cleanup_fails

    async def start(self, case: CaseContext) -> None:
        self.events.append(f"start {self.name}")
        if self.start_fails is not None:
            raise self.start_fails

    async def finish(self, case: CaseContext) -> None:
        self.events.append(f"finish {self.name}")

    async def cleanup(self, case: CaseContext) -> None:
        self.events.append(f"cleanup {self.name}")
        if self.cleanup_fails:
            raise OSError("the disk is gone")


def context(job: CaseJob, notes: list[str] | None = None) -> CaseContext:
    return CaseContext(held(job), notes=[notes.append] if notes is not None else [])


def run(stages: list[Stage], case: CaseContext) -> CaseContext:
    asyncio.run(Pipeline(stages).run(case))
    return case


def gone(pid: int, timeout: float = 5) -> bool:
    """Whether the process is gone (a zombie awaiting its reaper counts) within `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


async def written(path: Path, timeout: float = 10) -> str:
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.read_text()):
        assert time.monotonic() < deadline, f"{path} was never written"
        await asyncio.sleep(0.02)
    return path.read_text()


SLEEPER = """
    import os, sys, time
    open(sys.argv[1], "w").write(f"{os.getpid()} {os.getcwd()}")
    time.sleep(60)
"""


# ---- order


def test_stages_start_then_finish_in_order_and_clean_up_in_reverse() -> None:
    events: list[str] = []
    stages: list[Stage] = [Recorder(name, events) for name in ("a", "b", "c")]
    case = run(stages, context(make_job(["true"])))
    assert events == [
        "start a",
        "start b",
        "start c",
        "finish a",
        "finish b",
        "finish c",
        "cleanup c",
        "cleanup b",
        "cleanup a",
    ]
    assert case.ending is None


def test_a_failing_start_ends_the_case_and_the_stages_started_clean_up_in_reverse() -> None:
    events: list[str] = []
    stages: list[Stage] = [
        Recorder("a", events),
        Recorder("b", events),
        Recorder("c", events, start_fails=StartError("the repo acme/app is not mapped here")),
        Recorder("d", events),
    ]
    case = run(stages, context(make_job(["true"])))
    assert case.ending == Failed("the repo acme/app is not mapped here")
    # `d` never started, nothing finished; `c` cleans up what it may have half done.
    assert events == ["start a", "start b", "start c", "cleanup c", "cleanup b", "cleanup a"]


def test_a_stage_may_end_the_case_another_way_than_a_failure() -> None:
    events: list[str] = []
    stages: list[Stage] = [
        Recorder("a", events, start_fails=CaseEnded(HandedBack())),
        Recorder("b", events),
    ]
    case = run(stages, context(make_job(["true"])))
    assert case.ending == HandedBack("the runner was stopped by its owner")
    assert events == ["start a", "cleanup a"]


def test_a_cleanup_that_fails_is_noted_and_the_others_still_run() -> None:
    events: list[str] = []
    notes: list[str] = []
    stages: list[Stage] = [Recorder("a", events), Recorder("b", events, cleanup_fails=True)]
    run(stages, context(make_job(["true"]), notes))
    assert events[-2:] == ["cleanup b", "cleanup a"]
    assert notes == ["⚠ b: cleanup failed: OSError: the disk is gone"]


# ---- the harness ended early: every started stage still cleans up


def test_a_killed_harness_still_has_every_stage_cleaned_up(script: Script, tmp_path: Path) -> None:
    events: list[str] = []
    seen = tmp_path / "seen"
    case = context(make_job([*script(SLEEPER), str(seen)], timeout_s=60))

    async def kill_when_started() -> None:
        running = asyncio.create_task(
            Pipeline([Recorder("a", events), Prepare(), Execute(), Collect()]).run(case)
        )
        await written(seen)
        case.kill.set()
        await running

    asyncio.run(kill_when_started())
    pid, cwd = seen.read_text().split()
    assert case.result is not None and case.result.status == "canceled"
    assert events == ["start a", "finish a", "cleanup a"]
    assert gone(int(pid))
    assert not os.path.exists(cwd)  # Prepare's cleanup removed the case's directory


def test_a_harness_past_its_timeout_still_has_every_stage_cleaned_up(
    script: Script, tmp_path: Path
) -> None:
    events: list[str] = []
    seen = tmp_path / "seen"
    case = context(make_job([*script(SLEEPER), str(seen)], timeout_s=1))
    stages: list[Stage] = [Recorder("a", events), Prepare(), Execute(term_grace_s=0.2), Collect()]
    run(stages, case)
    pid, cwd = seen.read_text().split()
    assert case.result is not None and case.result.status == "timeout"
    assert events == ["start a", "finish a", "cleanup a"]
    assert gone(int(pid))
    assert not os.path.exists(cwd)


def test_a_cancel_cleans_up_every_started_stage_and_ends_the_harness_then_goes_on(
    script: Script, tmp_path: Path
) -> None:
    events: list[str] = []
    seen = tmp_path / "seen"
    case = context(make_job([*script(SLEEPER), str(seen)], timeout_s=60))

    async def cancel_when_started() -> None:
        running = asyncio.create_task(
            Pipeline([Recorder("a", events), Prepare(), Execute(), Recorder("b", events)]).run(case)
        )
        await written(seen)
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running

    asyncio.run(cancel_when_started())
    pid, cwd = seen.read_text().split()
    assert case.cancelled
    assert events == ["start a", "cleanup a"]  # `b` never started
    assert gone(int(pid))
    assert not os.path.exists(cwd)


# ---- what stages give the harness and take from it


class Worktree(Stage):
    """The shape of a repo stage: the harness runs in a directory of this stage, which adds
    a variable and a placeholder, and leaves a diff among the artifacts."""

    name = "worktree"

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    async def start(self, case: CaseContext) -> None:
        self.directory.mkdir()
        case.workdir = self.directory
        case.env["EVERDICT_REPO_DIR"] = str(self.directory)
        case.placeholders["repo.path"] = str(self.directory)

    async def finish(self, case: CaseContext) -> None:
        diff = self.directory / "repo.diff"
        diff.write_text("+hello\n")
        case.artifacts.append(Artifact("repo.diff", diff, "text/x-diff"))

    async def cleanup(self, case: CaseContext) -> None:
        for path in self.directory.iterdir():
            path.unlink()
        self.directory.rmdir()


class Stream(Stage):
    """The shape of a trace stage: follows stdout line by line and stderr as it runs; the
    case's output becomes the stream's final result."""

    name = "stream"

    def __init__(self) -> None:
        self.events: list[dict[str, str]] = []
        self.errors: list[str] = []

    async def start(self, case: CaseContext) -> None:
        case.stdout_chunks.append(Lines([self._event]).feed)
        case.stderr_lines.append(self.errors.append)

    def _event(self, line: str) -> None:
        self.events.append(json.loads(line))

    async def finish(self, case: CaseContext) -> None:
        case.output = next(e["text"] for e in reversed(self.events) if e["type"] == "result")


def test_stages_set_the_working_directory_environment_and_placeholders_and_follow_the_streams(
    script: Script, tmp_path: Path
) -> None:
    argv = script(
        """
        import json, os, sys
        print(json.dumps({"type": "step", "text": os.getcwd()}), flush=True)
        print("a warning", file=sys.stderr, flush=True)
        print(json.dumps({"type": "step", "text": os.environ["EVERDICT_REPO_DIR"]}))
        print(json.dumps({"type": "result", "text": "the answer is " + sys.argv[1]}))
        """
    )
    worktree, stream = Worktree(tmp_path / "worktree"), Stream()
    case = context(make_job([*argv, "{repo.path}"]))
    run([Prepare(), worktree, stream, Execute(), Collect()], case)
    where = str(tmp_path / "worktree")
    assert [e["text"] for e in stream.events] == [where, where, f"the answer is {where}"]
    assert stream.errors == ["a warning"]
    assert case.result is not None
    assert case.result.output == f"the answer is {where}"
    assert [a.path for a in case.artifacts] == ["repo.diff"]
    assert not (tmp_path / "worktree").exists()


class Service(Stage):
    """The shape of a services stage: while the harness runs, its service dies."""

    name = "services"

    def __init__(self, ready: Path) -> None:
        self.ready = ready
        self.watch: asyncio.Task[None] | None = None

    async def start(self, case: CaseContext) -> None:
        self.watch = asyncio.create_task(self._dies(case))

    async def _dies(self, case: CaseContext) -> None:
        await written(self.ready)
        case.end(Failed("service web exited with status 1: port 8080 already in use"))

    async def cleanup(self, case: CaseContext) -> None:
        if self.watch is not None:
            self.watch.cancel()


def test_a_stage_ends_the_running_case_with_its_reason_and_the_harness_goes(
    script: Script, tmp_path: Path
) -> None:
    events: list[str] = []
    seen = tmp_path / "seen"
    case = context(make_job([*script(SLEEPER), str(seen)], timeout_s=60))
    started = time.monotonic()
    run([Recorder("a", events), Prepare(), Service(seen), Execute(), Collect()], case)
    assert time.monotonic() - started < 20
    assert case.ending == Failed("service web exited with status 1: port 8080 already in use")
    assert case.result is None  # not a result: the case ends with the service's reason
    assert events == ["start a", "cleanup a"]
    assert gone(int(seen.read_text().split()[0]))


def test_a_pipeline_with_a_stage_before_what_it_needs_is_refused_when_built() -> None:

    with pytest.raises(PipelineError, match="the trace stage needs the case's directory"):
        Pipeline([Trace(FakeClient()), Prepare(), Execute(), Collect()])
    with pytest.raises(PipelineError, match="the execute stage needs the case's directory"):
        Pipeline([Execute(), Prepare(), Collect()])
    with pytest.raises(PipelineError, match="the collect stage needs how the harness's run ended"):
        Pipeline([Prepare(), Collect(), Execute()])
    with pytest.raises(PipelineError, match="the redact stage needs the case's result"):
        Pipeline([Prepare(), Execute(), Redact(Redactor(["s"])), Collect()])
    Pipeline([Prepare(), Trace(FakeClient()), Execute(), Collect(), Redact(Redactor(["s"]))])


def test_the_case_directory_read_before_a_stage_gave_it_says_so(script: Script) -> None:

    case = context(make_job(script("print('hi')")))
    with pytest.raises(MissingGiven, match="gives the case's directory"):
        _ = case.directory
    case.directory = Path("/tmp")
    assert case.workdir == Path("/tmp")
