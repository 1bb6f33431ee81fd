"""The runner's one way of writing a file: whole or not at all, with its mode from the start."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from runnercli.atomic import replace_file


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_file_is_private_in_a_private_directory_whatever_the_umask(tmp_path: Path) -> None:
    target = tmp_path / "made" / "here" / "token.json"
    old = os.umask(0)
    try:
        replace_file(target, b'{"token": "rnr_x"}')
    finally:
        os.umask(old)
    assert target.read_bytes() == b'{"token": "rnr_x"}'
    assert mode(target) == 0o600
    assert mode(target.parent) == 0o700
    assert os.listdir(target.parent) == ["token.json"]


def test_a_wider_mode_is_kept_under_a_narrow_umask(tmp_path: Path) -> None:
    target = tmp_path / "units" / "everdict-runner.service"
    old = os.umask(0o077)
    try:
        replace_file(target, b"[Unit]\n", mode=0o644, directory_mode=0o755)
    finally:
        os.umask(old)
    assert mode(target) == 0o644
    assert mode(target.parent) == 0o755


def test_replacing_keeps_the_mode_and_syncs_when_durable(tmp_path: Path) -> None:
    target = tmp_path / "result.json"
    replace_file(target, b"first")
    replace_file(target, b"second", durable=True)
    assert target.read_bytes() == b"second"
    assert mode(target) == 0o600
    assert os.listdir(tmp_path) == ["result.json"]


def test_a_failed_replace_leaves_the_target_and_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "taken"
    target.mkdir()
    (target / "inside").write_text("kept")
    with pytest.raises(OSError):
        replace_file(target, b"over a directory")
    assert (target / "inside").read_text() == "kept"
    assert sorted(os.listdir(tmp_path)) == ["taken"]


def test_writers_racing_on_one_target_leave_one_whole_file(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    payloads = [bytes([65 + n]) * 200_000 for n in range(4)]
    errors: list[BaseException] = []

    def write(payload: bytes) -> None:
        try:
            for _ in range(20):
                replace_file(target, payload)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(p,)) for p in payloads]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert target.read_bytes() in payloads
    assert os.listdir(tmp_path) == ["state.json"]
