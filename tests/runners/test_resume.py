"""Resume, not rerun: a lease that lapsed (the runner slept, the network or the database was
away longer than the lease) is taken back by its holder's next call, unless another runner
leased the job meanwhile; a refused late result is kept as a shadow on its attempt."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
import time_machine
from django.utils import timezone

from runners import queue
from runners.models import AttemptStatus, JobAttempt, JobLogLine, JobStatus, RunnerJob
from scorecards.models import CaseResult as CaseResultRow
from scorecards.models import RunEvent
from scorecards.selectors.ledger import shadow_summary
from scorecards.services import (
    failure_report,
    lease_heartbeat,
    result_submit,
    run_cancel,
    scheduler_end_one_lapsed_lease,
    scheduler_expire_one_lease,
)
from tests.suites import completed, pair, start, suite

pytestmark = pytest.mark.django_db


@pytest.fixture
def laptop(alice: Any, workspace: Any) -> Any:
    suite(alice)
    return pair(alice)


def lease_one(runner: Any) -> queue.LeasedJob:
    leased = queue.job_lease(runner=runner)
    assert len(leased) == 1
    return leased[0]


def expire(at: Any) -> None:
    """The scheduler's pass at `at`: the silent lease lapses."""
    with time_machine.travel(at, tick=False):
        assert scheduler_expire_one_lease()


def test_expiry_keeps_the_epoch_and_the_holder_and_a_heartbeat_takes_the_lease_back(
    alice: Any, laptop: Any
) -> None:
    start(alice, laptop)
    grant = lease_one(laptop)
    now = timezone.now()
    expire(now + timedelta(seconds=70))
    job = RunnerJob.objects.get(pk=grant.job.pk)
    assert (job.status, job.lease_epoch, job.leased_by_id) == (JobStatus.QUEUED, 1, laptop.pk)
    assert JobAttempt.objects.get(pk=grant.attempt.pk).status == AttemptStatus.EXPIRED

    with time_machine.travel(now + timedelta(seconds=130), tick=False):
        beat = lease_heartbeat(runner=laptop, job_id=job.pk, lease_epoch=1)
    assert (beat.accepted, beat.resumed, beat.cancel) == (True, True, False)
    job.refresh_from_db()
    assert (job.status, job.lease_epoch, job.attempts) == (JobStatus.LEASED, 1, 1)
    attempt = JobAttempt.objects.get(pk=grant.attempt.pk)
    assert attempt.status == AttemptStatus.EXECUTING and attempt.ended_at is None
    assert attempt.resumes == 1 and attempt.resumed_at is not None
    # The gap runs from the moment the lease lapsed (its deadline) to the resume.
    assert 65_000 <= attempt.gap_ms <= 75_000
    assert RunEvent.objects.filter(message__contains="resumed, not rerun").exists()
    # Its next heartbeat is an ordinary one.
    again = queue.job_heartbeat(runner=laptop, job_id=job.pk, lease_epoch=1)
    assert again.accepted and not again.resumed


def test_the_holders_late_result_takes_the_lease_back_and_is_accepted(
    alice: Any, laptop: Any
) -> None:
    run = start(alice, laptop)
    grant = lease_one(laptop)
    expire(timezone.now() + timedelta(seconds=70))

    ack = result_submit(
        runner=laptop, job_id=grant.job.pk, lease_epoch=1, result=completed("hello 0")
    )

    assert (ack.accepted, ack.reason) == (True, "resumed")
    row = CaseResultRow.objects.get(run=run, case__key="c0")
    assert row.verdict == "pass" and row.attempt_id == grant.attempt.pk
    attempt = JobAttempt.objects.get(pk=grant.attempt.pk)
    assert (attempt.status, attempt.resumes) == (AttemptStatus.SUCCEEDED, 1)
    assert list(JobAttempt.objects.filter(job_id=grant.job.pk).values_list("epoch", flat=True)) == [
        1
    ]
    again = result_submit(
        runner=laptop, job_id=grant.job.pk, lease_epoch=1, result=completed("hello 0")
    )
    assert (again.accepted, again.reason) == (True, "duplicate")


def test_a_lapsed_holders_log_lines_and_failure_take_the_lease_back_too(
    alice: Any, laptop: Any
) -> None:
    run = start(alice, laptop, concurrency=2)
    first, second = lease_one(laptop), lease_one(laptop)
    now = timezone.now()
    with time_machine.travel(now + timedelta(seconds=70), tick=False):
        assert scheduler_expire_one_lease() and scheduler_expire_one_lease()

    logged = queue.job_report_log(
        runner=laptop, job_id=first.job.pk, lease_epoch=1, lines=["still going"]
    )
    assert (logged.accepted, logged.reason) == (True, "resumed")
    assert RunnerJob.objects.get(pk=first.job.pk).status == JobStatus.LEASED
    assert JobLogLine.objects.get(job_id=first.job.pk).line == "still going"

    failed = failure_report(
        runner=laptop, job_id=second.job.pk, lease_epoch=1, message="tool crashed"
    )
    assert (failed.accepted, failed.reason) == (True, "resumed")
    assert JobAttempt.objects.get(pk=second.attempt.pk).status == AttemptStatus.FAILED
    row = CaseResultRow.objects.get(run=run, case__key=second.job.case_key)
    assert row.verdict == "error" and row.error == "tool crashed"


def test_another_runner_may_lease_it_meanwhile_then_the_late_holder_is_refused_and_kept(
    alice: Any, laptop: Any
) -> None:
    desk = pair(alice, "desk")
    anyrun = start(alice, None)
    grant = lease_one(laptop)
    expire(timezone.now() + timedelta(seconds=70))
    taken = lease_one(desk)
    assert taken.job.pk == grant.job.pk and taken.job.lease_epoch == 2

    beat = lease_heartbeat(runner=laptop, job_id=grant.job.pk, lease_epoch=1)
    assert not beat.accepted and not beat.resumed and "stale" in beat.reason
    late = result_submit(
        runner=laptop, job_id=grant.job.pk, lease_epoch=1, result=completed("hello 0")
    )

    assert not late.accepted
    assert late.reason.startswith("stale lease") and late.reason.endswith(queue.KEPT)
    attempt = JobAttempt.objects.get(pk=grant.attempt.pk)
    assert attempt.status == AttemptStatus.EXPIRED
    kept: Any = attempt.shadow_result
    assert kept["output"] == "hello 0" and attempt.shadow_at is not None
    assert "stale lease" in attempt.shadow_reason
    assert not CaseResultRow.objects.filter(run=anyrun).exists()
    assert shadow_summary(attempt) == "late result from laptop, attempt 1 (expired): would pass"
    # The successor's result counts, the shadow never does.
    assert result_submit(
        runner=desk, job_id=grant.job.pk, lease_epoch=2, result=completed("wrong")
    ).accepted
    assert CaseResultRow.objects.get(run=anyrun).verdict == "fail"


def test_after_the_last_attempt_only_its_holder_may_resume_it_within_the_window(
    alice: Any, laptop: Any, settings: Any
) -> None:
    settings.EVERDICT_MAX_ATTEMPTS = 1
    desk = pair(alice, "desk")
    run = start(alice, None)
    grant = lease_one(laptop)
    now = timezone.now()
    expire(now + timedelta(seconds=70))
    # Its attempts are spent: nobody else may claim it, not even the holder as a new lease.
    with time_machine.travel(now + timedelta(seconds=80), tick=False):
        assert [g.job.pk for g in queue.job_lease(runner=desk, max_jobs=5)] != [grant.job.pk]
        assert grant.job.pk not in {g.job.pk for g in queue.job_lease(runner=laptop, max_jobs=5)}
    window = settings.EVERDICT_RESUME_WINDOW_S
    with time_machine.travel(now + timedelta(seconds=window - 10), tick=False):
        assert not scheduler_end_one_lapsed_lease()
        ack = result_submit(
            runner=laptop, job_id=grant.job.pk, lease_epoch=1, result=completed("hello 0")
        )
    assert (ack.accepted, ack.reason) == (True, "resumed")
    assert CaseResultRow.objects.get(run=run, case__key="c0").verdict == "pass"


def test_past_the_window_the_last_attempt_ends_lease_expired_and_a_late_result_is_kept(
    alice: Any, laptop: Any, settings: Any
) -> None:
    settings.EVERDICT_MAX_ATTEMPTS = 1
    run = start(alice, laptop)
    grant = lease_one(laptop)
    now = timezone.now()
    expire(now + timedelta(seconds=70))
    later = now + timedelta(seconds=70 + settings.EVERDICT_RESUME_WINDOW_S)
    with time_machine.travel(later, tick=False):
        assert scheduler_end_one_lapsed_lease()
        late = result_submit(
            runner=laptop, job_id=grant.job.pk, lease_epoch=1, result=completed("hello 0")
        )
    job = RunnerJob.objects.get(pk=grant.job.pk)
    assert job.status == JobStatus.FAILED and job.reason == "lease expired after 1 attempts"
    row = CaseResultRow.objects.get(run=run, case__key="c0")
    assert row.verdict == "error" and "lease expired" in row.error
    assert not late.accepted and late.reason.endswith(queue.KEPT)
    assert JobAttempt.objects.get(pk=grant.attempt.pk).shadow_result is not None


def test_attempts_are_counted_per_lease_not_per_expiry(alice: Any, laptop: Any) -> None:
    start(alice, laptop)
    grant = lease_one(laptop)
    now = timezone.now()
    for hop in range(1, 6):
        expire(now + timedelta(seconds=100 * hop))
        with time_machine.travel(now + timedelta(seconds=100 * hop + 10), tick=False):
            assert lease_heartbeat(runner=laptop, job_id=grant.job.pk, lease_epoch=1).resumed
    job = RunnerJob.objects.get(pk=grant.job.pk)
    assert (job.status, job.attempts, job.lease_epoch) == (JobStatus.LEASED, 1, 1)
    attempt = JobAttempt.objects.get(pk=grant.attempt.pk)
    assert attempt.resumes == 5 and attempt.status == AttemptStatus.EXECUTING


def test_a_shadow_is_kept_within_its_bound_and_says_it_was_cut(
    alice: Any, laptop: Any, settings: Any
) -> None:
    settings.EVERDICT_SHADOW_MAX_BYTES = 4096
    start(alice, laptop)
    desk = pair(alice, "desk")
    grant = lease_one(laptop)
    run_cancel(user=alice, run_id=grant.job.run_id)
    late = result_submit(
        runner=laptop, job_id=grant.job.pk, lease_epoch=1, result=completed("x" * 100_000)
    )
    assert not late.accepted and late.reason == f"canceled — {queue.KEPT}"
    attempt = JobAttempt.objects.get(pk=grant.attempt.pk)
    kept: Any = attempt.shadow_result
    assert len(json.dumps(kept).encode()) <= 4096
    assert kept["output"].startswith("xxx")
    assert "output cut from 100000 to" in attempt.shadow_reason
    assert "EVERDICT_SHADOW_MAX_BYTES" in attempt.shadow_reason
    assert shadow_summary(attempt).endswith("would fail (judged on a cut output)")
    # Another runner's result for that epoch is not kept on the laptop's attempt.
    assert not result_submit(
        runner=desk, job_id=grant.job.pk, lease_epoch=1, result=completed("y")
    ).accepted
    assert JobAttempt.objects.get(pk=grant.attempt.pk).shadow_result == kept
