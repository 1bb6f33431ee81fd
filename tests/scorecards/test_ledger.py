"""The attempt ledger stays whole on every path that ends a job: at most one attempt of a job
executes, always the one the job names and only while the job is leased; none once the job
has ended."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

import pytest
import time_machine
from django.utils import timezone

from runners import queue
from runners.models import AttemptStatus, JobAttempt, JobStatus, RunnerJob
from runners.services import runner_revoke
from scorecards.services import (
    failure_report,
    lease_hand_back,
    lease_heartbeat,
    operator_job_fail,
    operator_job_requeue,
    result_submit,
    run_cancel,
    scheduler_end_one_lapsed_lease,
    scheduler_expire_one_idle_run,
    scheduler_expire_one_lease,
    scheduler_settle_one_revoked,
)
from tests.suites import completed, pair, start, suite

pytestmark = pytest.mark.django_db


def assert_ledger_whole(after: str) -> None:
    for job in RunnerJob.objects.all():
        executing = list(
            JobAttempt.objects.filter(job=job, status=AttemptStatus.EXECUTING).values_list(
                "pk", flat=True
            )
        )
        where = f"after {after}: job {job.pk} ({job.status})"
        assert len(executing) <= 1, f"{where} has {len(executing)} executing attempts"
        if job.is_terminal or job.status != JobStatus.LEASED:
            assert not executing, f"{where} still has an executing attempt"
        if executing:
            assert executing == [job.current_attempt_id], f"{where} names another attempt"
    if not RunnerJob.objects.exists():
        raise AssertionError("no job to check")


class Clock:
    """Time moving forward as the walk needs it."""

    def __init__(self) -> None:
        self.now: datetime = timezone.now()

    @contextmanager
    def after(self, seconds: float) -> Iterator[None]:
        self.now += timedelta(seconds=seconds)
        with time_machine.travel(self.now, tick=False):
            yield


def lease(runner: Any) -> queue.LeasedJob:
    grants = queue.job_lease(runner=runner)
    assert grants, f"{runner} leased nothing"
    return grants[0]


def test_every_path_that_ends_a_job_leaves_the_ledger_whole(
    alice: Any, workspace: Any, settings: Any
) -> None:
    settings.EVERDICT_MAX_ATTEMPTS = 2
    settings.EVERDICT_RESUME_WINDOW_S = 600
    suite(alice, cases=2)
    clock = Clock()
    laptop, desk = pair(alice, "laptop"), pair(alice, "desk")

    def fence(grant: queue.LeasedJob, runner: Any = laptop) -> dict[str, Any]:
        return {"runner": runner, "job_id": grant.job.pk, "lease_epoch": grant.job.lease_epoch}

    # A result.
    with clock.after(1):
        start(alice, laptop)
        grant = lease(laptop)
        assert result_submit(**fence(grant), result=completed("hello 0")).accepted
    assert_ledger_whole("a result")

    # A final failure.
    with clock.after(1):
        grant = lease(laptop)
        assert failure_report(**fence(grant), message="no such program").accepted
    assert_ledger_whole("a final failure")

    # A retryable failure, then out of attempts.
    with clock.after(1):
        run = start(alice, laptop)
        grant = lease(laptop)
        assert failure_report(**fence(grant), message="flaky", retryable=True).accepted
    assert_ledger_whole("a retryable failure")
    with clock.after(1):
        grant = lease(laptop)
        assert failure_report(**fence(grant), message="flaky", retryable=True).accepted
    assert_ledger_whole("a retryable failure out of attempts")
    assert RunnerJob.objects.get(pk=grant.job.pk).status == JobStatus.FAILED

    # Lease expiry, a resume, then the last attempt's expiry past the resume window.
    with clock.after(1):
        run_cancel(user=alice, run_id=run.pk)
        run = start(alice, laptop)
        grant = lease(laptop)
    with clock.after(70):
        assert scheduler_expire_one_lease()
    assert_ledger_whole("a lease expiry")
    with clock.after(1):
        assert lease_heartbeat(**fence(grant)).resumed
    assert_ledger_whole("a resume")
    with clock.after(70):
        assert scheduler_expire_one_lease()
        grant = lease(laptop)
    assert_ledger_whole("a lease after an expiry")
    with clock.after(70):
        assert scheduler_expire_one_lease()
    assert_ledger_whole("the last attempt's expiry")
    with clock.after(700):
        assert scheduler_end_one_lapsed_lease()
    assert_ledger_whole("the end of the resume window")

    # Cancel: a leased job and a queued one.
    with clock.after(1):
        run = start(alice, laptop, concurrency=2)
        lease(laptop)
        run_cancel(user=alice, run_id=run.pk)
    assert_ledger_whole("a cancel")

    # A hand-back (a plan limit), then an operator's requeue and failure.
    with clock.after(1):
        run = start(alice, laptop)
        grant = lease(laptop)
        assert lease_hand_back(**fence(grant), reason="rate-limited").accepted
    assert_ledger_whole("a release")
    with clock.after(1):
        grant = lease(laptop)
        assert operator_job_requeue(job_id=grant.job.pk, operator=alice)
    assert_ledger_whole("an operator's requeue")
    with clock.after(1):
        grant = lease(laptop)
        assert operator_job_fail(job_id=grant.job.pk, operator=alice)
    assert_ledger_whole("an operator's failure")

    # A revoked runner: its `self:any` job requeued, then canceled; its pinned job ended.
    with clock.after(1):
        anyrun = start(alice, None)
        pinned = start(alice, desk)
        lease(desk)
        lease(desk)
        runner_revoke(owner=alice, runner_id=desk.pk)
    assert_ledger_whole("a revoke's requeue")
    with clock.after(1):
        assert scheduler_settle_one_revoked()
        run_cancel(user=alice, run_id=anyrun.pk)
    assert_ledger_whole("a revoked runner's pinned jobs ended, and a cancel after its requeue")
    assert RunnerJob.objects.filter(run=pinned, status=JobStatus.FAILED).exists()

    # No runner: the idle timeout, after a revoke's requeue.
    with clock.after(1):
        run_cancel(user=alice, run_id=run.pk)
        start(alice, None)
        grant = lease(laptop)
        runner_revoke(owner=alice, runner_id=laptop.pk)
    assert_ledger_whole("a second revoke's requeue")
    with clock.after(settings.EVERDICT_QUEUE_IDLE_TIMEOUT_S + 10):
        assert scheduler_expire_one_idle_run()
    assert_ledger_whole("the idle timeout after a revoke's requeue")
    assert RunnerJob.objects.get(pk=grant.job.pk).reason == "no_runner"
