"""The Screens stage in a case's pipeline: a real harness writing frames into
`$EVERDICT_SCREEN_DIR`, and a fake of the server's screen tool.

The newest frame goes at most once per interval (older ones never), the last one when the
case ends; a file that is not an image is skipped with a note; a refused lease stops the
sending; `--no-screens` sends nothing.
"""

from __future__ import annotations

import asyncio
import base64
import textwrap
from pathlib import Path
from typing import Any

from runnercli.case.collect import Collect
from runnercli.case.execute import Execute
from runnercli.case.pipeline import CaseContext, Pipeline
from runnercli.case.prepare import Prepare
from runnercli.case.screens.stage import Screens
from runnercli.protocol import Limits, ScreenAck
from tests.runnercli.fakes import FakeClient, held
from tests.runnercli.images import jpeg, png
from tests.runnercli.test_trace_stage import harness, job

INTERVAL_MS = 300


class ScreenServer(FakeClient):
    def __init__(self, refuse: str | None = None) -> None:
        super().__init__()
        self.limits = Limits(screen_interval_ms=INTERVAL_MS)
        self.refuse = refuse

    async def call(self, tool: str, args: dict[str, Any], model: Any, wait_s: float = 0.0) -> Any:
        self.calls.append((tool, args))
        if self.refuse is not None:
            return ScreenAck(accepted=False, reason=self.refuse)
        return ScreenAck(accepted=True)

    def frames(self) -> list[bytes]:
        return [base64.b64decode(a["data"]) for t, a in self.calls if t == "report_case_screen"]


# Copies each given file into the screen directory (written whole, then renamed), a pause
# between them.
FILMS = """
    import os, shutil, sys, time
    screens = os.environ["EVERDICT_SCREEN_DIR"]
    pause = float(sys.argv[1])
    for n, source in enumerate(sys.argv[2:]):
        name = f"{n:04d}" + os.path.splitext(source)[1]
        shutil.copy(source, os.path.join(screens, "." + name))
        os.replace(os.path.join(screens, "." + name), os.path.join(screens, name))
        time.sleep(pause)
"""


def frames_on_disk(tmp_path: Path, *images: bytes, suffix: str = ".png") -> list[str]:
    paths = []
    for n, data in enumerate(images):
        path = tmp_path / f"source{n}{suffix}"
        path.write_bytes(data)
        paths.append(str(path))
    return paths


def run(client: ScreenServer, argv: list[str], **kwargs: Any) -> tuple[CaseContext, list[str]]:
    notes: list[str] = []
    case = CaseContext(held(job(argv)), notes=[notes.append])
    stages = [Prepare(), Screens(client, tick_s=0.05, **kwargs), Execute(), Collect()]
    asyncio.run(Pipeline(stages).run(case))
    return case, notes


def test_the_newest_frame_goes_at_most_once_per_interval_and_the_last_at_the_end(
    tmp_path: Path,
) -> None:
    images = [png(rgb=(n * 20, 0, 0)) for n in range(8)]
    client = ScreenServer()
    # Eight frames 0.1 s apart: about one in three can go, and the last one always does.
    run(client, [*harness(tmp_path, FILMS), "0.1", *frames_on_disk(tmp_path, *images)])
    sent = client.frames()
    assert 2 <= len(sent) <= 5, len(sent)
    assert sent[-1] == images[-1]
    assert [images.index(frame) for frame in sent] == sorted(images.index(f) for f in sent)
    calls = [a for t, a in client.calls if t == "report_case_screen"]
    assert {a["media_type"] for a in calls} == {"image/png"}
    assert all(a["job_id"] == 7 and a["lease_epoch"] == 1 for a in calls)
    assert [a["taken_at"] for a in calls] == sorted(a["taken_at"] for a in calls)


def test_a_jpeg_is_sent_as_one_and_a_file_that_is_no_image_is_skipped(tmp_path: Path) -> None:
    client = ScreenServer()
    sources = frames_on_disk(tmp_path, jpeg("one"), suffix=".jpg")
    (tmp_path / "gif").mkdir()
    sources += frames_on_disk(tmp_path / "gif", b"GIF89a not what we take", suffix=".gif")
    _, notes = run(client, [*harness(tmp_path, FILMS), "0.5", *sources])
    assert client.frames()[0] == jpeg("one")
    assert [a["media_type"] for t, a in client.calls] == ["image/jpeg"]
    assert any("0001.gif not sent: not a PNG or JPEG" in note for note in notes), notes


def test_a_refused_lease_stops_the_sending(tmp_path: Path) -> None:
    client = ScreenServer(refuse="canceled")
    images = [png(rgb=(0, n * 30, 0)) for n in range(4)]
    run(client, [*harness(tmp_path, FILMS), "0.35", *frames_on_disk(tmp_path, *images)])
    assert len(client.calls) == 1


def test_no_screens_keeps_them_here(tmp_path: Path) -> None:
    client = ScreenServer()
    source = textwrap.dedent(
        """
        import os
        print(os.path.isdir(os.environ["EVERDICT_SCREEN_DIR"]))
        """
    )
    script = tmp_path / "probe.py"
    script.write_text(source)
    images = frames_on_disk(tmp_path, png(), png(rgb=(1, 2, 3)))
    run(client, [*harness(tmp_path, FILMS), "0.35", *images], send=False)
    case, _ = run(client, [*harness(tmp_path, FILMS)[:1], str(script)], send=False)
    assert client.calls == []
    assert case.result is not None and case.result.output == "True\n"


def test_a_screen_directory_is_reused_emptied_and_never_shows_a_frame_of_another_case(
    tmp_path: Path,
) -> None:
    from runnercli.case.screens.stage import ScreenDirs

    dirs = ScreenDirs(tmp_path / "runner")
    (tmp_path / "runner").mkdir()
    client = ScreenServer()
    leaves = textwrap.dedent(
        """
        import os
        screens = os.environ["EVERDICT_SCREEN_DIR"]
        print(screens, sorted(os.listdir(screens)))
        os.mkdir(os.path.join(screens, "junk"))
        """
    )
    script = tmp_path / "leaves.py"
    script.write_text(leaves)
    first, _ = run(
        client, [*harness(tmp_path, FILMS), "0", *frames_on_disk(tmp_path, png())], dirs=dirs
    )
    second, _ = run(client, [*harness(tmp_path, FILMS)[:1], str(script)], dirs=dirs)
    third, _ = run(client, [*harness(tmp_path, FILMS)[:1], str(script)], dirs=dirs)
    assert client.frames() == [png()]  # the first case's frame, sent once
    assert first.env["EVERDICT_SCREEN_DIR"] == second.env["EVERDICT_SCREEN_DIR"]
    assert second.result is not None and second.result.output.endswith(" []\n")
    assert third.result is not None and third.result.output.endswith(" []\n")
    assert [p.name for p in (tmp_path / "runner").iterdir()] == ["screens-0"]


def test_a_frame_being_looked_at_when_the_case_ends_is_sent_all_the_same(tmp_path: Path) -> None:
    """The case ends while the watcher reads a frame: the frame it took still goes (the last
    look finds nothing newer), in each of many cases."""
    from runnercli.case.screens.stage import SCREEN_DIR_ENV, ScreenDirs

    client = ScreenServer()
    dirs = ScreenDirs(tmp_path)
    cases = 100

    async def one_case() -> None:
        case = CaseContext(held(job(["true"])))
        stage = Screens(client, tick_s=0.05, dirs=dirs)
        await stage.start(case)
        (Path(case.env[SCREEN_DIR_ENV]) / "0000.png").write_bytes(png())
        while not stage.looking:
            await asyncio.sleep(0)
        case.exited.set()
        await stage.finish(case)
        await stage.cleanup(case)

    async def all_cases() -> None:
        for _ in range(cases):
            await one_case()

    asyncio.run(all_cases())
    assert client.frames() == [png()] * cases


def test_a_case_that_writes_no_frame_finishes_without_waiting_for_the_watcher(
    tmp_path: Path,
) -> None:
    """Between looks the watcher has taken nothing: `finish` cancels it rather than wait for
    the loop to wake it and see the case has exited (turns of a loop busy with other cases,
    each taken from this case's slot)."""
    from runnercli.case.screens.stage import ScreenDirs

    client = ScreenServer()
    dirs = ScreenDirs(tmp_path)

    async def one_case() -> tuple[int, asyncio.Task[None]]:
        case = CaseContext(held(job(["true"])))
        stage = Screens(client, tick_s=30, dirs=dirs)
        await stage.start(case)
        watcher = stage.task
        assert watcher is not None
        for _ in range(3):  # it looks (nothing there) and waits for its tick
            await asyncio.sleep(0)
        assert not stage.looking and not watcher.done()
        case.exited.set()
        turns = 0

        async def count_turns() -> None:
            nonlocal turns
            while True:
                turns += 1
                await asyncio.sleep(0)

        counter = asyncio.create_task(count_turns())
        await stage.finish(case)
        counter.cancel()
        await stage.cleanup(case)
        return turns, watcher

    turns, watcher = asyncio.run(one_case())
    assert turns == 0
    assert watcher.done()  # cancelled, or ended at its wake-up on the exit: no look since
    assert client.calls == []
