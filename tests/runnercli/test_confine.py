"""A path the server asks for stays inside the case directory, whatever it says."""

from __future__ import annotations

import os
import tracemalloc
from pathlib import Path

import pytest

from runnercli.case.confine import (
    ConfineError,
    describe,
    inside,
    list_dir,
    read_file,
    resolve_inside,
)

LIMIT = 1 << 20


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """`case-1` with a file, a subdirectory, a symlink inside it and symlinks out of it,
    beside a sibling `case-10` whose name starts the same."""
    case, sibling = tmp_path / "case-1", tmp_path / "case-10"
    (case / "sub").mkdir(parents=True)
    sibling.mkdir()
    (sibling / "secret.txt").write_text("the sibling's secret\n")
    (case / "a.txt").write_text("hello\n")
    (case / "sub" / "b.txt").write_text("bee\n")
    (case / "link-in").symlink_to("sub")
    (case / "passwd").symlink_to("/etc/passwd")
    (case / "sibling").symlink_to(sibling)
    (case / "sub" / "up").symlink_to("../../case-10/secret.txt")
    return case


ESCAPES = [
    "..",
    "../case-10/secret.txt",
    "sub/../../case-10/secret.txt",
    "/etc/passwd",
    "passwd",
    "sibling",
    "sibling/secret.txt",
    "sub/up",
    "a.txt\x00.png",
    "C:\\x",
    "c:x",
    "..\\case-10\\secret.txt",
    "\\etc\\passwd",
]


@pytest.mark.parametrize("path", ESCAPES)
def test_each_escape_is_refused_for_reading_and_listing(root: Path, path: str) -> None:
    for attempt in (
        lambda: resolve_inside(root, path),
        lambda: read_file(root, path, LIMIT),
        lambda: list_dir(root, path),
        lambda: describe(root, path),
    ):
        with pytest.raises(ConfineError) as refused:
            attempt()
        assert refused.value.reason == "refused"


def test_a_sibling_whose_name_starts_the_same_is_not_inside() -> None:
    assert not inside("/tmp/case-10", "/tmp/case-1")
    assert not inside("/tmp/case-10/x", "/tmp/case-1")
    assert inside("/tmp/case-1/x", "/tmp/case-1")
    assert inside("/tmp/case-1", "/tmp/case-1")


def test_paths_inside_are_read_even_through_a_symlink_that_stays_inside(root: Path) -> None:
    assert read_file(root, "a.txt", LIMIT) == b"hello\n"
    assert read_file(root, "./sub//b.txt", LIMIT) == b"bee\n"
    assert read_file(root, "link-in/b.txt", LIMIT) == b"bee\n"
    assert describe(root, "link-in").kind == "dir"
    assert describe(root, "sub/b.txt").size == 4


def test_a_listing_says_what_each_entry_is_without_following_symlinks(root: Path) -> None:
    listing = list_dir(root, "")
    kinds = {entry.path: entry.kind for entry in listing.entries}
    assert kinds == {
        "a.txt": "file",
        "link-in": "symlink",
        "passwd": "symlink",
        "sibling": "symlink",
        "sub": "dir",
    }
    assert not listing.truncated
    sub = list_dir(root, "sub")
    assert [entry.to_dict()["path"] for entry in sub.entries] == ["sub/b.txt", "sub/up"]
    assert sub.entries[0].size == 4 and sub.entries[0].mtime > 0


def test_a_listing_is_bounded(root: Path) -> None:
    for n in range(20):
        (root / "sub" / f"n{n:02}").write_text("")
    listing = list_dir(root, "sub", max_entries=5)
    assert len(listing.entries) == 5
    assert listing.truncated


def test_missing_wrong_kind_and_special_files_are_refused_with_their_reason(
    root: Path,
) -> None:
    os.mkfifo(root / "pipe")
    for attempt, reason in (
        (lambda: read_file(root, "nope.txt", LIMIT), "not_found"),
        (lambda: list_dir(root, "nope"), "not_found"),
        (lambda: read_file(root, "sub", LIMIT), "not_a_file"),
        (lambda: read_file(root, "pipe", LIMIT), "not_a_file"),  # never blocks on a FIFO
        (lambda: list_dir(root, "a.txt"), "not_a_directory"),
    ):
        with pytest.raises(ConfineError) as refused:
            attempt()
        assert refused.value.reason == reason


def test_a_file_over_the_limit_is_refused_before_any_byte_is_read(root: Path) -> None:
    big = root / "big.bin"
    with big.open("wb") as handle:
        handle.truncate(256 << 20)  # sparse: no disk used
    tracemalloc.start()
    try:
        with pytest.raises(ConfineError) as refused:
            read_file(root, "big.bin", 128 << 20)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert refused.value.reason == "too_large"
    assert (
        str(refused.value) == f"'big.bin' is {256 << 20} bytes, over the limit of {128 << 20} bytes"
    )
    assert peak < 1 << 20
    assert read_file(root, "a.txt", 6) == b"hello\n"
    with pytest.raises(ConfineError, match="over the limit of 5 bytes"):
        read_file(root, "a.txt", 5)


def test_a_name_that_is_not_utf8_is_left_out_of_a_listing(root: Path) -> None:
    with open(os.path.join(os.fsencode(root / "sub"), b"bad-\xff"), "wb"):
        pass
    assert [entry.path for entry in list_dir(root, "sub").entries] == ["sub/b.txt", "sub/up"]
