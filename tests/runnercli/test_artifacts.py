"""What a case leaves behind: files its `artifacts` globs match, confined, hashed, bounded."""

from __future__ import annotations

import hashlib
import os
import tracemalloc
from pathlib import Path

import pytest

from runnercli.case.artifacts.globs import collect
from runnercli.protocol.names import GlobError, check_globs

MiB = 1 << 20


def write(root: Path, files: dict[str, bytes]) -> None:
    for name, content in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(content)


@pytest.fixture
def case(tmp_path: Path) -> Path:
    root = tmp_path / "everdict-case-1"
    write(
        root,
        {
            "report.html": b"<h1>ok</h1>",
            "out/a.json": b'{"a": 1}',
            "out/deep/er/b.json": b'{"b": 2}',
            "out/c.txt": b"not json",
            "other/d.json": b"{}",
            "out/.hidden.json": b"{}",
            ".git/config": b"[core]",
        },
    )
    outside = tmp_path / "outside"
    write(outside, {"secret.json": b'{"secret": true}'})
    (root / "out" / "leak.json").symlink_to(outside / "secret.json")
    (root / "out" / "linked").symlink_to(outside, target_is_directory=True)
    return root


def test_the_globs_match_files_confined_to_the_case_with_their_digest_and_type(
    case: Path,
) -> None:
    found = collect(case, ["out/**/*.json", "report.html", "missing/*.png"], MiB, 10 * MiB)
    assert [artifact.path for artifact in found.artifacts] == [
        "out/.hidden.json",
        "out/a.json",
        "out/deep/er/b.json",
        "report.html",
    ]
    first = found.artifacts[1].to_wire()
    assert first == {
        "path": "out/a.json",
        "sha256": hashlib.sha256(b'{"a": 1}').hexdigest(),
        "size": 8,
        "media_type": "application/json",
    }
    assert found.artifacts[3].media_type == "text/html"
    assert found.artifacts[3].source == case.resolve() / "report.html"
    # The symlink to a file outside is named and left out; the linked directory is not walked.
    assert [(s.path, s.reason) for s in found.skipped] == [
        ("out/leak.json", "a symlink: not followed")
    ]
    assert found.unmatched == ["missing/*.png"]
    assert found.total_bytes == sum(a.size for a in found.artifacts)


def test_git_metadata_and_unknown_types(case: Path) -> None:
    write(case, {"blob.xyz123": b"\x00\x01"})
    found = collect(case, ["**"], MiB, 10 * MiB)
    paths = {artifact.path for artifact in found.artifacts}
    assert ".git/config" not in paths
    assert not any(path.startswith("out/linked/") for path in paths)
    assert {a.path: a.media_type for a in found.artifacts}["blob.xyz123"] == (
        "application/octet-stream"
    )


def test_files_over_the_per_file_limit_or_past_the_total_are_left_out_with_the_reason(
    tmp_path: Path,
) -> None:
    write(tmp_path, {"a.bin": b"a" * 600, "b.bin": b"b" * 500, "c.bin": b"c" * 2000, "d.bin": b"d"})
    found = collect(tmp_path, ["*.bin"], 1000, 1000)
    assert [a.path for a in found.artifacts] == ["a.bin", "d.bin"]
    assert [(s.path, s.reason) for s in found.skipped] == [
        ("b.bin", "500 bytes, past the case's limit of 1000 bytes in all"),
        ("c.bin", "2000 bytes, over the limit of 1000 bytes per file"),
    ]


def test_a_large_artifact_is_hashed_in_chunks_not_read_whole(tmp_path: Path) -> None:
    content = os.urandom(MiB) * 24
    write(tmp_path, {"big.bin": content})
    tracemalloc.start()
    try:
        found = collect(tmp_path, ["big.bin"], 64 * MiB, 64 * MiB)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert found.artifacts[0].sha256 == hashlib.sha256(content).hexdigest()
    assert found.artifacts[0].size == 24 * MiB
    assert peak < 4 * MiB


@pytest.mark.parametrize(
    ("glob", "why"),
    [
        ("../x", "goes up with '..'"),
        ("out/../../x", "goes up with '..'"),
        ("/etc/passwd", "is absolute"),
        ("C:/x", "is absolute"),
        ("out\\x", "contains '\\'"),
        ("out//x", "has an empty component"),
        ("out/", "has an empty component"),
        ("", "is not a non-empty string"),
        ("a\x00b", "contains NUL"),
        ("x[ab", "has a '[' without its ']'"),
        ("x" * 201, "is longer than 200 characters"),
    ],
)
def test_a_glob_that_could_escape_or_is_malformed_is_refused(glob: str, why: str) -> None:
    with pytest.raises(GlobError) as refused:
        check_globs([glob])
    assert str(refused.value).startswith(f"artifacts glob {glob!r} ")
    assert why in str(refused.value)
    with pytest.raises(GlobError):
        collect("/", ["ok.txt", glob], MiB, MiB)


def test_the_glob_list_itself_is_checked() -> None:
    assert check_globs(["out/**/*.json", "report.html", "f[!0-9].txt"]) == [
        "out/**/*.json",
        "report.html",
        "f[!0-9].txt",
    ]
    with pytest.raises(GlobError, match="must be a list"):
        check_globs("out/*.json")
    with pytest.raises(GlobError, match="at most 32 globs"):
        check_globs([f"f{n}" for n in range(33)])


def test_a_file_whose_name_is_not_utf8_is_left_out_saying_so(tmp_path: Path) -> None:
    with open(os.path.join(os.fsencode(tmp_path), b"bad-\xff.txt"), "wb") as handle:
        handle.write(b"x")
    write(tmp_path, {"good.txt": b"y"})
    found = collect(tmp_path, ["*.txt"], MiB, MiB)
    assert [a.path for a in found.artifacts] == ["good.txt"]
    assert [(s.path, s.reason) for s in found.skipped] == [
        ("bad-\ufffd.txt", "its name is not UTF-8")
    ]
