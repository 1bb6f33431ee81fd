"""The runner's side of the fs rendezvous: each request answered from the case's working
directory only — listed, read and redacted, or refused with the reason — over a client that
records what would be sent."""

from __future__ import annotations

import asyncio
import hashlib
import os
from pathlib import Path
from typing import Any

import pytest

from runnercli.case.files.rendezvous import CASE_OVER, KEPT_HERE, CaseFiles
from runnercli.protocol import BlobHoldings, FsRequest, FsRequests, JobFence
from runnercli.session import Session
from runnercli.text.redact import Redactor
from tests.runnercli.conftest import make_job
from tests.runnercli.fakes import FakeClient, fake_session, held, said


class FilesClient(FakeClient):
    """Holds every blob already (nothing to upload) and accepts every answer."""

    async def call(self, tool: str, args: dict[str, Any], model: Any, wait_s: float = 0.0) -> Any:
        self.calls.append((tool, args))
        if tool == "have_blobs":
            return BlobHoldings()
        return model.model_validate({"accepted": True})


@pytest.fixture
def case_dir(tmp_path: Path) -> Path:
    case, sibling = tmp_path / "case-1", tmp_path / "case-10"
    (case / "out").mkdir(parents=True)
    sibling.mkdir()
    (sibling / "secret.txt").write_text("the sibling's secret")
    (case / "notes.txt").write_text("key=sk-123 ok\n")
    (case / "out" / "pic.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    (case / "passwd").symlink_to("/etc/passwd")
    (case / "sib").symlink_to(sibling)
    (case / "up").symlink_to("../case-10/secret.txt")
    with (case / "huge.bin").open("wb") as handle:
        handle.truncate(64 * 1024 * 1024)  # sparse: only its size is big
    return case


def answer(case_dir: Path | None, op: str, path: str, **options: Any) -> dict[str, Any]:
    return answered(case_dir, op, path, **options)[0]


def answered(
    case_dir: Path | None, op: str, path: str, **options: Any
) -> tuple[dict[str, Any], Session]:
    """What the runner answered a request, and its session (what its terminal said)."""
    client = FilesClient()
    session = fake_session(client, redactor=Redactor(["sk-[0-9]+"]), **options)
    job_run = held(make_job(["a"]))
    session.running = {job_run.job.job_id: job_run}
    files = CaseFiles(session)
    if case_dir is not None:
        files.open(job_run, case_dir)
    request = FsRequest(request_id="7", job_id=job_run.job.job_id, op=op, path=path)  # type: ignore[arg-type]
    asyncio.run(files.answer(request))
    [sent] = client.of("answer_case_fs_request")
    assert sent["request_id"] == "7" and sent["lease_epoch"] == job_run.epoch
    return sent, session


def test_a_directory_is_listed_and_a_read_of_one_answers_its_listing(case_dir: Path) -> None:
    listed = answer(case_dir, "list", "")
    kinds = {e["path"]: e["kind"] for e in listed["entries"]}
    assert kinds == {
        "huge.bin": "file",
        "notes.txt": "file",
        "out": "dir",
        "passwd": "symlink",
        "sib": "symlink",
        "up": "symlink",
    }
    assert [e["path"] for e in answer(case_dir, "read", "out")["entries"]] == ["out/pic.png"]


def test_a_text_file_is_redacted_before_it_is_uploaded(case_dir: Path) -> None:
    reply, session = answered(case_dir, "read", "notes.txt")
    sent = b"key=[redacted] ok\n"
    assert reply["blob"] == {
        "sha256": hashlib.sha256(sent).hexdigest(),
        "size": len(sent),
        "media_type": "text/plain",
    }
    assert said(session).count("sent notes.txt (18 bytes) of run ") == 1
    assert answer(case_dir, "read", "out/pic.png")["blob"]["media_type"] == "image/png"


@pytest.mark.parametrize("path", ["passwd", "sib", "sib/secret.txt", "up", "out/../../x"])
def test_what_leads_out_of_the_case_directory_is_refused(case_dir: Path, path: str) -> None:
    error = answer(case_dir, "read", path)["error"]
    assert error.startswith("refused: "), error


def test_a_file_over_the_limit_is_refused_from_its_size(case_dir: Path) -> None:
    error = answer(case_dir, "read", "huge.bin")["error"]
    assert error.startswith("too_large: ") and "over the limit" in error
    assert os.path.getsize(case_dir / "huge.bin") > 10 * 1024 * 1024


def test_a_missing_file_and_an_ended_case_say_so(case_dir: Path) -> None:
    assert answer(case_dir, "read", "gone.txt")["error"].startswith("not_found: ")
    assert answer(None, "read", "notes.txt")["error"] == f"not_found: {CASE_OVER}"


def test_with_no_files_the_member_keeps_them_here(case_dir: Path) -> None:
    assert answer(case_dir, "read", "notes.txt", no_files=True)["error"] == f"kept: {KEPT_HERE}"


class PollClient(FilesClient):
    """Its first poll takes the requests given, the next ones nothing."""

    def __init__(self, requests: list[FsRequest], server_features: list[str]) -> None:
        super().__init__()
        self.server_features = server_features
        self.replies = [FsRequests(requests=requests)]

    async def call(self, tool: str, args: dict[str, Any], model: Any, wait_s: float = 0.0) -> Any:
        if tool != "poll_case_fs_requests":
            return await super().call(tool, args, model, wait_s)
        self.calls.append((tool, args))
        return self.replies.pop(0) if self.replies else FsRequests()


@pytest.mark.parametrize(
    ("offered", "current", "carried"),
    [(True, True, True), (True, False, False), (False, True, False)],
)
def test_with_fs_answers_the_next_poll_carries_the_listings_and_refusals(
    case_dir: Path, offered: bool, current: bool, carried: bool
) -> None:
    """Carried only when the server offers `fs_answers` and the poll is still the one kept
    parked (one superseded sends them on their own); a file's answer always goes on its own,
    its ack awaited, and the next poll does not wait for its upload."""
    job_run = held(make_job(["a"]))
    job_id = job_run.job.job_id
    asked = [
        FsRequest(request_id="1", job_id=job_id, op="list", path="out"),
        FsRequest(request_id="2", job_id=job_id, op="read", path="gone.txt"),
        FsRequest(request_id="3", job_id=job_id, op="read", path="notes.txt"),
    ]
    client = PollClient(asked, ["fs_answers"] if offered else [])
    session = fake_session(client, redactor=Redactor(["sk-[0-9]+"]))
    session.running = {job_id: job_run}
    files = CaseFiles(session)
    files.open(job_run, case_dir)
    fence = JobFence(job_id=job_id, lease_epoch=job_run.epoch)

    async def poll() -> None:
        task = asyncio.ensure_future(files._poll([fence]))
        files._current = task if current else None
        await task
        while files._tasks:
            await asyncio.gather(*files._tasks)

    asyncio.run(poll())
    polls = client.of("poll_case_fs_requests")
    alone = {args["request_id"]: args for args in client.of("answer_case_fs_request")}
    assert "blob" in alone.pop("3")
    listing = [{"path": "out/pic.png", "size": 8, "kind": "file"}]

    def entries(answer: dict[str, Any]) -> list[dict[str, Any]]:
        return [{k: v for k, v in entry.items() if k != "mtime"} for entry in answer["entries"]]

    if carried:
        assert len(polls) == 2 and "answers" not in polls[0] and not alone
        first, second = sorted(polls[1]["answers"], key=lambda answer: answer["request_id"])
        assert (first["job_id"], first["lease_epoch"]) == (job_id, job_run.epoch)
        assert first["request_id"] == "1" and entries(first) == listing
        assert second["request_id"] == "2" and second["error"].startswith("not_found: ")
    else:
        assert len(polls) == 1 and "answers" not in polls[0]
        assert entries(alone["1"]) == listing
        assert alone["2"]["error"].startswith("not_found: ")
