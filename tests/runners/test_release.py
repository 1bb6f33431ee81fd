"""Plan limits are not failures: a runner hands a job back without spending an attempt, and
may pause itself until its plan allows it to work again."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import time_machine
from django.test import Client
from django.utils import timezone

from runners import queue
from runners.models import AttemptStatus, JobAttempt, JobStatus, Runner, RunnerJob
from scorecards.models import RunEvent
from scorecards.selectors.waiting import run_waiting
from scorecards.services import lease_hand_back
from tests.suites import pair, start, suite

pytestmark = pytest.mark.django_db


@pytest.fixture
def laptop(alice: Any, workspace: Any) -> Any:
    suite(alice)
    return pair(alice)


def test_a_released_job_goes_back_to_the_queue_without_spending_an_attempt(
    alice: Any, laptop: Any
) -> None:
    run = start(alice, None)
    desk = pair(alice, "desk")
    grant = queue.job_lease(runner=laptop)[0]

    ack = lease_hand_back(runner=laptop, job_id=grant.job.pk, lease_epoch=1, reason="stopping")

    assert ack.accepted
    job = RunnerJob.objects.get(pk=grant.job.pk)
    assert (job.status, job.attempts, job.leased_by_id) == (JobStatus.QUEUED, 0, None)
    attempt = JobAttempt.objects.get(pk=grant.attempt.pk)
    assert attempt.status == AttemptStatus.SUPERSEDED
    assert attempt.reason == "released by its runner: stopping"
    assert Runner.objects.get(pk=laptop.pk).paused_until is None
    # Fenced like every call after a lease: the same release again is refused.
    again = lease_hand_back(runner=laptop, job_id=grant.job.pk, lease_epoch=1, reason="again")
    assert not again.accepted and "stale" in again.reason
    taken = queue.job_lease(runner=desk)[0]
    assert taken.job.pk == job.pk and taken.job.attempts == 1 and taken.job.lease_epoch == 2
    assert RunEvent.objects.filter(run=run, message__contains="no attempt spent").exists()


def test_a_release_with_a_pause_stops_the_runner_leasing_until_then(
    alice: Any, laptop: Any, client: Client
) -> None:
    run = start(alice, laptop, concurrency=2)
    now = timezone.now().replace(hour=14, minute=0, second=0, microsecond=0)
    with time_machine.travel(now, tick=False):
        grant = queue.job_lease(runner=laptop)[0]
        until = now + timedelta(minutes=64)
        ack = lease_hand_back(
            runner=laptop,
            job_id=grant.job.pk,
            lease_epoch=1,
            reason="rate-limited",
            paused_until=until,
        )
        assert ack.accepted
        runner = Runner.objects.get(pk=laptop.pk)
        assert (runner.paused_until, runner.pause_reason) == (until, "rate-limited")
        assert queue.job_lease(runner=laptop, max_jobs=5) == []
        assert run_waiting(run) == "waiting: runner laptop paused: rate-limited until 15:04"
        client.force_login(alice)
        roster = client.get("/account/").content.decode()
        assert "paused: rate-limited until 15:04" in roster
        page = client.get(f"/runs/{run.pk}/").content.decode()
        assert "waiting: runner laptop paused: rate-limited until 15:04" in page
    with time_machine.travel(until + timedelta(seconds=1), tick=False):
        assert run_waiting(run) == ""
        again = queue.job_lease(runner=laptop, max_jobs=5)
        assert grant.job.pk in {g.job.pk for g in again}
    assert RunnerJob.objects.get(pk=grant.job.pk).attempts == 1


def test_a_pause_is_at_most_a_week_and_one_in_the_past_pauses_nothing(
    alice: Any, laptop: Any
) -> None:
    start(alice, laptop, concurrency=2)
    first, second = queue.job_lease(runner=laptop, max_jobs=2)
    now = timezone.now()
    lease_hand_back(
        runner=laptop,
        job_id=first.job.pk,
        lease_epoch=1,
        reason="past",
        paused_until=now - timedelta(minutes=1),
    )
    assert Runner.objects.get(pk=laptop.pk).paused_until is None
    lease_hand_back(
        runner=laptop,
        job_id=second.job.pk,
        lease_epoch=1,
        reason="weekly limit",
        paused_until=now + timedelta(days=30),
    )
    paused = Runner.objects.get(pk=laptop.pk).paused_until
    assert paused is not None and paused <= timezone.now() + timedelta(days=7)


def test_a_lapsed_holder_may_still_hand_its_job_back(alice: Any, laptop: Any) -> None:
    from scorecards.services import scheduler_expire_one_lease

    start(alice, laptop)
    grant = queue.job_lease(runner=laptop)[0]
    with time_machine.travel(timezone.now() + timedelta(seconds=70), tick=False):
        assert scheduler_expire_one_lease()
    ack = lease_hand_back(runner=laptop, job_id=grant.job.pk, lease_epoch=1, reason="stopping")
    assert (ack.accepted, ack.reason) == (True, "resumed")
    job = RunnerJob.objects.get(pk=grant.job.pk)
    assert (job.status, job.attempts, job.leased_by_id) == (JobStatus.QUEUED, 0, None)
    assert JobAttempt.objects.get(pk=grant.attempt.pk).status == AttemptStatus.SUPERSEDED
