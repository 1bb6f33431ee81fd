"""A case's trace as the server keeps it: each `(attempt, seq)` once, within its bounds,
fenced like a log line, and what it says the case is doing and has spent."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import time_machine
from django.utils import timezone

from runnercli.protocol import TraceEvent
from runners import queue
from runners.models import JobStatus, RunnerJob
from scorecards.services import result_submit, run_cancel
from scorecards.traces.models import CaseTrace
from scorecards.traces.models import TraceEvent as Stored
from scorecards.traces.selectors import case_attempt, trace_page
from scorecards.traces.services import trace_report
from scorecards.traces.steps import current_step
from tests.suites import completed, pair, start, suite

pytestmark = pytest.mark.django_db


def event(seq: int, kind: str = "message", name: str = "assistant", **data: Any) -> TraceEvent:
    return TraceEvent(seq=seq, ts=1_000 + seq, kind=kind, name=name, data=data)  # type: ignore[arg-type]


def events(first: int, last: int) -> list[TraceEvent]:
    return [event(seq, text=f"step {seq}") for seq in range(first, last + 1)]


@pytest.fixture
def leased(alice: Any, workspace: Any) -> dict[str, Any]:
    """One case leased to alice's laptop: the fence of its report calls."""
    suite(alice, cases=1)
    laptop = pair(alice, "laptop")
    start(alice, None)
    (grant,) = queue.job_lease(runner=laptop)
    return {"runner": laptop, "job_id": grant.job.pk, "lease_epoch": grant.job.lease_epoch}


def stored(job_id: int) -> list[int]:
    job = RunnerJob.objects.get(pk=job_id)
    return list(
        Stored.objects.filter(attempt_id=job.current_attempt_id).values_list("seq", flat=True)
    )


def test_a_batch_sent_twice_stores_each_event_once(leased: dict[str, Any]) -> None:
    first = trace_report(**leased, events=events(0, 4))
    assert (first.accepted, first.last_seq) == (True, 4)
    # The reply was lost: the runner sends the batch again, then the next one overlapping it.
    again = trace_report(**leased, events=events(0, 4))
    overlapping = trace_report(**leased, events=events(3, 7))
    assert (again.accepted, again.last_seq) == (True, 4)
    assert overlapping.last_seq == 7
    assert stored(leased["job_id"]) == list(range(8))
    trace = CaseTrace.objects.get()
    assert (trace.kept, trace.dropped, trace.last_seq) == (8, 0, 7)


def test_events_past_a_gap_wait_for_the_ones_before_them(leased: dict[str, Any]) -> None:
    trace_report(**leased, events=events(0, 1))
    ack = trace_report(**leased, events=[*events(2, 3), *events(6, 7)])
    assert ack.last_seq == 3
    assert stored(leased["job_id"]) == [0, 1, 2, 3]
    assert trace_report(**leased, events=events(4, 7)).last_seq == 7
    assert stored(leased["job_id"]) == list(range(8))


def test_a_stale_epoch_and_a_stranger_are_refused_and_store_nothing(
    leased: dict[str, Any], alice: Any, bob: Any, settings: Any
) -> None:
    settings.EVERDICT_MAX_ATTEMPTS = 3
    job = RunnerJob.objects.get(pk=leased["job_id"])
    # The lease lapsed and the desktop leased the job: the laptop's epoch is stale.
    RunnerJob.objects.filter(pk=job.pk).update(
        status=JobStatus.QUEUED, leased_until=timezone.now() - timedelta(seconds=1)
    )
    desktop = pair(alice, "desktop")
    (grant,) = queue.job_lease(runner=desktop)
    stale = trace_report(**leased, events=events(0, 2))
    assert stale.accepted is False and stale.reason.startswith("stale lease")
    assert stale.last_seq == -1
    stranger = trace_report(
        runner=pair(bob, "bobs"),
        job_id=leased["job_id"],
        lease_epoch=grant.job.lease_epoch,
        events=events(0, 2),
    )
    assert (stranger.accepted, stranger.reason) == (False, "unknown job")
    assert Stored.objects.count() == 0
    fresh = trace_report(
        runner=desktop, job_id=grant.job.pk, lease_epoch=grant.job.lease_epoch, events=events(0, 0)
    )
    assert fresh.accepted and fresh.last_seq == 0


def test_a_canceled_case_is_told_so(leased: dict[str, Any], alice: Any) -> None:
    run_id = RunnerJob.objects.get(pk=leased["job_id"]).run_id
    run_cancel(user=alice, run_id=run_id)
    ack = trace_report(**leased, events=events(0, 0))
    assert (ack.accepted, ack.reason) == (False, "canceled")


def test_a_lapsed_lease_is_taken_back_by_its_trace(leased: dict[str, Any]) -> None:
    RunnerJob.objects.filter(pk=leased["job_id"]).update(
        status=JobStatus.QUEUED, leased_until=timezone.now() - timedelta(seconds=5)
    )
    ack = trace_report(**leased, events=events(0, 1))
    assert (ack.accepted, ack.reason, ack.last_seq) == (True, "resumed", 1)
    assert RunnerJob.objects.get(pk=leased["job_id"]).status == JobStatus.LEASED


def test_the_trace_of_a_settled_attempt_is_heard_from_its_runner_within_the_resume_window(
    leased: dict[str, Any], alice: Any, settings: Any
) -> None:
    settings.EVERDICT_RESUME_WINDOW_S = 600
    trace_report(**leased, events=events(0, 2))
    # Its result landed first (a runner restarted after a crash sends both from its spool).
    assert result_submit(**leased, result=completed("hello 0")).accepted
    late = trace_report(**leased, events=events(0, 5))
    assert (late.accepted, late.last_seq) == (True, 5)
    assert stored(leased["job_id"]) == list(range(6))
    other = trace_report(**{**leased, "runner": pair(alice, "desktop")}, events=events(6, 6))
    assert other.accepted is False
    with time_machine.travel(timezone.now() + timedelta(seconds=601)):
        too_late = trace_report(**leased, events=events(6, 6))
    assert too_late.accepted is False and too_late.reason == "job is succeeded"


def test_past_its_bounds_one_event_says_how_many_were_dropped_and_the_case_goes_on(
    leased: dict[str, Any], settings: Any
) -> None:
    settings.EVERDICT_MAX_TRACE_EVENTS = 5
    assert trace_report(**leased, events=events(0, 6)).last_seq == 6
    assert trace_report(**leased, events=events(7, 9)).last_seq == 9
    rows = list(Stored.objects.order_by("seq").values_list("seq", "kind", "data"))
    assert [(seq, kind) for seq, kind, _ in rows] == [
        (0, "message"),
        (1, "message"),
        (2, "message"),
        (3, "message"),
        (4, "dropped"),
    ]
    assert rows[-1][2] == {"message": "… 6 events dropped", "count": 6}
    # The runner's own `dropped` event adds the count it carries.
    marker = TraceEvent(seq=10, ts=2_000, kind="dropped", name="dropped", data={"count": 40})
    trace_report(**leased, events=[marker])
    assert Stored.objects.get(kind="dropped").data["count"] == 46
    trace = CaseTrace.objects.get()
    assert (trace.kept, trace.dropped, trace.last_seq) == (5, 46, 10)
    assert result_submit(**leased, result=completed("hello 0")).accepted


def test_the_byte_bound_cuts_the_trace_too(leased: dict[str, Any], settings: Any) -> None:
    settings.EVERDICT_MAX_TRACE_BYTES = 4_000
    big = [event(seq, text="x" * 1_000) for seq in range(6)]
    trace_report(**leased, events=big)
    trace = CaseTrace.objects.get()
    assert trace.kept == 4 and trace.dropped == 3
    assert trace.bytes <= 4_000
    assert Stored.objects.order_by("seq").last().kind == "dropped"  # type: ignore[union-attr]


def test_text_with_nul_bytes_is_kept(leased: dict[str, Any]) -> None:
    trace_report(**leased, events=[event(0, "tool_result", "Bash", content="a\x00b")])
    assert Stored.objects.get().data == {"content": "a\ufffdb"}


def test_the_trace_says_the_current_step_and_what_was_spent(leased: dict[str, Any]) -> None:
    call = event(0, "tool_call", "Bash", id="t1", input={"command": "npm test"})
    trace_report(**leased, events=[call])
    state = CaseTrace.objects.get().state
    assert current_step(state) == {"label": "Bash `npm test`", "since": 1_000, "open": True}
    result = event(1, "tool_result", "Bash", call_id="t1", is_error=True, duration_ms=1)
    turn = event(2, "usage", "turn", usage={"input_tokens": 10, "output_tokens": 3})
    final = event(
        3,
        "usage",
        "result",
        total_cost_usd=0.25,
        usage={"input_tokens": 100, "output_tokens": 30},
    )
    trace_report(**leased, events=[result, turn, final])
    state = CaseTrace.objects.get().state
    assert current_step(state) == {"label": "done", "since": 1_003, "open": False}
    assert state["totals"] == {
        "tool_calls": 1,
        "tool_errors": 1,
        "input_tokens": 100,
        "output_tokens": 30,
        "cost_usd": 0.25,
        "final": True,
    }


def test_a_page_holds_only_the_events_its_trace_row_covers(
    leased: dict[str, Any], alice: Any
) -> None:
    # A report writes its events and the trace row in one transaction, but a page reads
    # them in two statements: events it finds past the row it read wait for the next page.
    job = RunnerJob.objects.get(pk=leased["job_id"])
    where = case_attempt(user=alice, run_id=job.run_id, key=job.case_key)
    attempt_id = job.current_attempt_id
    assert attempt_id is not None
    assert trace_page(where).events == [] and trace_page(where).trace is None
    early = Stored.objects.create(
        attempt_id=attempt_id, seq=0, ts=1_000, kind="message", name="assistant"
    )
    assert trace_page(where).events == []  # the row the events belong to is not there yet
    early.delete()

    call = event(0, "tool_call", "Bash", id="t1", input={"command": "make"})
    trace_report(**leased, events=[call, event(1)])
    Stored.objects.create(attempt_id=attempt_id, seq=2, ts=1_002, kind="message", name="assistant")

    page = trace_page(where)
    assert [e.seq for e in page.events] == [0, 1] and page.trace is not None
    assert page.trace.last_seq == 1 and not page.more
