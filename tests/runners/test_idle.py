"""The idle timeout runs off runner activity, not off queue age: a busy, paused or sleeping
runner protects every job queued behind it; an absent one still ends the run `no_runner`,
named with why."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
import time_machine
from django.utils import timezone

from runners import queue
from runners.models import Runner, RunnerJob
from runners.services import runner_hello
from scorecards.models import CaseResult as CaseResultRow
from scorecards.models import RunStatus
from scorecards.services import (
    lease_hand_back,
    lease_heartbeat,
    scheduler_expire_one_idle_run,
    scheduler_expire_one_lease,
    workspace_create,
)
from tests.suites import pair, start, suite

pytestmark = pytest.mark.django_db

TIMEOUT_S = 300


@pytest.fixture
def laptop(alice: Any, workspace: Any) -> Any:
    suite(alice, cases=4)
    return pair(alice)


def at(moment: datetime) -> Any:
    return time_machine.travel(moment, tick=False)


def errors_of(run: Any) -> list[str]:
    return list(CaseResultRow.objects.filter(run=run).values_list("error", flat=True))


def test_a_busy_runner_protects_every_job_queued_behind_it_in_any_run_and_workspace(
    alice: Any, laptop: Any
) -> None:
    workspace_create(user=alice, slug="beta", name="Beta")
    suite(alice, "beta", cases=2)
    now = timezone.now()
    with at(now):
        first = start(alice, laptop, concurrency=2)
        second = start(alice, None, "beta")
        grant = queue.job_lease(runner=laptop)[0]  # one slot: one case at a time
    # A 15-minute case, heartbeating: the cases behind it wait as long as it works.
    for second_ in range(40, 900, 40):
        with at(now + timedelta(seconds=second_)):
            assert lease_heartbeat(runner=laptop, job_id=grant.job.pk, lease_epoch=1).accepted
            assert not scheduler_expire_one_idle_run()
    for run in (first, second):
        run.refresh_from_db()
        assert run.status != RunStatus.FAILED and not errors_of(run)


def test_an_unexpired_lease_protects_the_queue_even_when_presence_lags(
    alice: Any, laptop: Any
) -> None:
    now = timezone.now()
    with at(now):
        start(alice, laptop, concurrency=2)
        grant = queue.job_lease(runner=laptop)[0]
    with at(now + timedelta(seconds=TIMEOUT_S + 50)):
        RunnerJob.objects.filter(pk=grant.job.pk).update(leased_until=timezone.now())
        Runner.objects.filter(pk=laptop.pk).update(last_seen_at=now)
        assert laptop.pk in set(queue.runners_active().values_list("pk", flat=True))
        assert not queue.jobs_idle().exists()


def test_a_runner_gone_silent_fails_the_run_no_runner_naming_it_offline(
    alice: Any, laptop: Any
) -> None:
    now = timezone.now()
    with at(now):
        run = start(alice, laptop, concurrency=2)
        runner_hello(runner=laptop, protocol=2, capabilities=[])  # seen now, then gone
    with at(now + timedelta(seconds=TIMEOUT_S - 10)):
        assert not scheduler_expire_one_idle_run()
    with at(now + timedelta(seconds=TIMEOUT_S + 10)):
        assert scheduler_expire_one_idle_run()
    run.refresh_from_db()
    errors = errors_of(run)
    assert len(errors) == 4
    assert all("no_runner" in e and "laptop" in e and "offline (last seen" in e for e in errors)


def test_a_runner_asleep_protects_its_run_for_the_resume_window_then_is_named_asleep(
    alice: Any, laptop: Any, settings: Any
) -> None:
    settings.EVERDICT_RESUME_WINDOW_S = 1200
    now = timezone.now()
    with at(now):
        run = start(alice, laptop, concurrency=2)
        queue.job_lease(runner=laptop)
    with at(now + timedelta(seconds=70)):
        assert scheduler_expire_one_lease()  # the lease lapses: the laptop slept
    with at(now + timedelta(seconds=1200)):
        assert not scheduler_expire_one_idle_run()
    with at(now + timedelta(seconds=1300)):
        assert scheduler_expire_one_idle_run()
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    errors = errors_of(run)
    assert len(errors) == 4
    assert all("no_runner" in e and "laptop" in e and "asleep" in e for e in errors)
    assert "its lease of case c0 lapsed" in errors[0]


def test_a_paused_runner_protects_its_queue_and_is_named_paused_when_it_never_came_back(
    alice: Any, laptop: Any
) -> None:
    now = timezone.now()
    with at(now):
        run = start(alice, laptop, concurrency=2)
        grant = queue.job_lease(runner=laptop)[0]
        until = now + timedelta(hours=2)
        ack = lease_hand_back(
            runner=laptop,
            job_id=grant.job.pk,
            lease_epoch=1,
            reason="rate-limited",
            paused_until=until,
        )
        assert ack.accepted
    with at(until - timedelta(seconds=10)):
        assert queue.job_lease(runner=laptop, max_jobs=4) == []
        assert not scheduler_expire_one_idle_run()
    with at(until + timedelta(seconds=TIMEOUT_S - 10)):
        assert not scheduler_expire_one_idle_run()
    with at(until + timedelta(seconds=TIMEOUT_S + 10)):
        assert scheduler_expire_one_idle_run()
    errors = errors_of(run)
    assert len(errors) == 4
    assert all("paused: rate-limited until" in e and "not seen since" in e for e in errors)


def test_a_runner_without_the_capabilities_does_not_protect_the_queue(
    alice: Any, workspace: Any
) -> None:
    from tests.suites import ECHO_SPEC

    suite(alice, spec={**ECHO_SPEC, "capabilities": ["claude"]}, name="agent")
    pair(alice, "smart", ["python", "claude"])
    plain = pair(alice, "plain", ["python"])
    now = timezone.now()
    with at(now):
        run = start(alice, None, harness="agent", dataset="agent")
    # `plain` polls all along, but could never take it; `smart` was never seen.
    with at(now + timedelta(seconds=TIMEOUT_S + 10)):
        queue.job_lease(runner=plain)
        assert scheduler_expire_one_idle_run()
    error = errors_of(run)[0]
    assert "smart (#" in error and "offline (last seen never)" in error
    assert "plain (#" in error and "online but lacks claude" in error


def test_which_runners_are_active(alice: Any, laptop: Any, settings: Any) -> None:
    settings.EVERDICT_RESUME_WINDOW_S = 600
    now = timezone.now()
    old = now - timedelta(seconds=TIMEOUT_S + 1)
    desk, ghost = pair(alice, "desk"), pair(alice, "ghost")
    Runner.objects.update(last_seen_at=old)
    Runner.objects.filter(pk=laptop.pk).update(last_seen_at=now)
    Runner.objects.filter(pk=desk.pk).update(paused_until=now + timedelta(minutes=5))
    start(alice, ghost)
    with at(old):
        queue.job_lease(runner=ghost)
    with at(old + timedelta(seconds=70)):
        assert scheduler_expire_one_lease()  # a lapsed lease, within the window
    Runner.objects.filter(pk=ghost.pk).update(last_seen_at=old)
    assert set(queue.runners_active(now).values_list("label", flat=True)) == {
        "laptop",
        "desk",
        "ghost",
    }
    later = now + timedelta(seconds=900)
    assert set(queue.runners_active(later).values_list("label", flat=True)) == set()


def test_a_runner_on_battery_holding_nothing_is_offline_equivalent_and_named_on_battery(
    alice: Any, laptop: Any
) -> None:
    now = timezone.now()
    with at(now):
        run = start(alice, laptop, concurrency=2)
    # It keeps saying hello (the roster says why), but leases nothing: that protects nothing.
    for second_ in range(0, TIMEOUT_S + 60, 30):
        with at(now + timedelta(seconds=second_)):
            runner_hello(runner=laptop, protocol=3, capabilities=[], paused_reason="on battery")
    laptop.refresh_from_db()
    assert laptop.paused_reason == "on battery"
    with at(now + timedelta(seconds=TIMEOUT_S + 60)):
        assert scheduler_expire_one_idle_run()
    errors = errors_of(run)
    assert len(errors) == 4
    assert all("no_runner" in e and "paused: laptop is on battery" in e for e in errors), errors


def test_a_runner_on_battery_still_holding_work_protects_the_queue_like_a_plan_pause(
    alice: Any, laptop: Any
) -> None:
    now = timezone.now()
    with at(now):
        start(alice, laptop, concurrency=2)
        grant = queue.job_lease(runner=laptop)[0]
    for second_ in range(30, TIMEOUT_S + 120, 30):
        with at(now + timedelta(seconds=second_)):
            runner_hello(runner=laptop, protocol=3, capabilities=[], paused_reason="on battery")
            assert lease_heartbeat(runner=laptop, job_id=grant.job.pk, lease_epoch=1).accepted
            assert not scheduler_expire_one_idle_run()
    # Back on AC: seen counts again.
    runner_hello(runner=laptop, protocol=3, capabilities=[], paused_reason="")
    laptop.refresh_from_db()
    assert laptop.paused_reason == ""
