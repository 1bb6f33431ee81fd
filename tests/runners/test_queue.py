"""The lease queue's state machine, fencing and claims, with the database alone."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
import time_machine
from django.db import connection
from django.utils import timezone

from runners import queue
from runners.models import AttemptStatus, JobAttempt, JobLogLine, JobStatus, RunnerJob
from runners.services import runner_revoke
from scorecards.models import CaseResult as CaseResultRow
from scorecards.models import RunStatus
from scorecards.services import (
    failure_report,
    result_submit,
    run_cancel,
    scheduler_end_one_lapsed_lease,
    scheduler_expire_one_idle_run,
    scheduler_expire_one_lease,
    scheduler_settle_one_revoked,
)
from tests.suites import completed, pair, start, suite

pytestmark = pytest.mark.django_db


@pytest.fixture
def laptop(alice: Any, workspace: Any) -> Any:
    suite(alice)
    return pair(alice)


def lease_one(runner: Any, **kwargs: Any) -> queue.LeasedJob:
    leased = queue.job_lease(runner=runner, **kwargs)
    assert len(leased) == 1
    return leased[0]


def executing_attempts(job_id: int) -> int:
    return JobAttempt.objects.filter(job_id=job_id, status=AttemptStatus.EXECUTING).count()


def test_it_admits_only_concurrency_jobs_and_admits_the_next_on_settle(
    alice: Any, laptop: Any
) -> None:
    run = start(alice, laptop, concurrency=2)
    statuses = list(run.jobs.order_by("seq").values_list("status", flat=True))
    assert statuses == [JobStatus.QUEUED, JobStatus.QUEUED, JobStatus.PENDING]

    grant = lease_one(laptop)
    assert grant.case_job.case.key == "c0"
    assert "expected" not in grant.case_job.model_dump()["case"]
    ack = result_submit(
        runner=laptop,
        job_id=grant.job.pk,
        lease_epoch=grant.job.lease_epoch,
        result=completed("hello 0\n"),
    )
    assert ack.accepted
    assert run.jobs.get(seq=2).status == JobStatus.QUEUED


def test_a_lease_bumps_the_epoch_and_opens_one_executing_attempt(laptop: Any, alice: Any) -> None:
    start(alice, laptop)
    grant = lease_one(laptop, status="idle")
    job = RunnerJob.objects.get(pk=grant.job.pk)
    assert job.status == JobStatus.LEASED
    assert job.lease_epoch == 1
    assert job.leased_by_id == laptop.pk
    assert job.current_attempt_id == grant.attempt.pk
    assert grant.case_job.attempt_id == grant.attempt.pk
    assert executing_attempts(job.pk) == 1
    assert grant.lease.heartbeat_ms * 3 <= grant.lease.lease_ttl_ms


def test_it_scores_the_result_and_stamps_provenance_on_the_server(alice: Any, laptop: Any) -> None:
    run = start(alice, laptop, concurrency=3)
    outputs = {"c0": "hello 0", "c1": "wrong", "c2": "hello 2"}
    for _ in range(3):
        grant = lease_one(laptop)
        result_submit(
            runner=laptop,
            job_id=grant.job.pk,
            lease_epoch=grant.job.lease_epoch,
            result=completed(outputs[grant.job.case_key] + "\n"),
        )
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    verdicts = dict(CaseResultRow.objects.filter(run=run).values_list("case__key", "verdict"))
    assert verdicts == {"c0": "pass", "c1": "fail", "c2": "pass"}
    row = CaseResultRow.objects.get(run=run, case__key="c0")
    assert row.provenance == {
        "ran_on": "self-hosted",
        "runner": f"{laptop.pk}/laptop",
        "by": "alice",
    }
    assert row.score == 1.0


def test_a_result_cannot_carry_its_own_provenance_or_score(laptop: Any, alice: Any) -> None:
    from pydantic import ValidationError

    from runnercli.protocol import CaseResult

    with pytest.raises(ValidationError):
        CaseResult.model_validate(
            {"status": "completed", "output": "x", "provenance": {"ran_on": "managed"}}
        )
    with pytest.raises(ValidationError):
        CaseResult.model_validate({"status": "completed", "output": "x", "score": 7})


def test_the_same_result_again_is_a_duplicate_and_changes_nothing(alice: Any, laptop: Any) -> None:
    start(alice, laptop)
    grant = lease_one(laptop)
    args = {"runner": laptop, "job_id": grant.job.pk, "lease_epoch": grant.job.lease_epoch}
    assert result_submit(**args, result=completed("hello 0")).accepted
    again = result_submit(**args, result=completed("hello 0"))
    assert again.accepted and again.reason == "duplicate"
    different = result_submit(**args, result=completed("something else"))
    assert not different.accepted
    assert CaseResultRow.objects.filter(case__key="c0").count() == 1


def test_heartbeat_extends_only_the_current_holders_lease(alice: Any, laptop: Any) -> None:
    start(alice, laptop)
    grant = lease_one(laptop)
    before = RunnerJob.objects.get(pk=grant.job.pk).leased_until
    assert before is not None
    with time_machine.travel(timezone.now() + timedelta(seconds=10)):
        ack = queue.job_heartbeat(runner=laptop, job_id=grant.job.pk, lease_epoch=1)
    assert ack.accepted and not ack.cancel
    after = RunnerJob.objects.get(pk=grant.job.pk).leased_until
    assert after is not None and after > before
    stale = queue.job_heartbeat(runner=laptop, job_id=grant.job.pk, lease_epoch=0)
    assert not stale.accepted and "stale" in stale.reason


def test_after_expiry_the_first_runners_calls_are_all_fenced_off(alice: Any, laptop: Any) -> None:
    run = start(alice, laptop)
    first = lease_one(laptop)
    job_id, old_epoch = first.job.pk, first.job.lease_epoch
    with time_machine.travel(timezone.now() + timedelta(seconds=120)):
        assert scheduler_expire_one_lease()
    job = RunnerJob.objects.get(pk=job_id)
    assert job.status == JobStatus.QUEUED
    assert JobAttempt.objects.get(pk=first.attempt.pk).status == AttemptStatus.EXPIRED

    second = lease_one(laptop)
    assert second.job.pk == job_id and second.job.lease_epoch == old_epoch + 1
    stale = {"runner": laptop, "job_id": job_id, "lease_epoch": old_epoch}
    assert not queue.job_heartbeat(**stale).accepted
    assert not queue.job_report_log(**stale, lines=["late"]).accepted
    assert not failure_report(**stale, message="late failure").accepted
    assert not result_submit(**stale, result=completed("hello 0")).accepted
    assert JobLogLine.objects.count() == 0
    assert RunnerJob.objects.get(pk=job_id).status == JobStatus.LEASED
    assert executing_attempts(job_id) == 1

    fresh = {"runner": laptop, "job_id": job_id, "lease_epoch": second.job.lease_epoch}
    assert queue.job_heartbeat(**fresh).accepted
    assert queue.job_report_log(**fresh, lines=["on time"]).accepted
    assert result_submit(**fresh, result=completed("hello 0")).accepted
    ledger = list(JobAttempt.objects.filter(job_id=job_id).values_list("epoch", "status"))
    assert ledger == [(1, AttemptStatus.EXPIRED), (2, AttemptStatus.SUCCEEDED)]
    assert CaseResultRow.objects.get(run=run, case__key="c0").verdict == "pass"


def test_max_attempts_of_expired_leases_fails_the_job_as_an_error(
    alice: Any, laptop: Any, settings: Any
) -> None:
    run = start(alice, laptop)
    now = timezone.now()
    for attempt in range(1, 4):
        with time_machine.travel(now + timedelta(seconds=100 * attempt), tick=False):
            lease_one(laptop)
        with time_machine.travel(now + timedelta(seconds=100 * attempt + 90), tick=False):
            assert scheduler_expire_one_lease()
    # The last attempt's holder may still resume it, for the resume window; then it fails.
    assert run.jobs.get(seq=0).status == JobStatus.QUEUED
    later = now + timedelta(seconds=390 + settings.EVERDICT_RESUME_WINDOW_S)
    with time_machine.travel(later, tick=False):
        assert scheduler_end_one_lapsed_lease()
    job = run.jobs.get(seq=0)
    assert job.status == JobStatus.FAILED
    assert "lease expired after 3 attempts" in job.reason
    result = CaseResultRow.objects.get(run=run, case__key="c0")
    assert result.verdict == "error" and "lease expired" in result.error
    assert (
        list(JobAttempt.objects.filter(job=job).values_list("status", flat=True))
        == [AttemptStatus.EXPIRED] * 3
    )


def test_a_retryable_failure_requeues_and_a_final_one_records_an_error(
    alice: Any, laptop: Any
) -> None:
    run = start(alice, laptop)
    grant = lease_one(laptop)
    ack = failure_report(
        runner=laptop, job_id=grant.job.pk, lease_epoch=1, message="disk full", retryable=True
    )
    assert ack.accepted
    assert RunnerJob.objects.get(pk=grant.job.pk).status == JobStatus.QUEUED
    again = lease_one(laptop)
    failure_report(runner=laptop, job_id=again.job.pk, lease_epoch=2, message="no such program")
    job = RunnerJob.objects.get(pk=grant.job.pk)
    assert job.status == JobStatus.FAILED
    assert CaseResultRow.objects.get(run=run, case__key="c0").error == "no such program"


def test_a_queue_nobody_takes_fails_the_whole_run_with_no_runner(
    alice: Any, laptop: Any, settings: Any
) -> None:
    run = start(alice, laptop, concurrency=1)
    with time_machine.travel(timezone.now() + timedelta(seconds=301)):
        assert scheduler_expire_one_idle_run()
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    assert set(run.jobs.values_list("status", flat=True)) == {JobStatus.FAILED}
    errors = list(CaseResultRow.objects.filter(run=run).values_list("error", flat=True))
    assert len(errors) == 3
    assert all("no_runner" in e and "laptop" in e and "offline" in e for e in errors)


def test_cancel_while_queued_and_while_leased(alice: Any, laptop: Any) -> None:
    run = start(alice, laptop, concurrency=2)
    grant = lease_one(laptop)
    run_cancel(user=alice, run_id=run.pk)
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELED
    assert set(run.jobs.values_list("status", flat=True)) == {JobStatus.CANCELED}
    beat = queue.job_heartbeat(runner=laptop, job_id=grant.job.pk, lease_epoch=1)
    assert (beat.accepted, beat.cancel, beat.reason) == (False, True, "canceled")
    late = result_submit(
        runner=laptop, job_id=grant.job.pk, lease_epoch=1, result=completed("hello 0")
    )
    assert not late.accepted
    assert JobAttempt.objects.get(pk=grant.attempt.pk).status == AttemptStatus.CANCELED
    assert not CaseResultRow.objects.filter(run=run).exists()


def test_revoking_a_runner_ends_its_pinned_jobs_and_requeues_any_jobs(
    alice: Any, laptop: Any
) -> None:
    desk = pair(alice, "desk")
    pinned = start(alice, laptop)
    pinned_grant = lease_one(laptop)
    assert pinned_grant.job.run_id == pinned.pk
    anyrun = start(alice, None)
    any_grant = lease_one(laptop)
    assert any_grant.job.run_id == anyrun.pk

    runner_revoke(owner=alice, runner_id=laptop.pk)
    assert RunnerJob.objects.get(pk=any_grant.job.pk).status == JobStatus.QUEUED
    assert scheduler_settle_one_revoked()
    pinned.refresh_from_db()
    assert pinned.status == RunStatus.FAILED
    assert set(pinned.jobs.values_list("reason", flat=True)) == {"runner revoked"}

    taken = lease_one(desk)
    assert taken.job.pk == any_grant.job.pk and taken.job.lease_epoch == 2
    assert JobAttempt.objects.get(pk=any_grant.attempt.pk).status == AttemptStatus.SUPERSEDED
    assert executing_attempts(taken.job.pk) == 1


def test_claims_respect_required_capabilities(alice: Any, workspace: Any) -> None:
    from tests.suites import ECHO_SPEC

    suite(alice, spec={**ECHO_SPEC, "capabilities": ["claude"]}, name="needs-claude")
    plain = pair(alice, "plain", ["python"])
    smart = pair(alice, "smart", ["python", "claude"])
    start(alice, None, harness="needs-claude", dataset="needs-claude", concurrency=3)
    assert queue.job_lease(runner=plain) == []
    assert len(queue.job_lease(runner=smart)) == 1
    # Capabilities reported with a lease update the stored set.
    assert len(queue.job_lease(runner=plain, capabilities=["python", "claude"])) == 1
    plain.refresh_from_db()
    assert plain.capabilities == ["claude", "python"]


def test_a_claim_looks_past_candidates_the_runner_cannot_run(
    alice: Any, workspace: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The oldest jobs need what the runner lacks: it still gets the one it can run, whole,
    however many candidates come before it (on SQLite they are looked at in batches)."""
    from runners.queue import claim
    from tests.suites import ECHO_SPEC

    monkeypatch.setattr(claim, "_SQLITE_CANDIDATE_BATCH", 3)
    suite(alice, spec={**ECHO_SPEC, "capabilities": ["claude"]}, name="needs-claude", cases=7)
    suite(alice, name="plain", cases=2)
    plain = pair(alice, "plain", ["python"])
    smart = pair(alice, "smart", ["python", "claude"])
    start(alice, None, harness="needs-claude", dataset="needs-claude", concurrency=7)
    run = start(alice, None, harness="plain", dataset="plain", concurrency=2)
    leased = queue.job_lease(runner=plain, max_jobs=8)
    assert [(g.job.run_id, g.job.case_key) for g in leased] == [(run.pk, "c0"), (run.pk, "c1")]
    assert leased[0].case_job.harness.spec.command == ECHO_SPEC["command"]
    assert [g.job.case_key for g in queue.job_lease(runner=smart, max_jobs=3)] == [
        "c0",
        "c1",
        "c2",
    ]


def test_a_job_of_each_workspace_reaches_alices_one_runner(alice: Any, laptop: Any) -> None:
    from scorecards.services import workspace_create

    workspace_create(user=alice, slug="beta", name="Beta")
    suite(alice, "beta", cases=1)
    run_a = start(alice, laptop, "acme")
    run_b = start(alice, laptop, "beta")
    leased = queue.job_lease(runner=laptop, max_jobs=10)
    assert {g.case_job.workspace for g in leased} == {"acme", "beta"}
    for grant in leased:
        result_submit(
            runner=laptop,
            job_id=grant.job.pk,
            lease_epoch=grant.job.lease_epoch,
            result=completed(f"hello {grant.job.case_key[1:]}"),
        )
    assert CaseResultRow.objects.get(run=run_b).run.workspace.slug == "beta"
    assert CaseResultRow.objects.filter(run=run_a).count() == 1


def test_bob_cannot_lease_or_touch_alices_jobs(alice: Any, bob: Any, laptop: Any) -> None:
    start(alice, laptop)
    bobs = pair(bob, "bobs")
    assert queue.job_lease(runner=bobs) == []
    grant = lease_one(laptop)
    foreign = {"runner": bobs, "job_id": grant.job.pk, "lease_epoch": 1}
    assert queue.job_heartbeat(**foreign).reason == "unknown job"
    assert not result_submit(**foreign, result=completed("hello 0")).accepted
    assert not failure_report(**foreign, message="x").accepted


def test_a_released_lease_is_claimable_again_at_once(alice: Any, laptop: Any) -> None:
    start(alice, laptop)
    grant = lease_one(laptop)
    assert queue.job_release(runner=laptop, job_id=grant.job.pk, lease_epoch=1)
    job = RunnerJob.objects.get(pk=grant.job.pk)
    assert job.status == JobStatus.QUEUED and job.attempts == 0
    assert lease_one(laptop).job.pk == grant.job.pk


@pytest.mark.skipif(connection.vendor != "postgresql", reason="EXPLAIN plans are PostgreSQL's")
def test_the_claim_uses_the_partial_claim_index(alice: Any, laptop: Any) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SET enable_seqscan = off")
        plan = queue.claim_plan(runner=laptop)[0]
        cursor.execute("RESET enable_seqscan")
    assert "runnerjob_claim" in plan
    assert "runners_runnerjob_pkey" not in plan


@pytest.mark.skipif(connection.vendor != "postgresql", reason="EXPLAIN plans are PostgreSQL's")
def test_the_claim_a_connection_keeps_prepared_uses_the_partial_claim_index(
    alice: Any, laptop: Any
) -> None:
    """The claim runs prepared: its generic plan, made for any parameters, must still match
    the partial index's `status = 'queued'`, which a status given as a parameter cannot."""
    start(alice, laptop)
    plan = queue.claim_plan(runner=laptop, generic=True)[0]
    assert "runnerjob_claim" in plan, plan


JOBS_TABLE = "'runners_runnerjob'::regclass"


def forget_the_jobs_statistics() -> None:
    """As on a new install: the jobs' table never analysed (undone with the test's
    transaction)."""
    set_jobs_counted_by_statistics(-1)
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM pg_statistic WHERE starelid = {JOBS_TABLE}")


def set_jobs_counted_by_statistics(rows: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE pg_class SET reltuples = %s WHERE oid = {JOBS_TABLE}", [rows])


def jobs_counted_by_statistics() -> float:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT reltuples FROM pg_class WHERE oid = {JOBS_TABLE}")
        return float(cursor.fetchone()[0])


@pytest.mark.skipif(connection.vendor != "postgresql", reason="EXPLAIN plans are PostgreSQL's")
@pytest.mark.parametrize("cases", [60, 1000], ids=["parked-with-the-run", "parked-by-copy"])
def test_a_large_start_gathers_the_jobs_statistics_so_the_runs_load_reads_by_status(
    alice: Any, laptop: Any, cases: int, django_capture_on_commit_callbacks: Any
) -> None:
    """On statistics from before the run, the planner ties the (run, seq) index with (run,
    status, seq): the run's load and its admission read every job of the run for each batch
    settled. A start of more jobs than the statistics can take (autovacuum's rule) gathers
    them again at its commit, whichever way its jobs were parked, and the two statements
    read the run by status on whatever the statistics say: most jobs pending (at the start)
    as most jobs done (late in the run, when reading in (run, seq) order costs most)."""
    suite(alice, cases=cases, name="wide")
    forget_the_jobs_statistics()
    with django_capture_on_commit_callbacks(execute=True):
        run = start(alice, laptop, harness="wide", dataset="wide", concurrency=8)
    assert jobs_counted_by_statistics() == cases
    assert_read_by_status(run.pk)
    jobs = RunnerJob.objects.filter(run=run)
    jobs.filter(seq__lt=cases - 20).update(status=JobStatus.SUCCEEDED)
    jobs.filter(seq__gte=cases - 20, seq__lt=cases - 12).update(status=JobStatus.QUEUED)
    assert queue.analyse_if_outgrown(cases)
    assert_read_by_status(run.pk)


def assert_read_by_status(run_id: int) -> None:
    with connection.cursor() as cursor:
        # The table is a few pages here: no scan of a whole table, as of a large one.
        cursor.execute("SET enable_seqscan = off")
        plans = [queue.run_load_plan(run_id), queue.admit_plan(run_id, 8)]
        cursor.execute("RESET enable_seqscan")
    for plan in plans:
        assert "runnerjob_run_seq_unique" not in plan, plan
        assert "runnerjob_pending" in plan or "runnerjob_run_status" in plan, plan


@pytest.mark.skipif(connection.vendor != "postgresql", reason="ANALYZE is PostgreSQL's here")
def test_a_small_start_or_a_table_the_statistics_already_know_is_not_analysed(
    alice: Any, laptop: Any, django_capture_on_commit_callbacks: Any
) -> None:
    forget_the_jobs_statistics()
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        start(alice, laptop)
    # A start of 3 jobs registers only its wake-up.
    assert len(callbacks) == 1
    assert jobs_counted_by_statistics() == -1
    # Autovacuum's rule: more than 50 jobs and a tenth of those the statistics count.
    set_jobs_counted_by_statistics(10000)
    assert not queue.analyse_if_outgrown(1050)
    assert jobs_counted_by_statistics() == 10000
    assert queue.analyse_if_outgrown(1051)
    assert jobs_counted_by_statistics() == RunnerJob.objects.count()


@pytest.mark.skipif(connection.vendor != "postgresql", reason="SKIP LOCKED is PostgreSQL's")
@pytest.mark.django_db(transaction=True)
def test_concurrent_claims_never_lease_a_job_twice(alice: Any, workspace: Any) -> None:
    suite(alice, cases=200)
    runners = [pair(alice, f"r{i}") for i in range(6)]
    start(alice, None, concurrency=200)
    taken: list[int] = []
    lock = threading.Lock()

    def worker(runner: Any) -> None:
        from django.db import connection as conn

        try:
            while True:
                leased = queue.job_lease(runner=runner, max_jobs=3)
                if not leased:
                    break
                with lock:
                    taken.extend(g.job.pk for g in leased)
        finally:
            conn.close()

    threads = [threading.Thread(target=worker, args=(r,)) for r in runners]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(taken) == 200
    assert len(set(taken)) == 200
    assert RunnerJob.objects.filter(status=JobStatus.LEASED).count() == 200


def test_an_operator_requeue_fences_off_the_old_holder(alice: Any, laptop: Any) -> None:
    from scorecards.services import operator_job_fail, operator_job_requeue

    run = start(alice, laptop, concurrency=2)
    grant = lease_one(laptop)
    assert operator_job_requeue(job_id=grant.job.pk, operator=alice)
    assert not queue.job_heartbeat(runner=laptop, job_id=grant.job.pk, lease_epoch=1).accepted
    assert JobAttempt.objects.get(pk=grant.attempt.pk).status == AttemptStatus.SUPERSEDED
    again = lease_one(laptop)
    assert again.job.pk == grant.job.pk and again.job.lease_epoch == 3
    assert operator_job_fail(job_id=again.job.pk, operator=alice)
    assert not operator_job_fail(job_id=again.job.pk, operator=alice)
    row = CaseResultRow.objects.get(run=run, case__key=again.job.case_key)
    assert row.verdict == "error" and "operator alice" in row.error


def test_admin_actions_requeue_and_fail_jobs(admin_client: Any, alice: Any, laptop: Any) -> None:
    run = start(alice, laptop, concurrency=3)
    grant = lease_one(laptop)
    reply = admin_client.post(
        "/admin/runners/runnerjob/",
        {"action": "requeue_jobs", "_selected_action": [grant.job.pk]},
        follow=True,
    )
    assert reply.status_code == 200
    assert RunnerJob.objects.get(pk=grant.job.pk).status == JobStatus.QUEUED
    ids = list(run.jobs.values_list("pk", flat=True))
    admin_client.post("/admin/runners/runnerjob/", {"action": "fail_jobs", "_selected_action": ids})
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    assert CaseResultRow.objects.filter(run=run, verdict="error").count() == 3


def test_nul_bytes_in_output_and_logs_are_stored_not_fatal(alice: Any, laptop: Any) -> None:
    run = start(alice, laptop)
    grant = lease_one(laptop)
    assert queue.job_report_log(
        runner=laptop, job_id=grant.job.pk, lease_epoch=1, lines=["bin\x00ary"]
    ).accepted
    ack = result_submit(
        runner=laptop, job_id=grant.job.pk, lease_epoch=1, result=completed("hello 0\x00")
    )
    assert ack.accepted
    assert CaseResultRow.objects.get(run=run).output == "hello 0\ufffd"
    assert JobLogLine.objects.get().line == "bin\ufffdary"


def test_a_runner_revoked_while_parked_cannot_claim(alice: Any, laptop: Any) -> None:
    stale = type(laptop).objects.get(pk=laptop.pk)  # the row a parked long-poll holds
    runner_revoke(owner=alice, runner_id=laptop.pk)
    start_any = pair(alice, "other")
    start(alice, None)
    assert queue.job_lease(runner=stale) == []
    assert len(queue.job_lease(runner=start_any)) == 1
