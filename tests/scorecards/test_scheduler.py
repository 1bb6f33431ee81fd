"""The scheduler survives a poison row and shares the work with other schedulers: a row whose
handling raises is set aside (counted, its error kept, held for a while) while the others are
handled in the same pass; on PostgreSQL a run another scheduler holds is skipped, not waited
for."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
import time_machine
from django.db import connection, transaction
from django.utils import timezone

from runners import metrics, queue
from runners.models import JobStatus, RunnerJob
from scorecards.management.commands.scheduler import process_pass
from scorecards.models import Run, RunStatus
from scorecards.services import scheduler_expire_one_lease
from tests.suites import pair, start, suite


def failures(step: str) -> float:
    return metrics.SWEEP_FAILURES.labels(step=step)._value.get()


@pytest.mark.django_db
def test_a_row_that_raises_is_set_aside_and_the_others_are_handled_in_the_same_pass(
    alice: Any, workspace: Any
) -> None:
    suite(alice)
    laptop = pair(alice)
    poisoned = start(alice, laptop, concurrency=2)
    healthy = start(alice, laptop, concurrency=2)
    # A row that no longer matches its case (say, edited by hand): recording its result raises.
    ghost = poisoned.jobs.get(seq=0)
    RunnerJob.objects.filter(pk=ghost.pk).update(case_key="ghost")
    before = failures("expire_idle_run")
    later = timezone.now() + timedelta(seconds=400)

    with time_machine.travel(later, tick=False):
        process_pass()

    healthy.refresh_from_db()
    assert healthy.status == RunStatus.FAILED
    assert set(healthy.jobs.values_list("reason", flat=True)) == {"no_runner"}
    held = list(poisoned.jobs.filter(status=JobStatus.QUEUED).order_by("seq"))
    assert len(held) == 2
    for job in held:
        assert job.sweep_failures == 1
        assert "expire_idle_run: DoesNotExist" in job.sweep_error
        assert job.sweep_held_until is not None and job.sweep_held_until > later
    assert failures("expire_idle_run") == before + 2
    # Held: the next passes leave them alone until the hold ends, then try again, holding
    # them longer each time.
    with time_machine.travel(later + timedelta(seconds=10), tick=False):
        process_pass()
    assert RunnerJob.objects.get(pk=ghost.pk).sweep_failures == 1
    with time_machine.travel(later + timedelta(seconds=40), tick=False):
        process_pass()
    again = RunnerJob.objects.get(pk=ghost.pk)
    assert again.sweep_failures == 2
    assert again.sweep_held_until is not None
    assert again.sweep_held_until >= later + timedelta(seconds=40 + 59)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="SKIP LOCKED is PostgreSQL's")
@pytest.mark.django_db(transaction=True)
def test_a_run_locked_by_another_scheduler_is_skipped_not_waited_for(
    alice: Any, workspace: Any
) -> None:
    suite(alice)
    laptop = pair(alice)
    busy, free = start(alice, laptop), start(alice, laptop)
    leased = {g.job.run_id: g.job.pk for g in queue.job_lease(runner=laptop, max_jobs=2)}
    holding, release = threading.Event(), threading.Event()

    def other_scheduler() -> None:
        from django.db import connection as own

        try:
            with transaction.atomic():
                Run.objects.select_for_update().get(pk=busy.pk)
                holding.set()
                release.wait(30)
        finally:
            own.close()

    holder = threading.Thread(target=other_scheduler)
    holder.start()
    try:
        assert holding.wait(10)
        handled: list[bool] = []

        def step() -> None:
            from django.db import connection as own

            try:
                with time_machine.travel(timezone.now() + timedelta(seconds=70), tick=False):
                    handled.append(scheduler_expire_one_lease())
            finally:
                own.close()

        stepper = threading.Thread(target=step)
        stepper.start()
        stepper.join(10)
        assert not stepper.is_alive(), "the step waited for the run another scheduler holds"
        assert handled == [True]
        assert RunnerJob.objects.get(pk=leased[free.pk]).status == JobStatus.QUEUED
        assert RunnerJob.objects.get(pk=leased[busy.pk]).status == JobStatus.LEASED
    finally:
        release.set()
        holder.join(10)
