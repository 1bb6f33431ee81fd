"""The part of a result's `repo.diff` that touches given paths: the agent's diff of the
protected paths it changed, shown apart from the rest on the case page."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from scorecards.blobs.models import Artifact
from scorecards.blobs.store import blob_open

REPO_DIFF = "repo.diff"
# How much of the diff is read to find the sections, and how much of them is shown.
MAX_READ_BYTES = 4 * 1024 * 1024
MAX_SHOWN_CHARS = 64 * 1024
CUT = "\n… (cut: the whole diff is repo.diff)\n"
_HEADER = re.compile(r"^diff --git ", re.MULTILINE)


def _sections(diff: str) -> Iterator[str]:
    starts = [match.start() for match in _HEADER.finditer(diff)]
    for start, end in zip(starts, [*starts[1:], len(diff)], strict=True):
        yield diff[start:end]


def _names(section: str) -> set[str]:
    """The paths a file's section names: `diff --git a/P b/Q`, then before its first hunk
    `--- a/P`, `+++ b/Q` and any `rename from` / `rename to`."""
    header, *lines = section.split("\n")
    before, sep, after = header.removeprefix("diff --git a/").partition(" b/")
    names = {before, after} if sep else set()
    for line in lines:
        if line.startswith("@@"):
            break
        for prefix in ("--- a/", "+++ b/", "rename from ", "rename to "):
            if line.startswith(prefix):
                names.add(line.removeprefix(prefix))
    return names


def diff_of_paths(diff: str, paths: Iterable[str]) -> str:
    """The sections of a git diff whose file is one of `paths` (before or after a rename)."""
    wanted = frozenset(paths)
    shown = "".join(section for section in _sections(diff) if _names(section) & wanted)
    return shown if len(shown) <= MAX_SHOWN_CHARS else shown[:MAX_SHOWN_CHARS] + CUT


def protected_diff(artifacts: Iterable[Artifact], tampered: list[dict[str, str]] | None) -> str:
    """The agent's diff of the protected paths it changed ('' when it changed none, or its
    result kept no `repo.diff`)."""
    paths = [str(change.get("path", "")) for change in tampered or []]
    diff = next((a for a in artifacts if a.path == REPO_DIFF), None)
    if not paths or diff is None:
        return ""
    with blob_open(diff.blob) as handle:
        text = bytes(handle.read(MAX_READ_BYTES)).decode("utf-8", errors="replace")
    return diff_of_paths(text, paths)
