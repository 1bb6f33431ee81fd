"""The page's side of the fs rendezvous awaited on an event loop (the API view and the MCP
tools): it blocks no thread while the runner reads, an answer given in its process is handed
to it (its row gone with the answer's write), and one given elsewhere is read back."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from channels.db import database_sync_to_async

from core.errors import NoAnswer
from runnercli.protocol import FsEntry
from runners.wakeup import answers
from scorecards.files.awaiting import fs_answer_aget, fs_request_await
from scorecards.files.models import CaseFsRequest
from scorecards.files.runner import fs_request_answer, fs_requests_take
from scorecards.files.services import FsWait, fs_request_ask

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("blob_dir")]

ENTRY = FsEntry(path="a.txt", size=1, kind="file", mtime=0.0)


def _serve_one(leased: dict[str, Any]) -> bool:
    """The runner's side, once: take the request and answer it with a listing."""
    fence = (leased["job_id"], leased["epoch"])
    taken = fs_requests_take(runner=leased["runner"], fences=[fence])
    if not taken:
        return False
    ack = fs_request_answer(
        runner=leased["runner"],
        job_id=leased["job_id"],
        lease_epoch=leased["epoch"],
        request_id=taken[0].request_id,
        entries=[ENTRY],
    )
    assert ack.accepted, ack.reason
    return True


def test_a_page_awaiting_its_runner_blocks_no_thread_and_is_handed_the_answer(
    leased: dict[str, Any], alice: Any
) -> None:
    async def scenario() -> Any:
        # One thread for all sync work: the runner's take and answer below need it while
        # the page waits, as a pool's threads are needed by runners' calls.
        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=1))
        page = asyncio.ensure_future(
            fs_answer_aget(user=alice, run_id=leased["run"].pk, key="c0", op="list", path="")
        )
        serve = database_sync_to_async(_serve_one, thread_sensitive=False)
        while not await serve(leased):
            await asyncio.sleep(0.01)
        return await asyncio.wait_for(page, 10)

    answer = asyncio.run(scenario())
    assert (answer.run_id, answer.key, answer.op, answer.entries) == (
        leased["run"].pk,
        "c0",
        "list",
        [ENTRY.model_dump()],
    )
    assert not CaseFsRequest.objects.exists()  # deleted by the answer's write


def test_an_answer_given_before_the_page_waits_is_read_back(
    leased: dict[str, Any], alice: Any
) -> None:
    request = fs_request_ask(user=alice, run_id=leased["run"].pk, key="c0", op="list", path="")
    assert _serve_one(leased)  # nobody waits here yet: written to the row, as for a replica
    assert CaseFsRequest.objects.filter(answered_at__isnull=False).count() == 1
    answer = asyncio.run(fs_request_await(request=request, timeout_s=5))
    assert answer.entries == [ENTRY.model_dump()]
    assert not CaseFsRequest.objects.exists()


def test_a_request_whose_row_went_with_its_answer_takes_the_answer_handed_over(
    leased: dict[str, Any], alice: Any
) -> None:
    request = fs_request_ask(user=alice, run_id=leased["run"].pk, key="c0", op="list", path="")
    wait = FsWait.start(request, timeout_s=5)
    with answers.waiting(request.pk, threading.Event()) as answered:
        assert _serve_one(leased)
        assert answered.is_set() and not CaseFsRequest.objects.exists()
        answer = wait.look(woken=False)
    assert answer is not None and answer.entries == [ENTRY.model_dump()]


def test_a_row_gone_while_its_answer_is_handed_over_is_waited_for_not_a_504(
    leased: dict[str, Any], alice: Any
) -> None:
    request = fs_request_ask(user=alice, run_id=leased["run"].pk, key="c0", op="list", path="")
    wait = FsWait.start(request, timeout_s=5)
    with answers.waiting(request.pk, threading.Event()):
        with answers.handing(request.pk):
            # As while an answer's write has deleted the row and not handed it over yet.
            CaseFsRequest.objects.filter(pk=request.pk).delete()
            assert wait.look(woken=False) is None
        with pytest.raises(NoAnswer):  # gone, and no answer coming: gone with its job
            wait.look(woken=False)
