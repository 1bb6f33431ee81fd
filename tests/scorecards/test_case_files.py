"""The fs rendezvous as the server keeps it: a member's request bound to the job's lease,
handed once to that lease's holder, answered only by it with a listing, a blob of the job's
workspace within the limit, or an error — and a 504 when no answer comes."""

from __future__ import annotations

from typing import Any

import pytest

from core.errors import Conflict, Forbidden, Invalid, NoAnswer, NotFound
from runnercli.protocol import BlobRef, FsEntry
from runnercli.protocol.world import fs_error
from runners.models import RunnerJob
from scorecards.blobs.services import blob_store
from scorecards.files.models import CaseFsRequest
from scorecards.files.runner import fs_request_answer, fs_requests_give_back, fs_requests_take
from scorecards.files.services import (
    FsAsked,
    _raise_refusal,
    fs_answer_get,
    fs_request_ask,
    fs_request_wait,
)
from scorecards.services import workspace_create
from tests.suites import pair, start

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("blob_dir")]

ENTRY = FsEntry(path="a.txt", size=1, kind="file", mtime=0.0)


def ask(user: Any, leased: dict[str, Any], path: str = "", op: str = "read") -> FsAsked:
    return fs_request_ask(user=user, run_id=leased["run"].pk, key="c0", op=op, path=path)


def take(leased: dict[str, Any], epoch: int | None = None) -> list[Any]:
    fence = (leased["job_id"], leased["epoch"] if epoch is None else epoch)
    return fs_requests_take(runner=leased["runner"], fences=[fence])


def reply(leased: dict[str, Any], request_id: str, epoch: int | None = None, **kw: Any) -> Any:
    return fs_request_answer(
        runner=kw.pop("runner", leased["runner"]),
        job_id=leased["job_id"],
        lease_epoch=leased["epoch"] if epoch is None else epoch,
        request_id=request_id,
        **kw,
    )


def test_a_request_is_taken_once_by_the_lease_s_holder_and_answered_once(
    leased: dict[str, Any], bob: Any
) -> None:
    request = ask(bob, leased, "out")
    assert take(leased, epoch=leased["epoch"] + 1) == []  # another epoch: not its lease
    [taken] = take(leased)
    assert (taken.request_id, taken.op, taken.path) == (str(request.pk), "read", "out")
    assert take(leased) == []  # taken already: a second poll does not answer it too
    stranger = pair(bob, "stranger")
    assert not reply(leased, taken.request_id, runner=stranger, entries=[ENTRY]).accepted
    assert not reply(leased, taken.request_id, epoch=leased["epoch"] + 1, entries=[ENTRY]).accepted
    assert not reply(leased, taken.request_id, entries=[ENTRY], error="both").accepted
    assert reply(leased, taken.request_id, entries=[ENTRY]).accepted
    assert not reply(leased, taken.request_id, entries=[ENTRY]).accepted  # answered already
    answer = fs_request_wait(request=request, timeout_s=1)
    assert answer.entries == [ENTRY.model_dump()] and answer.blob is None
    assert not CaseFsRequest.objects.exists()  # read once, then gone


def test_a_poll_that_could_not_deliver_gives_its_requests_back(leased: dict[str, Any]) -> None:
    ask(leased["runner"].owner, leased)
    taken = take(leased)
    fs_requests_give_back(requests=taken)
    assert [r.request_id for r in take(leased)] == [r.request_id for r in taken]


def test_a_blob_answer_names_a_blob_of_the_job_s_workspace_within_the_limit(
    leased: dict[str, Any], alice: Any, workspace: Any, settings: Any
) -> None:
    request = ask(alice, leased, "notes.txt")
    [taken] = take(leased)
    other = blob_store(workspace=workspace_create(user=alice, slug="other", name="O"), data=b"x")
    ref = BlobRef(sha256=other.sha256, size=other.size, media_type="text/plain")
    refused = reply(leased, taken.request_id, blob=ref)
    assert not refused.accepted and "was not uploaded" in refused.reason
    mine = blob_store(workspace=workspace, data=b"hello")
    settings.EVERDICT_MAX_ARTIFACT_BYTES = 4
    ref = BlobRef(sha256=mine.sha256, size=mine.size, media_type="text/plain")
    assert "over max_artifact_bytes" in reply(leased, taken.request_id, blob=ref).reason
    settings.EVERDICT_MAX_ARTIFACT_BYTES = 1024
    assert reply(leased, taken.request_id, blob=ref).accepted
    answer = fs_request_wait(request=request, timeout_s=1)
    assert (answer.blob, answer.media_type) == (mine, "text/plain")


def test_only_members_ask_only_of_running_cases_and_only_sound_paths(
    leased: dict[str, Any], alice: Any, charlie: Any
) -> None:
    with pytest.raises(NotFound):
        ask(charlie, leased)
    for path in ("../x", "a/../../b", "a\x00b", "C:/x", "/etc/passwd"):
        with pytest.raises(Invalid):
            ask(alice, leased, path)
    with pytest.raises(Invalid):
        ask(alice, leased, op="write")
    idle = start(alice, leased["runner"])
    with pytest.raises(Conflict, match="is not running"):
        fs_request_ask(user=alice, run_id=idle.pk, key="c0", op="list", path="")
    assert CaseFsRequest.objects.count() == 0


def test_no_answer_in_time_is_a_504_and_the_request_goes(
    leased: dict[str, Any], alice: Any, settings: Any
) -> None:
    settings.EVERDICT_FS_ANSWER_TIMEOUT_S = 0.1
    with pytest.raises(NoAnswer, match=r"did not answer within 0\.1 s") as raised:
        fs_answer_get(user=alice, run_id=leased["run"].pk, key="c0", op="list", path="")
    assert raised.value.status == 504
    assert not CaseFsRequest.objects.exists()


@pytest.mark.parametrize(
    ("reason", "error"), [("refused", Forbidden), ("kept", Forbidden), ("not_found", NotFound)]
)
def test_a_runner_s_refusal_is_an_error_of_its_kind(
    leased: dict[str, Any], alice: Any, reason: Any, error: type[Exception]
) -> None:
    request = ask(alice, leased, "x")
    [taken] = take(leased)
    assert reply(leased, taken.request_id, error=fs_error(reason, "no")).accepted
    with pytest.raises(error):
        _raise_refusal(fs_request_wait(request=request, timeout_s=1))


def test_a_request_whose_case_ends_meanwhile_says_so_rather_than_waiting(
    leased: dict[str, Any], alice: Any
) -> None:
    request = ask(alice, leased, "x")
    RunnerJob.objects.filter(pk=leased["job_id"]).update(lease_epoch=leased["epoch"] + 1)
    with pytest.raises(Conflict, match="not running any more"):
        fs_request_wait(request=request, timeout_s=5)
    assert not CaseFsRequest.objects.exists()


@pytest.mark.parametrize("repeat", ["x", "-1", "1", str(2**40)])
def test_a_repeat_the_run_does_not_have_is_refused(
    leased: dict[str, Any], alice: Any, repeat: str
) -> None:
    with pytest.raises(Invalid):
        fs_request_ask(
            user=alice, run_id=leased["run"].pk, key="c0", op="list", path="", repeat=repeat
        )


def test_fences_no_job_can_hold_take_nothing_and_leave_the_request_open(
    leased: dict[str, Any], alice: Any
) -> None:
    ask(alice, leased, "x")
    for fence in ((2**63, leased["epoch"]), (leased["job_id"], 2**31), (-1, 0), (0, -1)):
        assert fs_requests_take(runner=leased["runner"], fences=[fence]) == []
    assert CaseFsRequest.objects.get().taken_at is None
    assert [r.path for r in take(leased)] == ["x"]


def test_a_run_or_repeat_out_of_range_is_refused_and_queues_nothing(
    leased: dict[str, Any], alice: Any
) -> None:
    with pytest.raises(NotFound):
        fs_request_ask(user=alice, run_id=2**70, key="c0", op="list", path="")
    with pytest.raises(Invalid):
        fs_request_ask(
            user=alice, run_id=leased["run"].pk, key="c0", op="list", path="", repeat=str(2**70)
        )
    assert not CaseFsRequest.objects.exists()


def test_the_answer_names_the_run_and_case_asked_of(leased: dict[str, Any], alice: Any) -> None:
    request = ask(alice, leased, "sub", op="list")
    [taken] = take(leased)
    assert reply(leased, taken.request_id, entries=[ENTRY]).accepted
    answer = fs_request_wait(request=request, timeout_s=1)
    assert (answer.run_id, answer.key, answer.op, answer.path) == (
        leased["run"].pk,
        "c0",
        "list",
        "sub",
    )
