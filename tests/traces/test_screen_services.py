"""A running case's screen as the server keeps it: the newest frame live (in the cache), a
filmstrip of at most 60 frames per attempt spread evenly over the case (blobs of the job's
workspace, named for the blob GC), only whole PNGs and JPEGs, fenced like every call."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.core.cache import cache
from django.utils import timezone

from core.errors import Invalid
from runners import queue
from runners.models import JobStatus, RunnerJob
from scorecards.blobs.models import Blob
from scorecards.blobs.references import BLOB_REFERENCES, RETENTION
from scorecards.blobs.store import blob_open
from scorecards.services import result_submit
from scorecards.traces.models import CaseScreens, ScreenFrame
from scorecards.traces.screens import FILMSTRIP_FRAMES, live_frame, screen_report
from scorecards.traces.services import trace_report
from tests.runnercli.images import jpeg, png
from tests.suites import completed, pair, start, suite
from tests.traces.test_trace_services import events

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("blob_dir")]


@pytest.fixture
def leased(alice: Any, workspace: Any) -> dict[str, Any]:
    cache.clear()
    suite(alice, cases=1)
    laptop = pair(alice, "laptop")
    start(alice, None)
    (grant,) = queue.job_lease(runner=laptop)
    return {"runner": laptop, "job_id": grant.job.pk, "lease_epoch": grant.job.lease_epoch}


def frame(n: int) -> bytes:
    return png(rgb=(n % 256, n // 256, 7))


def send(leased: dict[str, Any], data: bytes, media_type: str = "image/png", at: int = 0) -> Any:
    return screen_report(**leased, media_type=media_type, data=data, taken_at=at)


def test_a_frame_is_live_at_once_and_the_first_in_the_filmstrip(
    leased: dict[str, Any], workspace: Any
) -> None:
    trace_report(**leased, events=events(0, 4))
    assert send(leased, frame(1), at=1_234).accepted
    live = live_frame(leased["job_id"])
    assert live is not None
    assert (live["n"], live["data"], live["media_type"], live["taken_at"]) == (
        0,
        frame(1),
        "image/png",
        1_234,
    )
    (kept,) = ScreenFrame.objects.all()
    assert (kept.n, kept.taken_at, kept.trace_seq, kept.size) == (0, 1_234, 4, len(frame(1)))
    assert kept.blob.workspace_id == workspace.pk
    with blob_open(kept.blob) as stored:
        assert stored.read() == frame(1)
    assert send(leased, jpeg("two"), media_type="image/jpeg").accepted
    assert live_frame(leased["job_id"])["data"] == jpeg("two")  # type: ignore[index]


@pytest.mark.parametrize(
    ("data", "media_type", "says"),
    [
        (b"GIF89a" + b"\x00" * 40, "image/png", "not a PNG or JPEG"),
        (jpeg("x"), "image/png", "image/jpeg by its first bytes"),
        (png()[:-12], "image/png", "cut short"),
        (png() + b"\x00" * (512 * 1024), "image/png", "at most 524288 bytes"),
    ],
)
def test_what_is_not_a_whole_frame_is_refused_and_nothing_is_kept(
    leased: dict[str, Any], data: bytes, media_type: str, says: str
) -> None:
    with pytest.raises(Invalid, match=says):
        send(leased, data, media_type)
    assert live_frame(leased["job_id"]) is None
    assert not ScreenFrame.objects.exists() and not Blob.objects.exists()
    assert not CaseScreens.objects.exists()


def test_a_stale_epoch_is_refused(leased: dict[str, Any], alice: Any, settings: Any) -> None:
    RunnerJob.objects.filter(pk=leased["job_id"]).update(
        status=JobStatus.QUEUED, leased_until=timezone.now() - timedelta(seconds=1)
    )
    queue.job_lease(runner=pair(alice, "desktop"))
    ack = send(leased, frame(1))
    assert ack.accepted is False and ack.reason.startswith("stale lease")
    assert live_frame(leased["job_id"]) is None and not ScreenFrame.objects.exists()


def test_a_settled_case_takes_no_more_frames(leased: dict[str, Any]) -> None:
    assert result_submit(**leased, result=completed("hello 0")).accepted
    ack = send(leased, frame(1))
    assert (ack.accepted, ack.reason) == (False, "job is succeeded")


def test_the_filmstrip_keeps_at_most_60_frames_spread_over_the_whole_case(
    leased: dict[str, Any],
) -> None:
    said = True  # of the first frame
    for n in range(200):
        ack = send(leased, frame(n), at=n)
        assert ack.accepted
        # What the reply before said of this frame is what the strip did with it.
        assert ScreenFrame.objects.filter(n=n).exists() == said, n
        said = ack.keeps_next
    kept = list(ScreenFrame.objects.order_by("n").values_list("n", flat=True))
    screens = CaseScreens.objects.get()
    assert screens.received == 200 and screens.stride == 4
    assert len(kept) <= FILMSTRIP_FRAMES
    # Every stride-th frame from the first to the last: evenly spaced over the whole case.
    assert kept == list(range(0, 200, 4))
    assert live_frame(leased["job_id"])["n"] == 199  # type: ignore[index]
    # The blob GC sees every frame kept as named.
    named = {blob_id for refs in BLOB_REFERENCES for blob_id in refs()}
    assert set(ScreenFrame.objects.values_list("blob_id", flat=True)) <= named


def test_retention_forgets_the_frames_and_traces_of_old_runs(leased: dict[str, Any]) -> None:
    trace_report(**leased, events=events(0, 2))
    send(leased, frame(1))
    forgotten = sum(forget(timezone.now() + timedelta(days=1)) for forget in RETENTION)
    assert forgotten >= 4
    assert not ScreenFrame.objects.exists()
