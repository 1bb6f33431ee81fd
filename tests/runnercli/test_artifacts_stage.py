"""The `Artifacts` stage and the delivery of a result that names artifacts, against the real
server: the files a case left, redacted when text, uploaded before the result names them; a
result the server refuses for a blob it lacks is sent again after the blob, from the shelf —
in memory, or beside the spooled result across a restart."""

from __future__ import annotations

import asyncio
import hashlib
import sys
import textwrap
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from runnercli.case.artifacts.shelf import Shelf
from runnercli.case.artifacts.stage import Artifacts
from runnercli.case.collect import Collect
from runnercli.case.delivery.reports import Delivery
from runnercli.case.delivery.spool import Spool
from runnercli.case.execute import Execute
from runnercli.case.pipeline import Artifact, CaseContext, Pipeline, Stage
from runnercli.case.prepare import Prepare
from runnercli.protocol import ArtifactRef, CaseResult, Fingerprint, ResultReport
from runnercli.session import JobRun
from runnercli.text.redact import Redactor
from scorecards.blobs.models import Artifact as ArtifactRow
from scorecards.blobs.services import blob_store
from scorecards.models import CaseResult as CaseResultRow
from tests.live import LiveServer
from tests.runnercli.fakes import said
from tests.runnercli.leased import (
    Held,
    ObservedClient,
    blob_server,
    paired_run,
    session_over,
    stored,
)

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("blob_dir"),
]

T = TypeVar("T")

LEAVES_FILES = """
    import os, sys
    os.makedirs("out/deep", exist_ok=True)
    open("out/a.json", "w").write('{"token": "sk-abc123", "ok": true}')
    open("out/deep/b.json", "w").write("{}")
    open("report.html", "w").write("<p>key sk-zzz9 used</p>")
    open("shot.png", "wb").write(b"\\x89PNG\\r\\n\\x1a\\n" + b"sk-abc123" + bytes(200))
    open("big.bin", "wb").write(b"x" * 5000)
    os.symlink("/etc/passwd", "out/passwd.json")
    print("done")
"""


def harness(tmp_path: Path, source: str, artifacts: list[str]) -> dict[str, Any]:
    """A harness that is a small Python script, leaving files named by `artifacts`."""
    script = tmp_path / f"case_{abs(hash(source))}.py"
    script.write_text(textwrap.dedent(source))
    return {"command": [sys.executable, str(script)], "timeout_s": 30, "artifacts": artifacts}


def with_leased(
    server: LiveServer, token: str, go: Callable[[ObservedClient, Held], Awaitable[T]]
) -> tuple[ObservedClient, T]:
    async def scenario() -> tuple[ObservedClient, T]:
        async with ObservedClient(server, token) as client:
            [held] = await client.lease()
            client.calls.clear()
            return client, await go(client, held)

    return asyncio.run(scenario())


async def run_case(stages: list[Stage], held: Held, notes: list[str]) -> CaseContext:
    case = CaseContext(JobRun(held.job, held.lease), notes=[notes.append])
    await Pipeline(stages).run(case)
    return case


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_the_files_a_case_left_are_redacted_uploaded_and_named_in_its_result(
    alice: Any, workspace: Any, tmp_path: Path, blob_dir: Path
) -> None:
    globs = ["out/**/*.json", "*.html", "*.png", "big.bin"]
    run = paired_run(alice, spec=harness(tmp_path, LEAVES_FILES, globs))
    notes: list[str] = []

    async def go(client: ObservedClient, held: Held) -> CaseContext:
        stage = Artifacts(client, Shelf(), redactor=Redactor(["sk-[a-z0-9]+"]))
        return await run_case([Prepare(), Execute(), Collect(), stage], held, notes)

    with blob_server(tmp_path, blob_dir, EVERDICT_MAX_ARTIFACT_BYTES=4096) as server:
        _, case = with_leased(server, run.token, go)

    assert case.result is not None and case.result.status == "completed"
    refs = {ref.path: ref for ref in case.result.artifacts or []}
    assert sorted(refs) == ["out/a.json", "out/deep/b.json", "report.html", "shot.png"]
    # What left the machine is what the result names, the member's secrets redacted in text;
    # the image is binary and goes as it is.
    blobs = stored(blob_dir, run.workspace_id)
    sent = {path: blobs[ref.sha256] for path, ref in refs.items()}
    assert sent["out/a.json"] == b'{"token": "[redacted]", "ok": true}'
    assert sent["report.html"] == b"<p>key [redacted] used</p>"
    assert b"sk-abc123" in sent["shot.png"]
    assert refs["shot.png"].media_type == "image/png"
    assert refs["out/a.json"].media_type == "application/json"
    assert all(ref.size == len(sent[path]) for path, ref in refs.items())
    # Left out, each saying why (the server's limit, from its greeting, is 4096 bytes).
    assert any("out/passwd.json left out: a symlink" in note for note in notes)
    assert any("big.bin left out" in note and "4096" in note for note in notes)


def test_the_artifacts_other_stages_leave_are_sent_and_a_held_blob_is_not_sent_again(
    alice: Any, workspace: Any, tmp_path: Path, blob_dir: Path
) -> None:
    diff = tmp_path / "repo.diff"
    diff.write_text("--- a/x\n+++ b/x\n")

    class LeavesADiff(Stage):
        async def finish(self, case: CaseContext) -> None:
            case.artifacts.append(Artifact("repo.diff", diff, "text/x-diff"))

    run = paired_run(alice, spec=harness(tmp_path, "print('hi')", ["*.txt"]))
    blob_store(workspace=run.workspace_id, data=diff.read_bytes())
    notes: list[str] = []

    async def go(client: ObservedClient, held: Held) -> CaseContext:
        stages = [Prepare(), Execute(), Collect(), LeavesADiff(), Artifacts(client, Shelf())]
        return await run_case(stages, held, notes)

    with blob_server(tmp_path, blob_dir) as server:
        client, case = with_leased(server, run.token, go)
    assert case.result is not None
    assert case.result.artifacts == [
        ArtifactRef(
            path="repo.diff",
            sha256=sha(diff.read_bytes()),
            size=diff.stat().st_size,
            media_type="text/x-diff",
        )
    ]
    assert client.of("put_blob") == []
    assert "artifact repo.diff: 16 bytes, held by the server already" in notes
    assert "artifacts: '*.txt' matched no file" in notes


def test_a_file_the_server_could_not_be_reached_for_is_still_named_and_one_refused_is_not(
    alice: Any, workspace: Any, tmp_path: Path, blob_dir: Path
) -> None:
    writes = "open('a.txt', 'w').write('aaaaa'); open('b.txt', 'w').write('bbb')"
    run = paired_run(alice, spec=harness(tmp_path, writes, ["*.txt"]))
    notes: list[str] = []

    async def go(client: ObservedClient, held: Held) -> CaseContext:
        # Its limits as an earlier greeting said them, before the server lowered its own to 4
        # bytes: a.txt reaches the server and is refused; b.txt's calls never reach it.
        client.limits = client.limits.model_copy(update={"max_artifact_bytes": 1 << 20})
        client.unreachable = {sha(b"bbb")}
        gone = asyncio.Event()
        gone.set()  # the member's second signal: an upload does not wait for the server
        stage = Artifacts(client, Shelf(), abort=gone)
        return await run_case([Prepare(), Execute(), Collect(), stage], held, notes)

    with blob_server(tmp_path, blob_dir, EVERDICT_MAX_ARTIFACT_BYTES=4) as server:
        _, case = with_leased(server, run.token, go)
    assert case.result is not None
    assert [ref.path for ref in case.result.artifacts or []] == ["b.txt"]
    assert any(
        "a.txt left out: the server refused it" in note and "over the limit of 4 bytes" in note
        for note in notes
    )
    assert any("b.txt not uploaded yet" in note for note in notes)
    assert stored(blob_dir, run.workspace_id) == {}


def named(held: Held, data: bytes, path: str = "report.txt") -> ResultReport:
    ref = ArtifactRef(path=path, sha256=sha(data), size=len(data), media_type="text/plain")
    fingerprint = Fingerprint(os="linux", python="3.11", runnercli_version="test")
    result = CaseResult(
        status="completed", exit_code=0, output="ok", fingerprint=fingerprint, artifacts=[ref]
    )
    return ResultReport(job_id=held.job.job_id, lease_epoch=held.lease.lease_epoch, result=result)


def submitted(client: ObservedClient) -> int:
    return len(client.of("submit_job_result")) + len(client.of("submit_job_results"))


def test_a_result_refused_for_a_blob_the_server_lacks_is_sent_again_after_it(
    alice: Any, workspace: Any, tmp_path: Path, blob_dir: Path
) -> None:
    data = b"the report"
    run = paired_run(alice)

    async def go(client: ObservedClient, held: Held) -> tuple[bool, str]:
        session = session_over(client)
        delivery = Delivery(session)
        delivery.shelf.keep(held.job.job_id, sha(data), data)
        delivered = await delivery.deliver_result(named(held, data), "run 1 case c0")
        return delivered, said(session)

    with blob_server(tmp_path, blob_dir) as server:
        client, (delivered, output) = with_leased(server, run.token, go)
    assert delivered
    # Refused for the blob it names, sent again once the blob was uploaded, and taken.
    assert submitted(client) == 2 and len(client.of("put_blob")) == 1
    assert "sending artifact report.txt again" in output
    assert stored(blob_dir, run.workspace_id) == {sha(data): data}
    [row] = ArtifactRow.objects.all()
    assert (row.path, row.size) == ("report.txt", len(data))


def test_a_blob_no_longer_at_hand_is_left_out_and_the_result_still_goes(
    alice: Any, workspace: Any, tmp_path: Path, blob_dir: Path
) -> None:
    run = paired_run(alice)

    async def go(client: ObservedClient, held: Held) -> tuple[bool, str]:
        session = session_over(client)
        delivered = await Delivery(session).deliver_result(named(held, b"gone"), "run 1 case c0")
        return delivered, said(session)

    with blob_server(tmp_path, blob_dir) as server:
        client, (delivered, output) = with_leased(server, run.token, go)
    assert delivered and submitted(client) == 2
    assert "left out of the result: its bytes are no longer kept" in output
    assert CaseResultRow.objects.filter(run_id=run.run_id).count() == 1
    assert not ArtifactRow.objects.exists()


def test_a_spooled_results_artifacts_survive_a_restart_and_go_once_it_is_delivered(
    alice: Any, workspace: Any, tmp_path: Path, blob_dir: Path
) -> None:
    data = b"made before the runner was killed"
    orphan = b"kept for a result that is gone"
    spool_dir = tmp_path / "spool"
    run = paired_run(alice)

    async def go(client: ObservedClient, held: Held) -> str:
        # The first run kept the result and its blob, then was killed before the server
        # answered; the next one starts with them in the spool.
        first = Spool(spool_dir, client.url)
        first.put(named(held, data), "run 1 case c0")
        first.blobs.keep(held.job.job_id, sha(data), data)
        first.blobs.keep(held.job.job_id + 1, sha(orphan), orphan)
        session = session_over(client)
        await Delivery(session, Spool(spool_dir, client.url)).resend_spooled()
        return said(session)

    with blob_server(tmp_path, blob_dir) as server:
        _, output = with_leased(server, run.token, go)
    assert stored(blob_dir, run.workspace_id) == {sha(data): data}
    assert "result from an earlier run delivered" in output
    [row] = ArtifactRow.objects.all()
    assert row.path == "report.txt"
    # Nothing is left: the result was delivered, the orphan swept at the start.
    assert list((spool_dir / "blobs").iterdir()) == []
    assert list(spool_dir.glob("*.json")) == []
