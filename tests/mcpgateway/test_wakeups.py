"""Parked long-polls between wake-ups: one re-check per process, not one claim per poll.

A job that becomes claimable without any notification (here: a row changed by plain SQL
from another process) still reaches a parked poll, through the process's re-check task;
parked polls with nothing to claim run no claims of their own while they wait.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.db import connection

from accounts.services import api_key_create
from runners.models import JobStatus, RunnerJob
from tests.live import LiveServer, ParkedPolls, wait_metric
from tests.live import metric as sample
from tests.mcpgateway.conftest import live_server_fixtures
from tests.mcpgateway.mcp_client import call, rest, structured
from tests.mcpgateway.test_runner_tools import ParkedLease, dispatch, pair_via_rest
from tests.suites import suite

pytestmark = pytest.mark.e2e

RECHECK_S = 0.3


recheck_process, server = live_server_fixtures(
    "recheck", "server", EVERDICT_WAKE_RECHECK_S=RECHECK_S
)


@pytest.fixture
def key(alice: Any, workspace: Any) -> str:
    suite(alice, cases=1)
    return api_key_create(user=alice).key


def metric(server: LiveServer, name: str) -> float:
    """One sample of the server's /metrics (0 when not yet counted)."""
    return sample(server.url, name)


def claims_run_or_skipped(server: LiveServer) -> float:
    return metric(server, 'everdict_claims_total{found="no"}') + metric(
        server, 'everdict_claims_total{found="skipped"}'
    )


def set_status_silently(job_id: int, status: str) -> None:
    """Change a job's state by plain SQL: no notification, no in-process wake-up."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {RunnerJob._meta.db_table} SET status = %s WHERE id = %s", [status, job_id]
        )


def ask(server: LiveServer, token: str, wait_ms: int) -> ParkedLease:
    """A long-poll, once asked."""
    poll = ParkedLease(server.url, token, wait_ms)
    poll.start()
    give_up = time.monotonic() + 15
    while not poll.asked_at and time.monotonic() < give_up:
        time.sleep(0.02)
    assert poll.asked_at, "the long-poll never started"
    return poll


def park(server: LiveServer, token: str, wait_ms: int) -> ParkedLease:
    """A long-poll, once the server shows it parked: its first round came back empty."""
    parking = ParkedPolls(server.url)
    poll = ask(server, token, wait_ms)
    parking.wait()
    return poll


def test_a_job_queued_without_notification_reaches_a_parked_poll_by_the_recheck(
    server: LiveServer, key: str
) -> None:
    paired = pair_via_rest(server, key)
    run = dispatch(server, key, paired["id"])
    job = RunnerJob.objects.get(run_id=run["id"])
    set_status_silently(job.pk, JobStatus.PENDING)

    wait_ms = 20_000
    poll = park(server, paired["token"], wait_ms)
    assert poll.reply is None

    queued_at = time.monotonic()
    set_status_silently(job.pk, JobStatus.QUEUED)
    poll.join(wait_ms / 1000 + 10)

    assert poll.reply is not None and poll.reply["job"] is not None
    assert poll.reply["job"]["job_id"] == job.pk
    # Found by the next re-check, far sooner than the poll's own deadline.
    assert poll.answered_at - queued_at < RECHECK_S + 2.0
    assert poll.answered_at - poll.asked_at < wait_ms / 1000 / 2


def test_parked_polls_run_no_claims_while_they_wait(server: LiveServer, key: str) -> None:
    tokens = [pair_via_rest(server, key, label=f"laptop-{i}")["token"] for i in range(8)]
    claims_before = claims_run_or_skipped(server)
    rechecks_before = metric(server, "everdict_wake_rechecks_total")

    wait_ms = 3_000
    polls = [park(server, token, wait_ms) for token in tokens]
    for poll in polls:
        poll.join(wait_ms / 1000 + 15)

    assert all(p.reply == {"job": None, "lease": None, "update_required": False} for p in polls)
    # Several re-check rounds ran over the owner of the parked polls, and found nothing...
    assert metric(server, "everdict_wake_rechecks_total") - rechecks_before >= 3
    # ...so each poll ran at most its one claim on arrival (skipped once a re-check had found
    # the owner with nothing queued), none while parked or at its end.
    assert claims_run_or_skipped(server) - claims_before == len(tokens)


def test_once_a_recheck_found_nothing_new_polls_park_without_a_claim(
    server: LiveServer, key: str
) -> None:
    paired = pair_via_rest(server, key)
    run = dispatch(server, key, paired["id"])  # pinned to this runner
    job = RunnerJob.objects.get(run_id=run["id"])
    set_status_silently(job.pk, JobStatus.PENDING)
    # Another runner of the same owner stays parked, so re-checks keep looking at the owner
    # and keep finding nothing queued.
    desk = pair_via_rest(server, key, label="desk")
    keeper = park(server, desk["token"], 8_000)
    # A re-check counts as it begins, with the owners it reads just before: the third to
    # begin from now proves one begun after the keeper parked has ended, finding nothing.
    rechecks = metric(server, "everdict_wake_rechecks_total")
    wait_metric(server.url, "everdict_wake_rechecks_total", rechecks + 3)

    claims = metric(server, 'everdict_claims_total{found="no"}')
    skipped = metric(server, 'everdict_claims_total{found="skipped"}')
    polls = [ask(server, paired["token"], 1_000) for _ in range(3)]
    for poll in polls:
        poll.join(15)
    assert metric(server, 'everdict_claims_total{found="skipped"}') - skipped == 3
    assert metric(server, 'everdict_claims_total{found="no"}') == claims

    # A job queued behind the process's back still reaches such a poll: the next re-check
    # finds it and wakes the poll, which claims.
    poll = park(server, paired["token"], 20_000)
    queued_at = time.monotonic()
    set_status_silently(job.pk, JobStatus.QUEUED)
    poll.join(30)
    assert poll.reply is not None and poll.reply["job"]["job_id"] == job.pk
    assert poll.answered_at - queued_at < RECHECK_S + 2.0
    keeper.join(15)


def test_a_dispatch_after_the_recheck_is_claimed_by_the_next_poll_at_once(
    server: LiveServer, key: str
) -> None:
    paired = pair_via_rest(server, key)
    ask(server, paired["token"], 1_500).join(15)  # the re-check finds nothing queued

    run = dispatch(server, key, paired["id"])  # its wake-up voids what the re-check found
    poll = ask(server, paired["token"], 20_000)
    poll.join(30)
    assert poll.reply is not None and poll.reply["job"]["run_id"] == run["id"]
    assert poll.answered_at - poll.asked_at < 1.0


def test_a_parked_poll_woken_after_a_newer_status_leaves_the_newer_one_on_the_roster(
    server: LiveServer, key: str
) -> None:
    laptop = pair_via_rest(server, key)
    desk = pair_via_rest(server, key, label="desk")
    poll = park(server, laptop["token"], 4_000)  # parked saying "idle"
    # Meanwhile the runner pauses, and says so.
    paused = "paused until 10:30 — Claude plan limit"
    structured(call(server.url, laptop["token"], "hello", {"protocol": 2, "status": paused}))
    claims = metric(server, 'everdict_claims_total{found="no"}')
    dispatch(server, key, desk["id"])  # wakes the owner's parked polls; only the desk's
    wait_metric(server.url, 'everdict_claims_total{found="no"}', claims + 1)

    status, runners = rest(server.url, "GET", "/api/runners", key)
    assert status == 200, runners
    shown = {r["id"]: r["status"] for r in runners}
    assert shown[laptop["id"]] == paused, "the woken poll re-checked; it said nothing new"
    poll.join(15)
    assert poll.reply is not None and poll.reply["job"] is None
