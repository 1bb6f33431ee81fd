"""Delivery: a finished case's result is never given up while the server cannot answer for
it — kept in the spool, sent again, carried over to a new lease — and reports that are not
results (a failure, a hand-back) are retried within their patience."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from runnercli.case.delivery.reports import Delivery
from runnercli.case.delivery.spool import Spool
from runnercli.client import ServerBusy, ServerUnavailable, ToolCallError
from runnercli.protocol import (
    FAIL_MESSAGE_CHARS,
    MAX_RELEASE_REASON_CHARS,
    Ack,
    CaseResult,
    Lease,
    ResultReport,
    ToolFailure,
)
from runnercli.session import Session
from tests.runnercli.conftest import make_job
from tests.runnercli.fakes import fake_client, fake_session, held, said

TITLE = "run 1 case c1"


def report(epoch: int = 1) -> ResultReport:
    result = CaseResult(status="completed", exit_code=0, output="ok\n", log_tail=["✓"])
    return ResultReport(job_id=1, lease_epoch=epoch, result=result)


def delivery(session: Session, spool_dir: Path) -> Delivery:
    return Delivery(session, Spool(spool_dir, session.client.url))


def spooled(spool_dir: Path) -> list[str]:
    return sorted(path.name for path in spool_dir.glob("*.json"))


def test_a_result_is_sent_again_until_the_server_answers_then_forgotten(tmp_path: Path) -> None:
    session = fake_session()
    client = fake_client(session)
    busy = ServerBusy(ToolFailure(code="database_locked", message="locked", retryable=True))
    client.answer("submit_job_result", ServerUnavailable("connection refused"), busy)
    accepted = asyncio.run(delivery(session, tmp_path).deliver_result(report(), TITLE))
    assert accepted
    assert len(client.of("submit_job_result")) == 3
    assert spooled(tmp_path) == []
    assert "result not delivered yet" in said(session)


def test_a_result_the_server_did_not_take_is_kept_and_sent_at_the_next_start(
    tmp_path: Path,
) -> None:
    session = fake_session()
    fake_client(session).answer("submit_job_result", ServerUnavailable("connection refused"))
    session.abort.set()  # the member's second Ctrl-C, while the server cannot be reached
    accepted = asyncio.run(delivery(session, tmp_path).deliver_result(report(), TITLE))
    assert not accepted
    assert len(spooled(tmp_path)) == 1
    assert f"{TITLE}: result kept in {tmp_path}" in said(session)

    # The runner starts again: what it kept goes before it leases anything.
    again = fake_session()
    asyncio.run(delivery(again, tmp_path).resend_spooled())
    (sent,) = fake_client(again).of("submit_job_result")
    assert (sent["job_id"], sent["lease_epoch"], sent["result"]) == (1, 1, report().result)
    assert spooled(tmp_path) == []
    assert f"{TITLE}: ✓ result from an earlier run delivered" in said(again)


def test_a_result_waiting_for_the_server_goes_with_the_new_lease_of_its_job(
    tmp_path: Path,
) -> None:
    session = fake_session()
    client = fake_client(session)
    job_run = held(make_job(["true"]))
    client.answer("submit_job_result", ServerUnavailable("connection refused"))

    async def leased_again_while_waiting() -> bool:
        sending = asyncio.create_task(
            delivery(session, tmp_path).deliver_result(report(), TITLE, job_run)
        )
        while not client.of("submit_job_result"):
            await asyncio.sleep(0.01)
        job_run.lease = Lease(job_id=1, lease_epoch=2, lease_ttl_ms=60_000, heartbeat_ms=20_000)
        return await sending

    assert asyncio.run(leased_again_while_waiting())
    assert [call["lease_epoch"] for call in client.of("submit_job_result")] == [1, 2]
    assert spooled(tmp_path) == []


def test_a_result_the_server_refuses_for_good_is_dropped_and_the_refusal_raised(
    tmp_path: Path,
) -> None:
    session = fake_session()
    fake_client(session).answer("submit_job_result", ToolCallError("output exceeds 1 MiB"))
    with pytest.raises(ToolCallError, match="output exceeds"):
        asyncio.run(delivery(session, tmp_path).deliver_result(report(), TITLE))
    assert spooled(tmp_path) == []


def test_a_result_the_server_refuses_as_late_is_answered_for(tmp_path: Path) -> None:
    session = fake_session()
    late = Ack(accepted=False, reason="stale lease: epoch 1")
    fake_client(session).answer("submit_job_result", late)
    assert not asyncio.run(delivery(session, tmp_path).deliver_result(report(), TITLE))
    assert spooled(tmp_path) == []
    assert "result refused: stale lease: epoch 1 (the server keeps it as a late result)" in said(
        session
    )


def test_a_failure_and_a_hand_back_carry_their_reason_within_the_protocol_s_bounds() -> None:
    session = fake_session()
    job_run = held(make_job(["true"]), epoch=3)
    parts = Delivery(session)

    async def both() -> tuple[bool, bool]:
        failed = await parts.fail(job_run, "x" * (FAIL_MESSAGE_CHARS + 10))
        released = await parts.release(1, 3, "y" * 500, title=TITLE, paused_until="2030-01-01")
        return failed, released

    assert asyncio.run(both()) == (True, True)
    client = fake_client(session)
    (failure,) = client.of("fail_job")
    assert failure == {
        "job_id": 1,
        "lease_epoch": 3,
        "message": "x" * FAIL_MESSAGE_CHARS,
        "retryable": False,
    }
    (release,) = client.of("release_job")
    assert release["reason"] == "y" * MAX_RELEASE_REASON_CHARS
    assert release["until"] == "2030-01-01"


def test_a_report_that_is_not_a_result_is_given_up_once_its_patience_is_spent() -> None:
    session = fake_session()
    client = fake_client(session)
    client.answer("release_job", ServerUnavailable("connection refused"))
    released = asyncio.run(Delivery(session).release(1, 1, "stopping", title=TITLE, patience_s=0))
    assert not released
    assert len(client.of("release_job")) == 1
    assert f"{TITLE}: ✗ could not report: connection refused" in said(session)
