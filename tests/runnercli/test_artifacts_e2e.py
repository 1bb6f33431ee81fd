"""Artifacts end to end: daphne and `python -m runnercli` as real processes.

An 8 MiB artifact goes up by raw `PUT`s (feature `raw_upload`, the server's chunk set to 4 MiB:
two chunks) while the server is killed in the middle and started again on the same database and
storage: the upload resumes from what the server held (the runner asks its upload URL by `HEAD`,
no new URL), the blob is stored once with the right digest and downloads identical; the same
file from the next case of the workspace is not sent again. The line between them is a proxy
that goes quiet after a known number of bytes, so the restart falls mid-upload every time.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import random
import signal
import sys
import textwrap
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from accounts.services import api_key_create
from runnercli.protocol import MAX_ARTIFACT_BYTES
from scorecards.blobs.models import Blob, BlobUpload
from scorecards.blobs.services import blob_store
from scorecards.services import dataset_create, harness_create, workspace_create
from tests.gate import GatedProxy
from tests.live import daphne, metric, rest, runner_cli
from tests.mcpgateway.mcp_client import call, structured

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

MIB = 1024 * 1024
SIZE = 8 * MIB
WRITES = """
    import os, random
    os.makedirs("out", exist_ok=True)
    with open("out/big.bin", "wb") as f:
        f.write(random.Random(7).randbytes(8 * 1024 * 1024))
    print("wrote")
"""
BIG = random.Random(7).randbytes(SIZE)
DIGEST = hashlib.sha256(BIG).hexdigest()


def server_options(blob_dir: Path) -> dict[str, Any]:
    options = {"location": str(blob_dir), "allow_overwrite": True}
    return {"EVERDICT_LEASE_TTL_S": 60, "EVERDICT_BLOB_STORAGE_OPTIONS": json.dumps(options)}


def wait_for(what: str, check: Any, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := check()):
        assert time.monotonic() < deadline, f"{what}: not after {timeout}s"
        time.sleep(0.05)
    return value


def download(url: str, key: str) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"})
    with urllib.request.urlopen(request, timeout=60) as reply:
        return reply.status, dict(reply.headers), reply.read()


def test_an_8_mib_artifact_survives_a_server_restart_mid_upload_and_is_sent_once(
    alice: Any, workspace: Any, tmp_path: Path, blob_dir: Path
) -> None:
    script = tmp_path / "writes.py"
    script.write_text(textwrap.dedent(WRITES))
    harness_create(
        user=alice,
        workspace_slug="acme",
        name="writer",
        spec={
            "command": [sys.executable, str(script)],
            "timeout_s": 120,
            "capabilities": ["python"],
            "artifacts": ["out/*.bin"],
        },
    )
    two = [{"key": f"c{i}", "input": {}, "expected": "wrote"} for i in range(2)]
    dataset_create(user=alice, workspace_slug="acme", name="two", cases=two)
    key = api_key_create(user=alice).key
    # Chunks of 4 MiB (the server's default takes 8 MiB in one): the restart falls between.
    env = {**server_options(blob_dir), "EVERDICT_UPLOAD_CHUNK_BYTES": str(4 * MIB)}

    with daphne(tmp_path, **env) as first:
        proxy = GatedProxy(first.port)
        status, paired = rest(
            first.url, "POST", "/api/runners", key, {"label": "laptop", "capabilities": ["python"]}
        )
        assert status == 201, paired
        pairing = runner_cli(tmp_path, ["pair", "--server", proxy.url, "--token", paired["token"]])
        assert pairing.popen.wait(30) == 0, pairing.output()
        runner = runner_cli(tmp_path, ["run", "--wait-ms", "2000"])
        try:
            # Past the runner's greeting and polls, the first 4 MiB chunk goes through; then
            # the line goes quiet in the middle of the second.
            proxy.hold_after(4 * MIB + 2_000_000)
            status, run = rest(
                first.url,
                "POST",
                "/api/workspaces/acme/runs",
                key,
                {"harness": "writer", "dataset": "two", "runtime": f"self:{paired['id']}"},
            )
            assert status == 201, run
            wait_for("the line held", lambda: proxy.holding)
            held = wait_for(
                "one chunk stored",
                lambda: (
                    BlobUpload.objects.filter(sha256=DIGEST, received__gte=4 * MIB)
                    .values_list("received", flat=True)
                    .first()
                ),
            )
            first.proc.stop(signal.SIGKILL)  # the server dies with a chunk half sent
        except BaseException:
            runner.stop(signal.SIGKILL)
            proxy.close()
            raise
    assert held == 4 * MIB
    assert not Blob.objects.exists()

    try:
        with daphne(tmp_path, **env) as second:
            proxy.upstream_port = second.port
            proxy.release()
            finished = wait_for(
                "the run finished",
                lambda: (
                    (r := rest(second.url, "GET", f"/api/runs/{run['id']}", key)[1])["status"]
                    in ("succeeded", "failed", "canceled")
                    and r
                ),
                timeout=120,
            )
            received = metric(second.url, "everdict_blob_bytes_received_total")
            chunks = metric(second.url, 'everdict_blob_chunks_total{outcome="accepted"}')
            heads = metric(second.url, "everdict_upload_heads_total")
            urls = metric(second.url, "everdict_upload_urls_total")
            cases = {
                k: rest(second.url, "GET", f"/api/runs/{run['id']}/cases/{k}", key)[1]
                for k in ("c0", "c1")
            }
            listed = cases["c0"]["runs"][0]["result"]["artifacts"]
            status, headers, body = download(second.url + listed[0]["url"], key)
            logs = rest(second.url, "GET", f"/api/runs/{run['id']}/logs", key)[1]
    finally:
        runner.stop(signal.SIGTERM)
        proxy.close()

    assert finished["status"] == "succeeded", (finished, runner.output())
    assert [r["verdict"] for r in finished["results"]] == ["pass", "pass"]
    # Resumed from what the first server held: the restarted one received only the rest,
    # in the one chunk after it — and nothing for the second case, which found it held.
    assert received == SIZE - held
    assert chunks == 1
    # It asked the URL it had where the upload stood (HEAD), not begin_upload for another;
    # the second case asked begin_upload (not have_blobs first), whose grant said it was held.
    assert heads >= 1
    assert urls == 1
    lines = [line["line"] for line in logs]
    assert "artifact out/big.bin: 8388608 bytes, held by the server already" in lines
    # Stored once, with its digest; downloaded identical.
    [blob] = Blob.objects.all()
    assert (blob.sha256, blob.size) == (DIGEST, SIZE)
    assert hashlib.sha256((blob_dir / blob.key).read_bytes()).hexdigest() == DIGEST
    assert not BlobUpload.objects.exists()
    assert not [p for p in (blob_dir / "uploads").rglob("*") if p.is_file()]
    for k in ("c0", "c1"):
        [artifact] = cases[k]["runs"][0]["result"]["artifacts"]
        assert (artifact["path"], artifact["sha256"], artifact["size"]) == (
            "out/big.bin",
            DIGEST,
            SIZE,
        )
    assert status == 200 and body == BIG
    assert headers["Content-Disposition"] == 'attachment; filename="big.bin"'
    assert headers["X-Content-Type-Options"] == "nosniff"


FORMULA = '=HYPERLINK("http://evil.example","open me")'


def test_bad_input_is_refused_over_the_wire_and_nothing_is_stored(
    alice: Any, workspace: Any, tmp_path: Path, blob_dir: Path
) -> None:

    acmes = blob_store(workspace=workspace, data=b"acme's report")
    workspace_create(user=alice, slug="other", name="Other")
    spec = {"command": ["python", "-c", "print(1)"], "timeout_s": 30, "grader": {"type": "exact"}}
    harness_create(user=alice, workspace_slug="other", name="h", spec=spec)
    cases = [{"key": "+cmd|' /C calc'!A0", "input": {}, "expected": "1"}]
    dataset_create(user=alice, workspace_slug="other", name="d", cases=cases)
    key = api_key_create(user=alice).key

    with daphne(tmp_path, **server_options(blob_dir)) as server:
        status, paired = rest(
            server.url, "POST", "/api/runners", key, {"label": "laptop", "capabilities": ["python"]}
        )
        token = paired["token"]
        status, run = rest(
            server.url,
            "POST",
            "/api/workspaces/other/runs",
            key,
            {"harness": "h", "dataset": "d", "runtime": f"self:{paired['id']}"},
        )
        assert status == 201, run
        job = structured(call(server.url, token, "lease_job", {"protocol": 3}))["job"]
        fence = {"job_id": job["job_id"], "lease_epoch": job["lease_epoch"]}

        # Another workspace's blob is not this job's to see or name.
        asked = structured(
            call(server.url, token, "have_blobs", {**fence, "sha256": [acmes.sha256]})
        )
        assert asked["missing"] == [acmes.sha256]
        ref = {"path": "report.txt", "sha256": acmes.sha256, "size": acmes.size}
        naming = {"status": "completed", "exit_code": 0, "output": FORMULA, "artifacts": [ref]}
        refused = structured(
            call(server.url, token, "submit_job_result", {**fence, "result": naming})
        )
        assert refused == {
            "accepted": False,
            "reason": f"artifact report.txt (sha256 {acmes.sha256}) was not uploaded",
        }

        # A forged digest and an oversized blob: refused, nothing kept.
        forged = structured(
            call(
                server.url,
                token,
                "put_blob",
                {**fence, "sha256": acmes.sha256, "offset": 0, "data": "bm90IGl0", "final": True},
            )
        )
        assert forged["accepted"] is False and "hash to" in forged["reason"]
        oversized = structured(
            call(
                server.url,
                token,
                "put_blob",
                {**fence, "sha256": "1" * 64, "offset": MAX_ARTIFACT_BYTES - 3, "data": "AAAAAA=="},
            )
        )
        assert oversized["accepted"] is False and "over the limit" in oversized["reason"]
        assert list(Blob.objects.values_list("pk", flat=True)) == [acmes.pk]
        assert not BlobUpload.objects.exists()
        assert not [p for p in (blob_dir / "uploads").rglob("*") if p.is_file()]

        # The result without the artifact is taken; its export cannot run a formula.
        plain = {"status": "completed", "exit_code": 0, "output": FORMULA}
        ack = structured(call(server.url, token, "submit_job_result", {**fence, "result": plain}))
        assert ack["accepted"] is True
        csv_text = _get(server.url, f"/api/runs/{run['id']}/results.csv", key)
        jsonl_text = _get(server.url, f"/api/runs/{run['id']}/results.jsonl", key)

        # A JSON body over the limit says so and where to send it instead.
        big = [{"key": f"k{i}", "input": {"t": "x" * 300}, "expected": "y"} for i in range(10_000)]
        status, reply = rest(
            server.url, "POST", "/api/workspaces/acme/datasets", key, {"name": "big", "cases": big}
        )
        jsonl = "\n".join(json.dumps(case) for case in big).encode()
        taken = _post_jsonl(server.url, "/api/workspaces/acme/datasets?name=big", key, jsonl)

    [header, row] = list(csv.reader(io.StringIO(csv_text)))
    cells = dict(zip(header, row, strict=True))
    assert cells["case"] == "'+cmd|' /C calc'!A0"
    assert cells["output"] == "'" + FORMULA
    [line] = jsonl_text.splitlines()
    assert json.loads(line)["output"] == FORMULA
    assert json.loads(line)["case"] == "+cmd|' /C calc'!A0"
    assert status == 413, reply
    assert "2621440 bytes" in reply["detail"] and "application/x-ndjson" in reply["detail"]
    assert taken == 201


def _get(base_url: str, path: str, key: str) -> str:
    request = urllib.request.Request(base_url + path, headers={"Authorization": f"Bearer {key}"})
    with urllib.request.urlopen(request, timeout=30) as reply:
        return str(reply.read().decode())


def _post_jsonl(base_url: str, path: str, key: str, body: bytes) -> int:
    request = urllib.request.Request(
        base_url + path,
        data=body,
        method="POST",
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/x-ndjson"},
    )
    with urllib.request.urlopen(request, timeout=60) as reply:
        return int(reply.status)
