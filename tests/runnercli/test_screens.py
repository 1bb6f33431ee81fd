"""Frames of `$EVERDICT_SCREEN_DIR`: the newest whole image, at most one per interval."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from runnercli.case.screens.watcher import Frame, ScreenWatcher, Skipped, is_whole, media_type
from tests.runnercli.images import jpeg, noisy_png, png
from tests.runnercli.recorded import T0

SECOND_NS = 1_000_000_000


def write(directory: Path, name: str, data: bytes, at_s: float) -> Path:
    """A file written `at_s` seconds after T0 (its modification time says so)."""
    path = directory / name
    path.write_bytes(data)
    mtime_ns = T0 * 1_000_000 + int(at_s * SECOND_NS)
    os.utime(path, ns=(mtime_ns, mtime_ns))
    return path


def test_the_images_are_recognised_by_their_bytes() -> None:
    assert media_type(png()) == "image/png" and is_whole(png(), "image/png")
    assert media_type(jpeg()) == "image/jpeg" and is_whole(jpeg(), "image/jpeg")
    assert not is_whole(png()[:-1], "image/png")
    assert not is_whole(jpeg()[:-2], "image/jpeg")
    assert is_whole(jpeg() + b"\x00\x00", "image/jpeg")
    assert media_type(b"GIF89a\x01\x00") is None


def test_the_newest_frame_goes_and_older_unsent_ones_never(tmp_path: Path) -> None:
    watcher = ScreenWatcher(tmp_path)
    write(tmp_path, "0001.png", png(rgb=(1, 1, 1)), 1)
    write(tmp_path, "0002.jpg", jpeg("two"), 2)
    write(tmp_path, "0003.png", png(rgb=(3, 3, 3)), 3)
    frame = watcher.poll(T0 + 3500)
    assert isinstance(frame, Frame)
    assert (frame.name, frame.media_type, frame.data) == (
        "0003.png",
        "image/png",
        png(rgb=(3, 3, 3)),
    )
    assert frame.taken_at == T0 + 3000
    write(tmp_path, "0004.jpg", jpeg("four"), 4)
    assert watcher.poll(T0 + 4000) is None  # within the interval
    later = watcher.poll(T0 + 4500)
    assert isinstance(later, Frame) and (later.name, later.media_type) == ("0004.jpg", "image/jpeg")
    assert watcher.poll(T0 + 9000) is None  # nothing new
    write(tmp_path, "0002.jpg", jpeg("two again"), 10)  # rewritten in place: new again
    again = watcher.poll(T0 + 10_000)
    assert isinstance(again, Frame) and again.data == jpeg("two again")


def test_at_most_one_frame_per_interval(tmp_path: Path) -> None:
    watcher = ScreenWatcher(tmp_path, interval_ms=1000)
    taken = []
    for tick in range(50):  # a harness writing 10 frames a second, looked at as often
        now = T0 + tick * 100
        write(tmp_path, f"f{tick:03}.png", png(rgb=(tick, 0, 0)), tick / 10)
        frame = watcher.poll(now)
        if isinstance(frame, Frame):
            taken.append((now, frame.name))
    assert taken == [(T0 + t * 100, f"f{t:03}.png") for t in range(0, 50, 10)]


def test_a_half_written_frame_waits_and_an_older_whole_one_goes_meanwhile(tmp_path: Path) -> None:
    watcher = ScreenWatcher(tmp_path)
    image = png(8, 8)
    write(tmp_path, "b.png", image[: len(image) // 2], 2)
    assert watcher.poll(T0 + 2000) is None
    write(tmp_path, "a.png", png(rgb=(9, 9, 9)), 1)
    older = watcher.poll(T0 + 2100)
    assert isinstance(older, Frame) and older.name == "a.png"
    write(tmp_path, "b.png", image, 3)
    newest = watcher.poll(T0 + 3100)
    assert isinstance(newest, Frame) and (newest.name, newest.data) == ("b.png", image)
    write(tmp_path, "c.jpg", jpeg()[:5], 4)  # too short yet to know what it is
    assert watcher.poll(T0 + 5000) is None


def test_a_file_growing_while_it_is_read_is_not_taken(tmp_path: Path) -> None:
    watcher = ScreenWatcher(tmp_path)
    whole = jpeg("first")
    path = write(tmp_path, "grow.jpg", whole, 1)
    (seen,) = watcher._candidates()
    with path.open("ab") as out:  # a writer appending between the listing and the read
        out.write(b"\x00" * 16)
    assert watcher._look(seen) is None
    frame = watcher.poll(T0 + 2000)
    assert isinstance(frame, Frame) and frame.data == whole + b"\x00" * 16


def test_frames_written_by_a_running_process_are_only_ever_taken_whole(tmp_path: Path) -> None:
    writer = textwrap.dedent(
        """
        import pathlib, sys, time
        sources, screens = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
        for source in sorted(sources.iterdir()):
            frame = source.read_bytes()
            with open(screens / source.name, "wb") as out:
                for start in range(0, len(frame), 4096):
                    out.write(frame[start:start + 4096]); out.flush()
                    time.sleep(0.001)
        """
    )
    sources, screens = tmp_path / "sources", tmp_path / "screens"
    sources.mkdir()
    screens.mkdir()
    frames = [noisy_png(60_000) for _ in range(6)]
    for n, image in enumerate(frames):
        (sources / f"{n:03}.bin").write_bytes(image)
    process = subprocess.Popen([sys.executable, "-c", writer, str(sources), str(screens)])
    watcher = ScreenWatcher(screens, interval_ms=0)
    taken: list[Frame] = []
    while process.poll() is None:
        frame = watcher.poll()
        if isinstance(frame, Frame):
            taken.append(frame)
    assert process.wait() == 0
    last = watcher.poll()
    taken += [last] if isinstance(last, Frame) else []
    assert taken, "no frame was taken"
    assert all(frame.data in frames for frame in taken)
    assert taken[-1].data == frames[-1]


def test_a_frame_over_the_limit_is_skipped_once_with_a_reason(tmp_path: Path) -> None:
    watcher = ScreenWatcher(tmp_path)
    write(tmp_path, "small.png", png(), 1)
    big = noisy_png(600 * 1024)
    write(tmp_path, "huge.png", big, 2)
    skipped = watcher.poll(T0 + 2000)
    assert isinstance(skipped, Skipped) and skipped.name == "huge.png"
    assert skipped.reason == f"{len(big)} bytes, over the limit of {512 * 1024}"
    assert watcher.poll(T0 + 2100) is None  # older than the skipped one: dropped
    write(tmp_path, "next.png", png(4, 4), 3)
    frame = watcher.poll(T0 + 2200)  # a skip starts no interval
    assert isinstance(frame, Frame) and frame.name == "next.png"


def test_frames_are_known_by_their_bytes_not_their_names(tmp_path: Path) -> None:
    watcher = ScreenWatcher(tmp_path)
    write(tmp_path, "looks.png", b"<html>not an image</html>", 1)
    skipped = watcher.poll(T0 + 1000)
    assert isinstance(skipped, Skipped) and skipped.reason.startswith("not a PNG or JPEG")
    assert watcher.poll(T0 + 1100) is None  # said once
    write(tmp_path, "screen.dat", jpeg(), 2)
    frame = watcher.poll(T0 + 2000)
    assert isinstance(frame, Frame) and frame.media_type == "image/jpeg"


def test_links_and_directories_are_not_frames(tmp_path: Path) -> None:
    outside = tmp_path / "outside.png"
    outside.write_bytes(png())
    screens = tmp_path / "screens"
    assert ScreenWatcher(screens).poll(T0) is None  # not there yet
    screens.mkdir()
    (screens / "link.png").symlink_to(outside)
    (screens / "sub").mkdir()
    assert ScreenWatcher(screens).poll(T0) is None
