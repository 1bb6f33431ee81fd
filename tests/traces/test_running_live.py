"""The run page's running cases through its socket: deltas only — a case is sent when its
step or its newest frame changed, and said gone when it stopped running."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.cache import cache

from runners import queue
from scorecards.live import Watch, run_changes
from scorecards.models import Run
from scorecards.services import result_submit
from scorecards.traces.screens import screen_report
from scorecards.traces.services import trace_report
from tests.runnercli.images import png
from tests.suites import completed, pair, start, suite
from tests.traces.test_trace_services import event

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("blob_dir")]


def running(alice: Any, run: Run, watch: Watch) -> list[dict[str, Any]]:
    messages, _ = run_changes(user=alice, run=Run.objects.get(pk=run.pk), watch=watch)
    return [m for m in messages if m["type"] == "running"]


def test_only_the_cases_whose_step_or_frame_changed_are_sent(alice: Any, workspace: Any) -> None:
    cache.clear()
    suite(alice, cases=2)
    laptop = pair(alice)
    run = start(alice, laptop, concurrency=2)
    grants = queue.job_lease(runner=laptop, max_jobs=2)
    one, two = (
        {"runner": laptop, "job_id": g.job.pk, "lease_epoch": g.job.lease_epoch} for g in grants
    )
    watch = Watch()

    (first,) = running(alice, run, watch)
    assert sorted(c["case"] for c in first["cases"]) == ["c0", "c1"] and first["gone"] == []
    assert all(c["step"] is None and c["frame"] is None for c in first["cases"])
    assert running(alice, run, watch) == []

    call = event(0, "tool_call", "Bash", id="t1", input={"command": "npm test"})
    trace_report(**one, events=[call])
    (stepped,) = running(alice, run, watch)
    assert [(c["case"], c["step"]["label"]) for c in stepped["cases"]] == [
        ("c0", "Bash `npm test`")
    ]
    assert stepped["cases"][0]["step"]["age_ms"] >= 0

    screen_report(**two, media_type="image/png", data=png(), taken_at=5)
    (framed,) = running(alice, run, watch)
    assert [(c["case"], c["frame"]["n"]) for c in framed["cases"]] == [("c1", 0)]
    assert framed["cases"][0]["frame"]["url"].endswith("key=c1&v=0")
    assert running(alice, run, watch) == []

    assert result_submit(**one, result=completed("hello 0")).accepted
    (ended,) = running(alice, run, watch)
    assert ended == {"type": "running", "cases": [], "gone": [one["job_id"]]}
