"""Artifacts' bytes kept until the result naming them is delivered.

A result names its artifacts by digest; until the server has taken the result, the bytes it
names must stay at hand — the upload may have failed while the server was away, or the
server may refuse the result because it lacks a blob, and then the blob is sent again. With
a spool, they are files beside the spooled results (`runner.spool/blobs/<sha256>`, 0600), so
a result resent after a restart can still upload them; without one, they are kept in memory.

Each case holds the blobs it kept until its report is over; a blob is removed once no case
holds it and no result waiting in the spool names it.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path

from runnercli.atomic import replace_file

# Where a blob's bytes are: a file, or the bytes themselves.
Source = Path | bytes


class Shelf:
    """Blobs by digest, on disk under `directory` or in memory when it is None."""

    def __init__(self, directory: Path | None = None, named: Callable[[], set[str]] = set) -> None:
        self.directory = directory
        # The digests the results waiting in the spool name.
        self.named = named
        self._memory: dict[str, bytes] = {}
        self._holds: Counter[str] = Counter()
        self._by_job: dict[int, list[str]] = {}

    def keep(self, job_id: int, sha256: str, data: bytes) -> Source:
        """Keep `data` (whose digest is `sha256`) for the job's result; where it is now."""
        self._holds[sha256] += 1
        self._by_job.setdefault(job_id, []).append(sha256)
        if self.directory is None:
            self._memory[sha256] = data
            return data
        path = self.directory / sha256
        if not path.exists():
            replace_file(path, data)
        return path

    def source(self, sha256: str) -> Source | None:
        """Where the blob's bytes are, or None when they are not kept here."""
        if self.directory is None:
            return self._memory.get(sha256)
        path = self.directory / sha256
        return path if path.is_file() else None

    def release(self, job_id: int) -> None:
        """The job's report is over: what it kept goes, unless still needed."""
        shas = self._by_job.pop(job_id, [])
        self._holds.subtract(shas)
        self.collect(shas)

    def collect(self, shas: Iterable[str]) -> None:
        """Remove these blobs where no case holds them and no spooled result names them."""
        unheld = {sha for sha in shas if self._holds[sha] <= 0}
        if not unheld:
            return
        named = self.named() if self.directory is not None else set()
        for sha in unheld - named:
            self._holds.pop(sha, None)
            self._memory.pop(sha, None)
            if self.directory is not None:
                with contextlib.suppress(FileNotFoundError):
                    (self.directory / sha).unlink()

    def sweep(self) -> None:
        """Remove every kept blob no spooled result names (a runner's start: none is held)."""
        if self.directory is None or not self.directory.is_dir():
            return
        self.collect(path.name for path in self.directory.iterdir() if len(path.name) == 64)
