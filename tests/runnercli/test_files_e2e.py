"""Files while it runs, end to end: daphne and `python -m runnercli` as real processes.

A case writes a text file, an image and a binary, a symlink to `/etc/passwd` and one to a
sibling directory whose name starts like its own, then waits. Meanwhile the case's files are
listed and read through `GET /api/runs/<id>/files` and the MCP tools, served by the runner's
parked poll: text redacted with the member's patterns, what escapes the case directory
refused, anyone outside the workspace told it does not exist. A lease the runner no longer
holds is refused, a runner that does not answer gives the page a 504, and (on PostgreSQL) a
request to one replica wakes the poll parked on another.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import textwrap
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection

from accounts.services import api_key_create
from scorecards.files.models import CaseFsRequest
from scorecards.models import CaseResult, Membership, Role
from scorecards.services import dataset_create, harness_create
from tests.live import daphne, metric, rest, runner_cli, wait_metric
from tests.mcpgateway.mcp_client import call, error_text, structured

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

# A one-pixel PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
BINARY = bytes(range(256)) * 4
CASE = """
    import os, pathlib, shutil, sys, time
    root = pathlib.Path.cwd()
    (root / "out").mkdir()
    (root / "out" / "pic.png").write_bytes(bytes.fromhex(sys.argv[2]))
    (root / "data.bin").write_bytes(bytes(range(256)) * 4)
    os.symlink("/etc/passwd", root / "passwd")
    sibling = pathlib.Path(str(root) + "-sibling")
    sibling.mkdir()
    (sibling / "secret.txt").write_text("the sibling's secret")
    os.symlink(sibling, root / "sib")
    (root / "notes.txt").write_text("hello from the case\\ntoken=hunter2\\n")
    flag = pathlib.Path(sys.argv[1])
    deadline = time.monotonic() + 90
    while not flag.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    shutil.rmtree(sibling)
    print("done")
"""


def fetch(
    base_url: str, endpoint: str, token: str, /, **query: str
) -> tuple[int, dict[str, str], bytes]:
    url = f"{base_url}{endpoint}?{urllib.parse.urlencode(query)}"
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=60) as reply:
            return reply.status, dict(reply.headers), reply.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def wait_for(what: str, check: Any, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := check()):
        assert time.monotonic() < deadline, f"{what}: not after {timeout}s"
        time.sleep(0.1)
    return value


def _setup(alice: Any, tmp_path: Path, command: list[str], name: str = "waits") -> str:
    harness_create(
        user=alice,
        workspace_slug="acme",
        name=name,
        spec={"command": command, "timeout_s": 120, "capabilities": ["python"]},
    )
    cases = [{"key": "dir/c0", "input": {}, "expected": "done"}]
    dataset_create(user=alice, workspace_slug="acme", name="one", cases=cases)
    return api_key_create(user=alice).key


def _pair_and_start(server: Any, tmp_path: Path, key: str, harness: str) -> tuple[dict, dict]:
    body = {"label": "laptop", "capabilities": ["python"]}
    status, paired = rest(server.url, "POST", "/api/runners", key, body)
    assert status == 201, paired
    status, run = rest(
        server.url,
        "POST",
        "/api/workspaces/acme/runs",
        key,
        {"harness": harness, "dataset": "one", "runtime": f"self:{paired['id']}"},
    )
    assert status == 201, run
    return paired, run


def test_a_running_cases_files_are_listed_and_read_through_rest_and_mcp(
    alice: Any, bob: Any, charlie: Any, workspace: Any, tmp_path: Path, blob_dir: Path
) -> None:
    script, flag = tmp_path / "case.py", tmp_path / "release"
    script.write_text(textwrap.dedent(CASE))
    key = _setup(alice, tmp_path, [sys.executable, str(script), str(flag), PNG.hex()])
    viewer = get_user_model().objects.create_user("vera", password="vera-pw")
    Membership.objects.create(workspace=workspace, user=viewer, role=Role.VIEWER)
    vera, outsider = api_key_create(user=viewer).key, api_key_create(user=charlie).key
    options = {"location": str(blob_dir), "allow_overwrite": True}
    env: dict[str, Any] = {"EVERDICT_BLOB_STORAGE_OPTIONS": json.dumps(options)}

    with daphne(tmp_path, **env) as server:
        paired, run = _pair_and_start(server, tmp_path, key, "waits")
        files = f"/api/runs/{run['id']}/files"
        pairing = runner_cli(tmp_path, ["pair", "--server", server.url, "--token", paired["token"]])
        assert pairing.popen.wait(30) == 0, pairing.output()
        config = tmp_path / "runner.json"
        config.write_text(json.dumps({**json.loads(config.read_text()), "redact": ["hunter2"]}))
        runner = runner_cli(tmp_path, ["run", "--wait-ms", "2000"])
        try:

            def listed() -> Any:
                status, _, body = fetch(server.url, files, vera, key="dir/c0")
                if status != 200:
                    return None
                paths = {e["path"]: e for e in json.loads(body)["entries"]}
                return paths if "notes.txt" in paths else None

            top = wait_for("the case's files listed", listed)
            assert {p: e["kind"] for p, e in top.items()} == {
                "data.bin": "file",
                "notes.txt": "file",
                "out": "dir",
                "passwd": "symlink",
                "sib": "symlink",
            }
            assert top["data.bin"]["size"] == len(BINARY)

            status, headers, body = fetch(server.url, files, key, key="dir/c0", path="notes.txt")
            assert (status, body) == (200, b"hello from the case\ntoken=[redacted]\n")
            assert headers["Content-Type"].startswith("text/plain")
            assert headers["Content-Disposition"].startswith("inline")
            assert headers["X-Content-Type-Options"] == "nosniff"
            assert headers["Content-Security-Policy"] == "sandbox"

            status, _, body = fetch(server.url, files, key, key="dir/c0", path="out")
            assert status == 200
            assert [e["path"] for e in json.loads(body)["entries"]] == ["out/pic.png"]
            status, headers, body = fetch(server.url, files, key, key="dir/c0", path="out/pic.png")
            assert (status, headers["Content-Type"], body) == (200, "image/png", PNG)
            assert headers["Content-Disposition"].startswith("inline")
            status, headers, body = fetch(server.url, files, key, key="dir/c0", path="data.bin")
            assert (status, body) == (200, BINARY)
            assert headers["Content-Disposition"] == 'attachment; filename="data.bin"'

            # Escapes: refused on the server (`..`, NUL, a drive) or on the runner (symlinks).
            for path in ("../etc/passwd", "out/../../x", "a\x00b", "C:/Windows", "/etc/passwd"):
                status, _, body = fetch(server.url, files, key, key="dir/c0", path=path)
                assert status == 400, (path, body)
            for path in ("passwd", "sib", "sib/secret.txt"):
                status, _, body = fetch(server.url, files, key, key="dir/c0", path=path)
                assert status == 403, (path, body)
                assert b"leads out of the case directory" in body
            status, _, body = fetch(server.url, files, key, key="dir/c0", path="missing.txt")
            assert status == 404, body

            # Anyone outside the workspace is told the run does not exist.
            status, _, _ = fetch(server.url, files, outsider, key="dir/c0")
            assert status == 404
            reply = call(
                server.url, outsider, "list_case_files", {"run_id": run["id"], "key": "dir/c0"}
            )
            assert reply.is_error and "not found" in error_text(reply).lower()

            # The same through MCP.
            args = {"run_id": run["id"], "key": "dir/c0"}
            listing = structured(call(server.url, vera, "list_case_files", {**args, "path": "out"}))
            assert [e["path"] for e in listing["entries"]] == ["out/pic.png"]
            text = structured(
                call(server.url, vera, "read_case_file", {**args, "path": "notes.txt"})
            )
            assert (text["encoding"], text["content"]) == (
                "text",
                "hello from the case\ntoken=[redacted]\n",
            )
            image = structured(
                call(server.url, vera, "read_case_file", {**args, "path": "out/pic.png"})
            )
            assert (image["encoding"], base64.b64decode(image["content"])) == ("base64", PNG)
            refused = call(server.url, vera, "read_case_file", {**args, "path": "sib/secret.txt"})
            assert refused.is_error and "leads out" in error_text(refused)
        finally:
            flag.write_text("go")
        try:
            finished = wait_for(
                "the run finished",
                lambda: (
                    (r := rest(server.url, "GET", f"/api/runs/{run['id']}", key)[1])["status"]
                    in ("succeeded", "failed")
                    and r
                ),
            )
            assert finished["status"] == "succeeded", runner.output()
            # Over: its files are not read any more (its artifacts are).
            status, _, body = fetch(server.url, files, key, key="dir/c0")
            assert status == 409 and b"not running" in body
        finally:
            runner.stop()


def test_a_stale_lease_is_refused_and_no_answer_is_a_504(
    alice: Any, workspace: Any, tmp_path: Path, blob_dir: Path
) -> None:
    key = _setup(alice, tmp_path, [sys.executable, "-c", "print('done')"], name="quick")
    # Long enough for the request below to be polled and answered on a loaded machine.
    with daphne(tmp_path, EVERDICT_FS_ANSWER_TIMEOUT_S="4") as server:
        paired, run = _pair_and_start(server, tmp_path, key, "quick")
        token, files = paired["token"], f"/api/runs/{run['id']}/files"
        status, _, body = fetch(server.url, files, key, key="dir/c0")
        assert status == 409, body  # not leased yet: not running
        job = structured(call(server.url, token, "lease_job", {"protocol": 3}))["job"]
        fence = {"job_id": job["job_id"], "lease_epoch": job["lease_epoch"]}

        # Nobody polls: the page hears the runner did not answer.
        started = time.monotonic()
        status, _, body = fetch(server.url, files, key, key="dir/c0", path="notes.txt")
        assert status == 504 and b"did not answer within 4 s" in body
        assert 3.9 < time.monotonic() - started < 15
        assert not CaseFsRequest.objects.exists()

        # A request waits for the poll of the lease it was asked under, and no other.
        asked = {"job_ids": [fence], "wait_ms": 0}
        stale = {**fence, "lease_epoch": fence["lease_epoch"] + 1}
        ask = call_in_background(server.url, key, files)
        polled = wait_for(
            "the request queued",
            lambda: (
                CaseFsRequest.objects.exists()
                and structured(
                    call(server.url, token, "poll_case_fs_requests", {"job_ids": [stale]})
                )
            ),
        )
        assert polled == {"requests": []}
        [request] = structured(call(server.url, token, "poll_case_fs_requests", asked))["requests"]
        assert (request["job_id"], request["op"], request["path"]) == (job["job_id"], "read", "")
        answer = {"request_id": request["request_id"], "entries": []}
        refused = structured(call(server.url, token, "answer_case_fs_request", {**stale, **answer}))
        assert refused["accepted"] is False
        entries = [{"path": "a.txt", "size": 1, "kind": "file", "mtime": 0.0}]
        ok = {**fence, **answer, "entries": entries}
        assert structured(call(server.url, token, "answer_case_fs_request", ok))["accepted"]
        status, body = ask.result()
        assert status == 200 and json.loads(body)["entries"] == entries
        again = structured(call(server.url, token, "answer_case_fs_request", ok))
        assert again["accepted"] is False  # answered already


def test_a_poll_carries_the_answers_to_what_the_last_one_took(
    alice: Any, workspace: Any, tmp_path: Path, blob_dir: Path
) -> None:
    """Server feature `fs_answers`: answers carried by a poll are written before it looks,
    fenced as `answer_case_fs_request` is (a stale lease's, a second one, refused); a poll
    carrying none, or a malformed one, is what it was."""
    key = _setup(alice, tmp_path, [sys.executable, "-c", "print('done')"], name="quick")
    with daphne(tmp_path, EVERDICT_FS_ANSWER_TIMEOUT_S="20") as server:
        paired, run = _pair_and_start(server, tmp_path, key, "quick")
        token, files = paired["token"], f"/api/runs/{run['id']}/files"
        hello = structured(call(server.url, token, "hello", {"protocol": 4}))
        assert "fs_answers" in hello["features"]
        job = structured(call(server.url, token, "lease_job", {"protocol": 3}))["job"]
        fence = {"job_id": job["job_id"], "lease_epoch": job["lease_epoch"]}
        poll = {"job_ids": [fence], "wait_ms": 0}

        ask = call_in_background(server.url, key, files)
        [request] = wait_for(
            "the request taken",
            lambda: structured(call(server.url, token, "poll_case_fs_requests", poll))["requests"],
        )
        entries = [{"path": "a.txt", "size": 1, "kind": "file", "mtime": 0.0}]
        answer = {**fence, "request_id": request["request_id"], "entries": entries}
        stale = {**answer, "lease_epoch": fence["lease_epoch"] + 1}
        both = {**answer, "error": "not_found: no"}
        for wrong in (stale, both):
            reply = call(server.url, token, "poll_case_fs_requests", {**poll, "answers": [wrong]})
            assert structured(reply) == {"requests": []}
        assert CaseFsRequest.objects.get().answered_at is None
        unknown = {**answer, "blob": {"sha256": "a" * 64, "size": 1}}
        reply = call(server.url, token, "poll_case_fs_requests", {**poll, "answers": [unknown]})
        assert reply.is_error
        assert CaseFsRequest.objects.get().answered_at is None

        reply = call(server.url, token, "poll_case_fs_requests", {**poll, "answers": [answer]})
        assert structured(reply) == {"requests": []}
        status, body = ask.result(timeout=30)
        assert status == 200 and json.loads(body)["entries"] == entries
        assert not CaseFsRequest.objects.exists()
        again = structured(call(server.url, token, "answer_case_fs_request", answer))
        assert again["accepted"] is False  # answered already


def call_in_background(base_url: str, key: str, path: str) -> Any:
    def ask() -> tuple[int, bytes]:
        status, _, body = fetch(base_url, path, key, key="dir/c0")
        return status, body

    return ThreadPoolExecutor(max_workers=1).submit(ask)


def test_a_request_to_one_replica_wakes_the_poll_parked_on_another(
    alice: Any, workspace: Any, tmp_path: Path, blob_dir: Path
) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("replicas wake each other through PostgreSQL's notifications")
    key = _setup(alice, tmp_path, [sys.executable, "-c", "print('done')"], name="quick")
    with daphne(tmp_path) as first, daphne(tmp_path) as second:
        paired, run = _pair_and_start(first, tmp_path, key, "quick")
        token, files = paired["token"], f"/api/runs/{run['id']}/files"
        job = structured(call(first.url, token, "lease_job", {"protocol": 3}))["job"]
        fence = {"job_id": job["job_id"], "lease_epoch": job["lease_epoch"]}

        with ThreadPoolExecutor(max_workers=2) as pool:
            # Parked on the first replica for 20 s unless woken.
            asked = {"job_ids": [fence], "wait_ms": 20_000}
            polling = pool.submit(call, first.url, token, "poll_case_fs_requests", asked)
            # Its look found no request: from now on only a wake-up brings it one.
            wait_metric(first.url, "everdict_polls_waiting", 1)
            started = time.monotonic()
            page = pool.submit(fetch, second.url, files, key, key="dir/c0", path="out")
            [request] = structured(polling.result(timeout=30))["requests"]
            woken_after = time.monotonic() - started
            entries = [{"path": "out/a.txt", "size": 1, "kind": "file", "mtime": 0.0}]
            answer = {**fence, "request_id": request["request_id"], "entries": entries}
            assert structured(call(first.url, token, "answer_case_fs_request", answer))["accepted"]
            status, _, body = page.result(timeout=30)
    assert woken_after < 5, woken_after
    assert status == 200 and json.loads(body)["entries"] == entries


CHURN = """
    import json, os, pathlib, sys, time
    case = json.loads(os.environ["EVERDICT_CASE"])
    flag = pathlib.Path(sys.argv[1])
    deadline = time.monotonic() + 60
    while case["key"] == "long" and not flag.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    print("done")
"""


@pytest.mark.once
def test_a_runner_keeps_one_file_poll_parked_while_its_cases_come_and_go(
    alice: Any, workspace: Any, tmp_path: Path, blob_dir: Path
) -> None:
    """Cases that start send a fresh poll with the new set of jobs (at most every
    `REPOLL_S`), cases that end none; the one it supersedes ends at once (it used to stay
    parked for its whole wait, each woken by every dispatch to the owner and each reading the
    requests on the server's small thread pool)."""
    script, flag = tmp_path / "churn.py", tmp_path / "release"
    script.write_text(textwrap.dedent(CHURN))
    harness_create(
        user=alice,
        workspace_slug="acme",
        name="churn",
        spec={"command": [sys.executable, str(script), str(flag)], "timeout_s": 90},
    )
    quick = [{"key": f"q{i:02}", "input": {}, "expected": "done"} for i in range(16)]
    cases = [{"key": "long", "input": {}, "expected": "done"}, *quick]
    dataset_create(user=alice, workspace_slug="acme", name="churn", cases=cases)
    key = api_key_create(user=alice).key
    with daphne(tmp_path) as server:
        status, paired = rest(server.url, "POST", "/api/runners", key, {"label": "laptop"})
        assert status == 201, paired
        status, run = rest(
            server.url,
            "POST",
            "/api/workspaces/acme/runs",
            key,
            {
                "harness": "churn",
                "dataset": "churn",
                "runtime": f"self:{paired['id']}",
                "concurrency": 4,
            },
        )
        assert status == 201, run
        pairing = runner_cli(tmp_path, ["pair", "--server", server.url, "--token", paired["token"]])
        assert pairing.popen.wait(30) == 0, pairing.output()
        runner = runner_cli(tmp_path, ["run", "--wait-ms", "2000", "--max-concurrent", "4"])
        try:

            def settled() -> int:
                return CaseResult.objects.filter(run_id=run["id"]).count()

            wait_for("the quick cases scored", lambda: settled() >= len(quick), timeout=30)
            # Not a poll for each case that started and one for each that ended (33 or so).
            assert metric(server.url, "everdict_fs_polls_total") < len(quick)
            # The long case runs alone now: one poll parked for it, however many came before.
            wait_for(
                "one file poll parked",
                lambda: metric(server.url, "everdict_parked_fs_polls") == 1,
                timeout=3,
            )
            time.sleep(0.3)
            assert metric(server.url, "everdict_parked_fs_polls") == 1
            # And that poll serves the page.
            status, _, body = fetch(server.url, f"/api/runs/{run['id']}/files", key, key="long")
            assert status == 200, body
            flag.touch()
            wait_for("the run over", lambda: settled() == len(cases), timeout=30)
        finally:
            runner.stop()


def test_tools_waiting_for_a_runner_leave_the_pool_to_runners_calls(
    alice: Any, workspace: Any, tmp_path: Path, blob_dir: Path
) -> None:
    """More `list_case_files` calls wait than the server's pool has threads (its default:
    cores + 4, at most 32): the runner's poll, which needs one, is served meanwhile."""
    key = _setup(alice, tmp_path, [sys.executable, "-c", "print('done')"], name="quick")
    waiting = min(32, (os.cpu_count() or 1) + 4) + 2
    with daphne(tmp_path, EVERDICT_FS_ANSWER_TIMEOUT_S="60") as server:
        paired, run = _pair_and_start(server, tmp_path, key, "quick")
        token = paired["token"]
        job = structured(call(server.url, token, "lease_job", {"protocol": 3}))["job"]
        fence = {"job_id": job["job_id"], "lease_epoch": job["lease_epoch"]}
        args = {"run_id": run["id"], "key": "dir/c0"}
        with ThreadPoolExecutor(max_workers=waiting) as pool:
            tools = [
                pool.submit(call, server.url, key, "list_case_files", args) for _ in range(waiting)
            ]
            wait_for("the tools' requests queued", lambda: CaseFsRequest.objects.count() == waiting)
            started = time.monotonic()
            polled = call(server.url, token, "poll_case_fs_requests", {"job_ids": [fence]})
            assert time.monotonic() - started < 20  # not after the tools' 60 s
            requests = structured(polled)["requests"]
            assert len(requests) == waiting
            entries = [{"path": "a.txt", "size": 1, "kind": "file", "mtime": 0.0}]
            for request in requests:
                answer = {**fence, "request_id": request["request_id"], "entries": entries}
                assert structured(call(server.url, token, "answer_case_fs_request", answer))[
                    "accepted"
                ]
            for tool in tools:
                assert structured(tool.result(timeout=60))["entries"] == entries
