"""Presence: coming online is written at once; refreshes of online runners are batched."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.core.cache import cache
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from runners.models import Runner
from runners.presence import (
    presence_writer,
    runner_statuses,
    runner_touch,
    runner_touch_deferred,
)
from runners.wakeup import housekeeping_executor
from tests.suites import pair

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def writer_running() -> Iterator[None]:
    """The process's presence writer running on an event loop of its own, as under daphne."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    async def start() -> None:
        presence_writer.ensure_started()

    asyncio.run_coroutine_threadsafe(start(), loop).result(5)
    try:
        yield
    finally:

        async def stop() -> None:
            task = presence_writer._task
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(stop(), loop).result(5)
        # The writer's thread keeps its database connection, as in a server: close it so the
        # test database can be dropped.
        housekeeping_executor().submit(connections.close_all).result(5)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()


@pytest.fixture
def short_lived(alice: Any, writer_running: None, settings: Any) -> Runner:
    """A runner whose status lines live 2 s, under a running presence writer."""
    settings.EVERDICT_STATUS_TTL_S = 2
    return Runner.objects.get(pk=pair(alice, label="desk").pk)


def seen(runner: Any) -> Any:
    return Runner.objects.get(pk=runner.pk).last_seen_at


def test_refreshes_of_online_runners_join_one_batched_write(
    alice: Any, writer_running: None
) -> None:
    polling = [pair(alice, label=f"desk-{i}") for i in range(5)]
    a_while_ago = timezone.now() - timedelta(seconds=20)  # online, due for a refresh
    Runner.objects.filter(pk__in=[r.pk for r in polling]).update(last_seen_at=a_while_ago)
    newcomer = pair(alice, label="newcomer")

    rows = list(Runner.objects.filter(pk__in=[r.pk for r in polling]))
    with CaptureQueriesContext(connection) as queries:
        for runner in rows:
            runner_touch(runner=runner)
    assert len(queries) == 0, "refreshes of online runners wait for the batched write"
    assert all(seen(r) == a_while_ago for r in polling)

    runner_touch(runner=Runner.objects.get(pk=newcomer.pk))
    assert seen(newcomer) is not None, "a runner coming online is written at once"

    give_up = time.monotonic() + 5
    while time.monotonic() < give_up and any(seen(r) == a_while_ago for r in polling):
        time.sleep(0.1)
    assert all(seen(r) > a_while_ago for r in polling)
    assert all(seen(r) >= timezone.now() - timedelta(seconds=5) for r in polling)


def test_without_a_running_writer_a_refresh_is_written_at_once(alice: Any) -> None:
    desk = pair(alice, label="desk")
    a_while_ago = timezone.now() - timedelta(seconds=20)
    Runner.objects.filter(pk=desk.pk).update(last_seen_at=a_while_ago)
    runner_touch(runner=Runner.objects.get(pk=desk.pk))
    assert seen(desk) > a_while_ago


def test_a_recently_seen_runner_is_not_written_again(alice: Any) -> None:
    desk = pair(alice, label="desk")
    runner_touch(runner=Runner.objects.get(pk=desk.pk))
    first = seen(desk)
    with CaptureQueriesContext(connection) as queries:
        runner_touch(runner=Runner.objects.get(pk=desk.pk))
    assert seen(desk) == first
    assert [q for q in queries if q["sql"].startswith("UPDATE")] == []


def test_an_unchanged_status_line_is_only_kept_alive_in_the_batched_write(
    short_lived: Runner,
) -> None:
    runner = short_lived
    runner_touch(runner=runner, status="idle")
    assert runner_statuses([runner.pk]) == {runner.pk: "idle"}, "a new line is written at once"

    cache.delete(f"everdict:runner-status:{runner.pk}")  # to see whether it is written again
    with CaptureQueriesContext(connection) as queries:
        assert runner_touch_deferred(runner=runner, status="idle")
    assert len(queries) == 0
    assert runner_statuses([runner.pk]) == {}, "repeating the line writes nothing now"

    time.sleep(1.1)  # half its lifetime: written again, with the writer's next batch
    assert runner_touch_deferred(runner=runner, status="idle")
    give_up = time.monotonic() + 5
    while time.monotonic() < give_up and not runner_statuses([runner.pk]):
        time.sleep(0.1)
    assert runner_statuses([runner.pk]) == {runner.pk: "idle"}

    assert not runner_touch_deferred(runner=runner, status="running case 1")
    runner_touch(runner=runner, status="running case 1")
    assert runner_statuses([runner.pk]) == {runner.pk: "running case 1"}, "a change shows at once"


def test_a_line_kept_alive_never_lands_over_a_newer_one(short_lived: Runner) -> None:
    runner = short_lived
    runner_touch(runner=runner, status="running 1 job")
    time.sleep(1.1)  # half its lifetime: a repeat is queued for the writer's next batch
    assert runner_touch_deferred(runner=runner, status="running 1 job")
    # The runner pauses before that batch is written: its roster line says so, and stays.
    runner_touch(runner=runner, status="paused until 10:30 — Claude plan limit")
    time.sleep(1.5)  # past the writer's next batch
    assert runner_statuses([runner.pk]) == {runner.pk: "paused until 10:30 — Claude plan limit"}


def test_a_runner_coming_online_is_not_deferred(alice: Any, writer_running: None) -> None:
    desk = pair(alice, label="desk")
    Runner.objects.filter(pk=desk.pk).update(last_seen_at=None)
    assert not runner_touch_deferred(runner=Runner.objects.get(pk=desk.pk), status="idle")
