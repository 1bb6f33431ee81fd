"""A running case's screen: its newest frame live, and a filmstrip of at most 60 per attempt.

The live frame is kept in the cache only (the run page shows it while the case runs; several
replicas share it through Redis). The filmstrip keeps frames as blobs of the job's workspace,
spread evenly over the whole case: every `stride`-th frame received is kept, and when the strip
is full every other frame is dropped and the stride doubles. A frame is checked by its first
bytes and its end marker: anything else is refused and nothing is stored.
"""

from __future__ import annotations

from typing import Any

from django.core.cache import cache
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from core.errors import Invalid
from runnercli.protocol import MAX_SCREEN_BYTES, BlobRef, ScreenAck
from runnercli.protocol.images import is_whole, media_type
from runners import metrics
from runners.models import Runner, RunnerJob
from runners.queue.fence import refusal
from runners.queue.rows import locked_job
from scorecards.blobs.services import blob_held, blob_open, blob_store
from scorecards.models import Run
from scorecards.traces.models import CaseScreens, CaseTrace, ScreenFrame
from scorecards.traces.services import fence_open

FILMSTRIP_FRAMES = 60
# The live frame outlives a case that stopped sending by this much, at most.
LIVE_FRAME_TTL_S = 600


def live_key(job_id: int) -> str:
    return f"everdict:screen:{job_id}"


def live_frame(job_id: int) -> dict[str, Any] | None:
    """The job's newest frame as the cache holds it: `{attempt, n, media_type, data,
    taken_at}`."""
    frame: dict[str, Any] | None = cache.get(live_key(job_id))
    return frame


def live_frames(job_ids: list[int]) -> dict[int, dict[str, Any]]:
    """The newest frames of these jobs the cache holds, by job id (one round trip)."""
    held = cache.get_many([live_key(job_id) for job_id in job_ids])
    return {job_id: held[live_key(job_id)] for job_id in job_ids if live_key(job_id) in held}


def check_frame(declared: str, data: bytes) -> None:
    """Refuse what is not a whole PNG or JPEG of the declared type, or is too big."""
    if len(data) > MAX_SCREEN_BYTES:
        raise Invalid(f"A frame is at most {MAX_SCREEN_BYTES} bytes; this one is {len(data)}.")
    found = media_type(data)
    if found is None:
        raise Invalid("The frame is not a PNG or JPEG (by its first bytes).")
    if found != declared:
        raise Invalid(f"The frame is {found} by its first bytes, not {declared}.")
    if not is_whole(data, found):
        raise Invalid(f"The frame is cut short: a {found} without its end marker.")


def _thin(screens: CaseScreens) -> None:
    """Drop every other frame of a full strip; the stride doubles."""
    doubled = screens.stride * 2
    kept = ScreenFrame.objects.filter(attempt_id=screens.pk)
    kept.annotate(over=F("n") % doubled).exclude(over=0).delete()
    screens.stride = doubled


def _keeps(screens: CaseScreens, n: int) -> bool:
    """Whether the strip keeps the `n`-th frame (thinning it first when it is full)."""
    if n % screens.stride:
        return False
    if ScreenFrame.objects.filter(attempt_id=screens.pk).count() >= FILMSTRIP_FRAMES:
        _thin(screens)
    return n % screens.stride == 0


def _filmstrip(job: RunnerJob, n: int, data: bytes, declared: str, taken_at: int) -> None:
    assert job.current_attempt_id is not None
    workspace_id = Run.objects.filter(pk=job.run_id).values_list("workspace_id", flat=True)[0]
    blob = blob_store(workspace=workspace_id, data=data, media_type=declared)
    trace_seq = (
        CaseTrace.objects.filter(pk=job.current_attempt_id).values_list("last_seq", flat=True)
    ).first()
    ScreenFrame.objects.create(
        attempt_id=job.current_attempt_id,
        n=n,
        taken_at=taken_at,
        blob=blob,
        media_type=declared,
        size=len(data),
        trace_seq=-1 if trace_seq is None else trace_seq,
    )


def screen_report(
    *,
    runner: Runner,
    job_id: int,
    lease_epoch: int,
    media_type: str,
    data: bytes | None,
    taken_at: int,
    blob: BlobRef | None = None,
) -> ScreenAck:
    """Take the case's newest frame (its bytes, or a blob of the job's workspace holding
    them): live at once, and into the filmstrip when it keeps it; say whether it will keep
    the next one."""
    frame = _uploaded(job_id, blob) if blob is not None else (data or b"")
    check_frame(media_type, frame)
    now = timezone.now()
    with transaction.atomic():
        job = locked_job(job_id)
        reason = fence_open(job, runner, lease_epoch, now, settled=False)
        if job is None or reason is None:
            refused = refusal(job, runner, lease_epoch)
            metrics.fenced("report_case_screen", refused)
            return ScreenAck(accepted=False, reason=refused)
        screens, _ = CaseScreens.objects.get_or_create(
            attempt_id=job.current_attempt_id, defaults={"job_id": job.pk, "run_id": job.run_id}
        )
        n = screens.received
        screens.received += 1
        if _keeps(screens, n):
            _filmstrip(job, n, frame, media_type, taken_at)
        screens.updated_at = now
        screens.save()
        keeps_next = _will_keep(screens, n + 1)
    live: dict[str, Any] = {"attempt": job.current_attempt_id, "n": n, "data": frame}
    live |= {"media_type": media_type, "taken_at": taken_at}
    cache.set(live_key(job_id), live, LIVE_FRAME_TTL_S)
    return ScreenAck(accepted=True, reason=reason, keeps_next=keeps_next)


def _will_keep(screens: CaseScreens, n: int) -> bool:
    """Whether `_keeps` will keep the `n`-th frame, as the strip stands now."""
    if n % screens.stride:
        return False
    full = ScreenFrame.objects.filter(attempt_id=screens.pk).count() >= FILMSTRIP_FRAMES
    return not full or n % (screens.stride * 2) == 0


def _uploaded(job_id: int, ref: BlobRef) -> bytes:
    """The bytes of a frame uploaded as a blob of the job's workspace (Invalid when it does
    not hold it, or it is over a frame's size)."""
    if ref.size > MAX_SCREEN_BYTES:
        raise Invalid(f"A frame is at most {MAX_SCREEN_BYTES} bytes; this one is {ref.size}.")
    workspace_id = RunnerJob.objects.filter(pk=job_id).values_list("run__workspace_id", flat=True)
    held = blob_held(workspace=workspace_id.first() or 0, sha256=ref.sha256, size=ref.size)
    if held is None:
        raise Invalid(f"The frame's blob {ref.sha256} was not uploaded: PUT it first.")
    with blob_open(held) as handle:
        return bytes(handle.read(ref.size + 1))
