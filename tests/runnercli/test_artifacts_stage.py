"""The `Artifacts` stage and the delivery of a result that names artifacts: the files a case
left, redacted when text, uploaded before the result names them; a result the server refuses
for a blob it lacks is sent again after the blob, from the shelf — in memory, or beside the
spooled result across a restart."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable
from pathlib import Path

from runnercli.case.artifacts.shelf import Shelf
from runnercli.case.artifacts.stage import Artifacts
from runnercli.case.collect import Collect
from runnercli.case.delivery.reports import Delivery
from runnercli.case.delivery.spool import Spool
from runnercli.case.execute import Execute
from runnercli.case.pipeline import Artifact, CaseContext, Pipeline, Stage
from runnercli.case.prepare import Prepare
from runnercli.client import ServerUnavailable
from runnercli.protocol import (
    Ack,
    ArtifactRef,
    BlobAck,
    CaseJob,
    CaseResult,
    ResultReport,
    artifact_not_uploaded,
)
from runnercli.text.redact import Redactor
from tests.runnercli.blob_server import BlobServerClient
from tests.runnercli.conftest import make_job
from tests.runnercli.fakes import fake_session, held, said

Script = Callable[[str], list[str]]

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


def job_with(command: list[str], artifacts: list[str]) -> CaseJob:
    job = make_job(command)
    spec = job.harness.spec.model_copy(update={"artifacts": artifacts})
    return job.model_copy(update={"harness": job.harness.model_copy(update={"spec": spec})})


def run_case(stages: list[Stage], job: CaseJob, notes: list[str]) -> CaseContext:
    case = CaseContext(held(job), notes=[notes.append])
    asyncio.run(Pipeline(stages).run(case))
    return case


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_the_files_a_case_left_are_redacted_uploaded_and_named_in_its_result(
    script: Script,
) -> None:
    client = BlobServerClient(chunk_bytes=4096)
    client.limits = client.limits.model_copy(update={"max_artifact_bytes": 4096})
    notes: list[str] = []
    stage = Artifacts(client, Shelf(), redactor=Redactor(["sk-[a-z0-9]+"]))
    job = job_with(script(LEAVES_FILES), ["out/**/*.json", "*.html", "*.png", "big.bin"])
    case = run_case([Prepare(), Execute(), Collect(), stage], job, notes)

    assert case.result is not None and case.result.status == "completed"
    refs = {ref.path: ref for ref in case.result.artifacts or []}
    assert sorted(refs) == ["out/a.json", "out/deep/b.json", "report.html", "shot.png"]
    # What left the machine is what the result names, the member's secrets redacted in text;
    # the image is binary and goes as it is.
    sent = {path: client.blobs[ref.sha256] for path, ref in refs.items()}
    assert sent["out/a.json"] == b'{"token": "[redacted]", "ok": true}'
    assert sent["report.html"] == b"<p>key [redacted] used</p>"
    assert b"sk-abc123" in sent["shot.png"]
    assert refs["shot.png"].media_type == "image/png"
    assert refs["out/a.json"].media_type == "application/json"
    assert all(ref.size == len(sent[path]) for path, ref in refs.items())
    # Left out, each saying why.
    assert any("out/passwd.json left out: a symlink" in note for note in notes)
    assert any("big.bin left out" in note and "4096" in note for note in notes)


def test_the_artifacts_other_stages_leave_are_sent_and_a_held_blob_is_not_sent_again(
    script: Script, tmp_path: Path
) -> None:
    diff = tmp_path / "repo.diff"
    diff.write_text("--- a/x\n+++ b/x\n")

    class LeavesADiff(Stage):
        async def finish(self, case: CaseContext) -> None:
            case.artifacts.append(Artifact("repo.diff", diff, "text/x-diff"))

    client = BlobServerClient()
    client.hold(diff.read_bytes())
    notes: list[str] = []
    job = job_with(script("print('hi')"), ["*.txt"])
    stages = [Prepare(), Execute(), Collect(), LeavesADiff(), Artifacts(client, Shelf())]
    case = run_case(stages, job, notes)
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
    script: Script,
) -> None:
    client = BlobServerClient()
    client.answer("have_blobs", ServerUnavailable("connection refused"))
    client.answer(
        "put_blob",
        BlobAck(accepted=False, reason="blob is over the limit of 3 bytes"),
        *[ServerUnavailable("connection refused")] * 100,
    )
    notes: list[str] = []
    writes = "open('a.txt', 'w').write('aaa'); open('b.txt', 'w').write('bbb')"
    gone = asyncio.Event()
    gone.set()  # the member's second signal: an upload does not wait for the server
    stage = Artifacts(client, Shelf(), abort=gone)
    case = run_case(
        [Prepare(), Execute(), Collect(), stage], job_with(script(writes), ["*.txt"]), notes
    )
    assert case.result is not None
    assert [ref.path for ref in case.result.artifacts or []] == ["b.txt"]
    assert any("a.txt left out: the server refused it" in note for note in notes)
    assert any("b.txt not uploaded yet" in note for note in notes)


def named(data: bytes, path: str = "report.txt") -> ResultReport:
    ref = ArtifactRef(path=path, sha256=sha(data), size=len(data), media_type="text/plain")
    result = CaseResult(status="completed", exit_code=0, output="ok", artifacts=[ref])
    return ResultReport(job_id=1, lease_epoch=1, result=result)


def test_a_result_refused_for_a_blob_the_server_lacks_is_sent_again_after_it() -> None:
    data = b"the report"
    client = BlobServerClient()
    session = fake_session(client)
    delivery = Delivery(session)
    delivery.shelf.keep(1, sha(data), data)
    missing = Ack(accepted=False, reason=artifact_not_uploaded("report.txt", sha(data)))
    client.answer("submit_job_result", missing)
    client.answer("submit_job_results", [missing])
    assert asyncio.run(delivery.deliver_result(named(data), "run 1 case c1"))
    assert client.blobs == {sha(data): data}
    sent = client.of("submit_job_result") + client.of("submit_job_results")
    assert len(sent) == 2
    assert "sending artifact report.txt again" in said(session)


def test_a_blob_no_longer_at_hand_is_left_out_and_the_result_still_goes() -> None:
    data = b"gone"
    client = BlobServerClient()
    session = fake_session(client)
    missing = Ack(accepted=False, reason=artifact_not_uploaded("report.txt", sha(data)))
    client.answer("submit_job_result", missing)
    client.answer("submit_job_results", [missing])
    assert asyncio.run(Delivery(session).deliver_result(named(data), "run 1 case c1"))
    last = (client.of("submit_job_result") + client.of("submit_job_results"))[-1]
    result = last["result"] if "result" in last else last["reports"][0].result
    assert result.artifacts is None
    assert "left out of the result: its bytes are no longer kept" in said(session)


def test_a_spooled_results_artifacts_survive_a_restart_and_go_once_it_is_delivered(
    tmp_path: Path,
) -> None:
    data = b"made before the runner was killed"
    report = named(data)
    # The first run kept the result and its blob, then was killed before the server answered.
    first = Spool(tmp_path, "http://127.0.0.1:9")
    first.put(report, "run 1 case c1")
    first.blobs.keep(1, sha(data), data)
    orphan = b"kept for a result that is gone"
    first.blobs.keep(2, sha(orphan), orphan)

    client = BlobServerClient()
    session = fake_session(client)
    missing = Ack(accepted=False, reason=artifact_not_uploaded("report.txt", sha(data)))
    client.answer("submit_job_result", missing)
    client.answer("submit_job_results", [missing])
    delivery = Delivery(session, Spool(tmp_path, "http://127.0.0.1:9"))
    asyncio.run(delivery.resend_spooled())
    assert client.blobs == {sha(data): data}
    assert "result from an earlier run delivered" in said(session)
    # Nothing is left: the result was delivered, the orphan swept at the start.
    assert list((tmp_path / "blobs").iterdir()) == []
    assert list(tmp_path.glob("*.json")) == []
