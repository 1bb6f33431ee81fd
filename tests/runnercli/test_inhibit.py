"""The sleep inhibitor: held from the first running case to the end of the last, gone with
the runner however it dies, and said once to be unavailable where it cannot be had.

`systemd-inhibit` is the OS boundary: these tests put a small script of that name first on
the PATH they give the inhibitor. Like the real one, it runs the command it is given (the
runner's `cat` on a pipe) after recording its arguments. The real one is tried too.
"""

from __future__ import annotations

import asyncio
import gc
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from runnercli.laptop.inhibit import Held, Inhibitor, InhibitorStatus, inhibitor_command
from runnercli.laptop.pidfile import process_start

# Each run's argv is written aside and renamed into place: a test that sees the file sees all
# of it, even when it stops the run right after.
RECORD = (
    """printf '%s\\n' "$@" > "{record}/.argv.$$" && mv "{record}/.argv.$$" "{record}/argv.$$"\n"""
)
FAKE_INHIBIT = (
    "#!/bin/sh\n"
    + RECORD
    + """while [ $# -gt 0 ]; do case "$1" in --*) shift ;; *) break ;; esac; done
exec "$@"
"""
)


def fake_inhibit(tmp_path: Path, body: str = FAKE_INHIBIT, name: str = "systemd-inhibit") -> str:
    """A PATH with a fake inhibitor first; it records each run's argv in argv.<pid>."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / name
    script.write_text(body.format(record=bin_dir))
    script.chmod(0o755)
    return f"{bin_dir}{os.pathsep}{os.environ['PATH']}"


def runs(tmp_path: Path) -> dict[int, list[str]]:
    return {
        int(path.suffix[1:]): path.read_text().splitlines()
        for path in (tmp_path / "bin").glob("argv.*")
    }


def gone(pid: int, timeout: float = 5) -> bool:
    deadline = time.monotonic() + timeout
    while process_start(pid) is not None:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


async def until(check: Callable[[], bool], timeout: float = 5) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


def test_it_is_held_from_the_first_case_to_the_end_of_the_last(tmp_path: Path) -> None:
    path = fake_inhibit(tmp_path)
    changes: list[InhibitorStatus] = []

    async def scenario() -> None:
        inhibitor = Inhibitor(platform="linux", path=path, on_change=changes.append)
        assert str(inhibitor.status) == "released"
        await inhibitor.hold()
        await until(lambda: len(runs(tmp_path)) == 1)
        await inhibitor.hold()
        await inhibitor.release()
        await asyncio.sleep(0.2)
        assert str(inhibitor.status) == "held"
        ((pid, argv),) = runs(tmp_path).items()
        assert argv == [
            "--what=sleep:idle",
            "--who=everdict-runner",
            "--why=running evaluation cases",
            "--mode=block",
            shutil.which("cat"),
        ]
        assert process_start(pid) is not None
        await inhibitor.release()
        assert str(inhibitor.status) == "released"
        assert gone(pid)
        async with inhibitor.held():
            assert str(inhibitor.status) == "held"
            # The second inhibitor writes its argv once it runs.
            await until(lambda: len(runs(tmp_path)) == 2)

    asyncio.run(scenario())
    held, released = InhibitorStatus(Held.HELD), InhibitorStatus(Held.RELEASED)
    assert changes == [held, released, held, released]


# A runner in miniature: holds the inhibitor for a case, says so, waits to be killed.
PARENT = textwrap.dedent(
    """
    import asyncio, sys
    from runnercli.laptop.inhibit import Inhibitor

    async def main():
        inhibitor = Inhibitor(platform="linux", path=sys.argv[1])
        await inhibitor.hold()
        print(inhibitor.status, flush=True)
        await asyncio.sleep(60)

    asyncio.run(main())
    """
)


def test_a_runner_killed_with_sigkill_leaves_no_inhibitor_behind(tmp_path: Path) -> None:
    path = fake_inhibit(tmp_path)
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, path], stdout=subprocess.PIPE, text=True
    )
    try:
        assert parent.stdout is not None and parent.stdout.readline() == "held\n"
        deadline = time.monotonic() + 5
        while not runs(tmp_path) and time.monotonic() < deadline:
            time.sleep(0.02)
        (child,) = runs(tmp_path)
        assert process_start(child) is not None, "the inhibitor runs while the case does"
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    assert gone(child), "the inhibitor outlived the runner"


def test_allow_sleep_turns_it_off(tmp_path: Path) -> None:
    path = fake_inhibit(tmp_path)

    async def scenario() -> str:
        inhibitor = Inhibitor(allow_sleep=True, platform="linux", path=path)
        await inhibitor.hold()
        await asyncio.sleep(0.1)
        return str(inhibitor.status)

    assert asyncio.run(scenario()) == "off"
    assert runs(tmp_path) == {}


def unavailable_after_two_cases(inhibitor: Inhibitor) -> None:
    async def scenario() -> None:
        for _ in range(2):
            await inhibitor.hold()
            await until(lambda: inhibitor.status.state != Held.HELD)
            await inhibitor.release()

    asyncio.run(scenario())


def test_without_an_inhibitor_it_says_so_once(tmp_path: Path) -> None:
    said: list[str] = []
    empty = tmp_path / "empty"
    empty.mkdir()
    inhibitor = Inhibitor(platform="linux", path=str(empty), say=said.append)
    unavailable_after_two_cases(inhibitor)
    assert str(inhibitor.status) == "unavailable (no systemd-inhibit on PATH)"
    assert said == ["cannot keep this machine awake while cases run: no systemd-inhibit on PATH"]


def test_an_inhibitor_that_exits_at_once_is_unavailable_with_its_reason(tmp_path: Path) -> None:
    path = fake_inhibit(
        tmp_path,
        '#!/bin/sh\necho "Failed to connect to bus: No such file or directory" >&2\nexit 1',
    )
    said: list[str] = []
    inhibitor = Inhibitor(platform="linux", path=path, say=said.append)
    unavailable_after_two_cases(inhibitor)
    assert str(inhibitor.status) == (
        "unavailable (Failed to connect to bus: No such file or directory)"
    )
    assert len(said) == 1


@pytest.mark.systemd
def test_the_real_systemd_inhibit_holds_or_says_why_not(tmp_path: Path) -> None:
    real = shutil.which("systemd-inhibit")
    assert real is not None, "a test marked `systemd` runs where systemd-inhibit is"
    bus = subprocess.run([real, "--list"], capture_output=True, timeout=10, check=False)
    said: list[str] = []

    async def scenario() -> InhibitorStatus:
        inhibitor = Inhibitor(platform="linux", say=said.append)
        await inhibitor.hold()
        await asyncio.sleep(1)
        status = inhibitor.status
        await inhibitor.release()
        return status

    status = asyncio.run(scenario())
    if bus.returncode == 0:
        assert status == InhibitorStatus(Held.HELD) and said == []
    else:
        # As on these machines: no system bus. The lock is refused, and the runner says so.
        assert status.state == Held.UNAVAILABLE and "bus" in status.why
        assert said == [f"cannot keep this machine awake while cases run: {status.why}"]


def test_on_macos_caffeinate_waits_on_the_runner_and_is_stopped_on_release(
    tmp_path: Path,
) -> None:
    body = "#!/bin/sh\n" + RECORD + "exec sleep 60\n"
    path = fake_inhibit(tmp_path, body, name="caffeinate")
    assert inhibitor_command("darwin", 4242, path) == [
        str(tmp_path / "bin" / "caffeinate"), "-i", "-w", "4242",
    ]  # fmt: skip

    async def scenario() -> None:
        inhibitor = Inhibitor(platform="darwin", path=path, pid=4242)
        await inhibitor.hold()
        await until(lambda: len(runs(tmp_path)) == 1)
        await inhibitor.release()
        assert str(inhibitor.status) == "released"

    asyncio.run(scenario())
    ((pid, argv),) = runs(tmp_path).items()
    assert argv == ["-i", "-w", "4242"]
    assert gone(pid)


def test_a_task_cancelled_while_it_releases_the_inhibitor_ends_cancelled(tmp_path: Path) -> None:
    """The runner's laptop task releases the inhibitor as the last case ends; a stop that
    cancels it then must end it. Swallowing that cancellation (while the inhibitor's watch
    is awaited) left the task ticking, and the runner waiting on it forever."""
    path = fake_inhibit(tmp_path)

    async def released_then_ticked(inhibitor: Inhibitor, ticked: list[bool]) -> None:
        await inhibitor.release()
        ticked.append(True)  # what a swallowed cancellation lets run on

    async def scenario() -> list[int]:
        inhibitor = Inhibitor(platform="linux", path=path)
        swallowed = []
        # The cancellation lands after `turns` turns of the loop: across every await of a
        # release, the inhibitor's end and its watch's included.
        for turns in range(40):
            await inhibitor.hold()
            await until(lambda: inhibitor._proc is not None)
            ticked: list[bool] = []
            task = asyncio.create_task(released_then_ticked(inhibitor, ticked))
            for _ in range(turns):
                await asyncio.sleep(0)
            if task.cancel():  # still releasing: it must end cancelled, nothing after it run
                await asyncio.gather(task, return_exceptions=True)
                if not task.cancelled() or ticked:
                    swallowed.append(turns)
            await inhibitor.close()
        # The inhibitors whose release was cancelled are collected while the loop runs.
        await asyncio.sleep(0.2)
        gc.collect()
        return swallowed

    assert asyncio.run(scenario()) == []
