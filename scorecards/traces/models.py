"""The trace and the filmstrip of each attempt of a case.

A trace's events are stored once per `(attempt, seq)`: a batch sent twice (a dropped
connection, a resume, a runner restarted from its spool) stores nothing twice. Its counters
live on one `CaseTrace` row per attempt, written under the job's row lock, which every
fenced call of the job takes first: concurrent reports of one case never overshoot its bounds.
"""

from __future__ import annotations

from datetime import datetime

from django.db import models
from django.db.models import QuerySet
from django.utils import timezone

from scorecards.blobs.references import blob_references, retention


class CaseTrace(models.Model):
    """One attempt's trace: how far it is stored, what its bounds left out, and what it says
    the case is doing now (its open tool calls) and has spent (tokens, cost)."""

    attempt = models.OneToOneField(
        "runners.JobAttempt", on_delete=models.CASCADE, related_name="+", primary_key=True
    )
    job = models.ForeignKey("runners.RunnerJob", on_delete=models.CASCADE, related_name="+")
    run = models.ForeignKey("scorecards.Run", on_delete=models.CASCADE, related_name="traces")
    # The highest seq received with every one before it (stored, or counted as dropped).
    last_seq = models.BigIntegerField(default=-1)
    kept = models.PositiveIntegerField(default=0)
    bytes = models.PositiveBigIntegerField(default=0)
    dropped = models.PositiveIntegerField(default=0)
    # The seq of the one `dropped` event that says how many the bounds left out.
    marker_seq = models.BigIntegerField(null=True, blank=True)
    first_ts = models.BigIntegerField(null=True, blank=True)
    last_ts = models.BigIntegerField(null=True, blank=True)
    # `steps.TraceState`: open tool calls, the last activity, the totals.
    state = models.JSONField(default=dict, blank=True)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        # Created as tables of the scorecards app: the move kept them (and their rows).
        db_table = "scorecards_casetrace"
        indexes = [models.Index(fields=["job"], name="casetrace_job")]

    def __str__(self) -> str:
        return f"trace of attempt {self.pk} ({self.kept} events)"


class TraceEvent(models.Model):
    """One event of an attempt's trace, as the runner numbered it."""

    # Indexed by traceevent_attempt_seq, which leads with it.
    attempt = models.ForeignKey(
        "runners.JobAttempt", on_delete=models.CASCADE, related_name="+", db_index=False
    )
    seq = models.PositiveIntegerField()
    ts = models.BigIntegerField(help_text="Epoch milliseconds.")
    kind = models.CharField(max_length=16)
    name = models.CharField(max_length=100, blank=True)
    data = models.JSONField(default=dict, blank=True)
    size = models.PositiveIntegerField(default=0)

    class Meta:
        db_table = "scorecards_traceevent"
        ordering = ["attempt_id", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["attempt", "seq"], name="traceevent_attempt_seq")
        ]

    def __str__(self) -> str:
        return f"{self.seq} {self.kind} {self.name}"


class CaseScreens(models.Model):
    """One attempt's frames: how many came, and which the filmstrip keeps — every
    `stride`-th, the stride doubling each time the strip is full, so that the frames kept
    stay spread evenly over the whole case."""

    attempt = models.OneToOneField(
        "runners.JobAttempt", on_delete=models.CASCADE, related_name="+", primary_key=True
    )
    job = models.ForeignKey("runners.RunnerJob", on_delete=models.CASCADE, related_name="+")
    run = models.ForeignKey("scorecards.Run", on_delete=models.CASCADE, related_name="+")
    received = models.PositiveIntegerField(default=0)
    stride = models.PositiveIntegerField(default=1)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "scorecards_casescreens"

    def __str__(self) -> str:
        return f"screens of attempt {self.pk} ({self.received} received)"


class ScreenFrame(models.Model):
    """A frame the filmstrip keeps: the `n`-th its attempt sent, a blob of the workspace."""

    # Indexed by screenframe_attempt_n, which leads with it.
    attempt = models.ForeignKey(
        "runners.JobAttempt", on_delete=models.CASCADE, related_name="+", db_index=False
    )
    n = models.PositiveIntegerField()
    taken_at = models.BigIntegerField(help_text="Epoch milliseconds, as the runner saw it.")
    received_at = models.DateTimeField(default=timezone.now)
    blob = models.ForeignKey("blobs.Blob", on_delete=models.PROTECT, related_name="+")
    media_type = models.CharField(max_length=20)
    size = models.PositiveIntegerField()
    # The trace's last seq when the frame came: the step the frame opens the timeline at.
    trace_seq = models.BigIntegerField(default=-1)

    class Meta:
        db_table = "scorecards_screenframe"
        ordering = ["attempt_id", "n"]
        constraints = [
            models.UniqueConstraint(fields=["attempt", "n"], name="screenframe_attempt_n")
        ]

    def __str__(self) -> str:
        return f"frame {self.n} of attempt {self.attempt_id}"


@blob_references
def _named_by_frames() -> QuerySet[ScreenFrame, int]:
    return ScreenFrame.objects.values_list("blob_id", flat=True)


@retention
def _old_frames_and_traces(before: datetime) -> int:
    """Forget the filmstrips and traces of runs created before `before` (the frames' blobs
    go with the GC)."""
    attempts = CaseTrace.objects.filter(run__created_at__lt=before).values("pk")
    events, _ = TraceEvent.objects.filter(attempt_id__in=attempts).delete()
    traces, _ = CaseTrace.objects.filter(run__created_at__lt=before).delete()
    filmed = CaseScreens.objects.filter(run__created_at__lt=before).values("pk")
    frames, _ = ScreenFrame.objects.filter(attempt_id__in=filmed).delete()
    CaseScreens.objects.filter(run__created_at__lt=before).delete()
    return events + traces + frames
