"""A case's large screen frame and a large file a page asks for go by raw `PUT`s, end to end:
daphne and `python -m runnercli` as real processes, both doing `raw_upload`.

A frame of 256 KiB or more that the filmstrip keeps (the reply to the frame before says so)
is uploaded as a blob (an upload URL from `begin_upload`, then `PUT`s) and the call names
it; the strip keeps that blob. The first frame goes inline. A file of
256 KiB or more answering a page's request goes the same way; a small one stays in its call.
"""

from __future__ import annotations

import hashlib
import json
import sys
import textwrap
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from accounts.services import api_key_create
from scorecards.services import dataset_create, harness_create
from scorecards.traces.models import ScreenFrame
from tests.live import daphne, metric, rest, runner_cli
from tests.runnercli.images import noisy_png

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

KIB = 1024
FIRST, FRAME = noisy_png(300 * KIB), noisy_png(300 * KIB)
BIG = bytes(range(256)) * (1200 * KIB // 256)
CASE = """
    import os, pathlib, sys, time
    screens = pathlib.Path(os.environ["EVERDICT_SCREEN_DIR"])
    pathlib.Path("big.bin").write_bytes(bytes(range(256)) * (1200 * 1024 // 256))
    pathlib.Path("small.txt").write_text("small and inline")
    for n, source in enumerate(sys.argv[2:]):
        (screens / f".{n}.png").write_bytes(pathlib.Path(source).read_bytes())
        os.replace(screens / f".{n}.png", screens / f"{n}.png")
        time.sleep(1.2)
    flag = pathlib.Path(sys.argv[1])
    deadline = time.monotonic() + 90
    while not flag.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    print("done")
"""
URLS = "everdict_upload_urls_total"


def wait_for(what: str, check: Any, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := check()):
        assert time.monotonic() < deadline, f"{what}: not after {timeout}s"
        time.sleep(0.1)
    return value


def fetch(base_url: str, run_id: int, token: str, path: str) -> tuple[int, bytes]:
    query = urllib.parse.urlencode({"key": "c0", "path": path})
    request = urllib.request.Request(
        f"{base_url}/api/runs/{run_id}/files?{query}",
        headers={"Authorization": f"Bearer {token}"},
    )
    with urllib.request.urlopen(request, timeout=60) as reply:
        return reply.status, reply.read()


def test_a_large_frame_and_a_large_file_answer_go_by_put_and_a_small_file_inline(
    alice: Any, workspace: Any, tmp_path: Path, blob_dir: Path
) -> None:
    script, flag = tmp_path / "case.py", tmp_path / "release"
    script.write_text(textwrap.dedent(CASE))
    first, second = tmp_path / "first.png", tmp_path / "second.png"
    first.write_bytes(FIRST)
    second.write_bytes(FRAME)
    harness_create(
        user=alice,
        workspace_slug="acme",
        name="shows",
        spec={
            "command": [sys.executable, str(script), str(flag), str(first), str(second)],
            "timeout_s": 120,
            "capabilities": ["python"],
        },
    )
    cases = [{"key": "c0", "input": {}, "expected": "done"}]
    dataset_create(user=alice, workspace_slug="acme", name="one", cases=cases)
    key = api_key_create(user=alice).key
    options = {"location": str(blob_dir), "allow_overwrite": True}

    with daphne(tmp_path, EVERDICT_BLOB_STORAGE_OPTIONS=json.dumps(options)) as server:
        body = {"label": "laptop", "capabilities": ["python"]}
        status, paired = rest(server.url, "POST", "/api/runners", key, body)
        assert status == 201, paired
        run_body = {"harness": "shows", "dataset": "one", "runtime": f"self:{paired['id']}"}
        status, run = rest(server.url, "POST", "/api/workspaces/acme/runs", key, run_body)
        assert status == 201, run
        pairing = runner_cli(tmp_path, ["pair", "--server", server.url, "--token", paired["token"]])
        assert pairing.popen.wait(30) == 0, pairing.output()
        runner = runner_cli(tmp_path, ["run", "--wait-ms", "2000"])
        try:
            frame = wait_for("frames kept", lambda: ScreenFrame.objects.filter(n=1).first())
            after_frame = metric(server.url, URLS)
            status, big = fetch(server.url, run["id"], key, "big.bin")
            after_big = metric(server.url, URLS)
            status_small, small = fetch(server.url, run["id"], key, "small.txt")
            after_small = metric(server.url, URLS)
        finally:
            flag.touch()
        wait_for(
            "the run finished",
            lambda: (
                rest(server.url, "GET", f"/api/runs/{run['id']}", key)[1]["status"]
                in ("succeeded", "failed")
            ),
        )
        runner.stop()

    # The first frame inline (no server had said it keeps it yet); the second, which the
    # reply to the first said the strip keeps, went up as a blob by PUT: the strip keeps it.
    assert after_frame == 1, runner.output()
    assert ScreenFrame.objects.get(n=0).size == len(FIRST)
    assert (frame.blob.sha256, frame.size) == (hashlib.sha256(FRAME).hexdigest(), len(FRAME))
    assert (blob_dir / frame.blob.key).read_bytes() == FRAME
    # The large file by PUT (one more URL), the small one inline in its calls (none).
    assert (status, big) == (200, BIG)
    assert after_big == after_frame + 1
    assert (status_small, small) == (200, b"small and inline")
    assert after_small == after_big
