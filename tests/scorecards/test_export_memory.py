"""The exports stream: 10,000 results of 5 KB (50 MB a format) leave a real daphne flat.

Measured from outside (the server process's resident set, sampled while the client reads),
as an operator would see it. Streamed, the server grows ~12 MB; the same rows held in memory
at once — the ORM rows and the text they become (one chunk of every row) — grew it by 212 MB
when tried; the bound sits between.
"""

from __future__ import annotations

import threading
import urllib.request
from pathlib import Path
from typing import Any

import psutil
import pytest
from bulk import seeded_run

from accounts.services import api_key_create
from tests.live import daphne

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

ROWS = 10_000
OUTPUT_BYTES = 5_000
BOUND_MB = 80


class PeakRss:
    """The highest resident set of a process and its children while watched."""

    def __init__(self, pid: int) -> None:
        self.process = psutil.Process(pid)
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def rss(self) -> int:
        family = [self.process, *self.process.children(recursive=True)]
        return sum(p.memory_info().rss for p in family)

    def _watch(self) -> None:
        while not self._stop.wait(0.05):
            self.peak = max(self.peak, self.rss())

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def download(url: str, key: str) -> tuple[int, int]:
    """Read the export in 64 KiB pieces, keeping nothing: (lines, bytes)."""
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"})
    lines = size = 0
    with urllib.request.urlopen(request, timeout=300) as reply:
        while piece := reply.read(65536):
            lines += piece.count(b"\n")
            size += len(piece)
    return lines, size


def test_csv_and_jsonl_stream_10000_results_in_bounded_memory(
    alice: Any, workspace: Any, tmp_path: Path
) -> None:
    run = seeded_run(alice, cases=ROWS, output=lambda c, r: f"{c:08d}" + "x" * OUTPUT_BYTES)
    key = api_key_create(user=alice).key
    with daphne(tmp_path) as server:
        # A first small request warms the server up (imports, connection) before measuring.
        download(f"{server.url}/api/runs/{run.pk}/results?limit=1", key)
        base = PeakRss(server.proc.popen.pid).rss()
        with PeakRss(server.proc.popen.pid) as watch:
            csv_lines, csv_bytes = download(f"{server.url}/api/runs/{run.pk}/results.csv", key)
            jsonl_lines, jsonl_bytes = download(
                f"{server.url}/api/runs/{run.pk}/results.jsonl", key
            )
    grew_mb = (watch.peak - base) / 2**20
    assert csv_lines == ROWS + 1  # the header
    assert jsonl_lines == ROWS
    assert csv_bytes > ROWS * OUTPUT_BYTES and jsonl_bytes > ROWS * OUTPUT_BYTES
    assert grew_mb < BOUND_MB, f"the server grew {grew_mb:.0f} MB streaming {ROWS} rows"
