"""The trace and the filmstrip of each attempt of a case.

A trace's events are stored once per `(attempt, seq)`: a batch sent twice (a dropped
connection, a resume, a runner restarted from its spool) stores nothing twice. Its counters
live on one `CaseTrace` row per attempt, written under the job's row lock, which every
fenced call of the job takes first: concurrent reports of one case never overshoot its bounds.
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone


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
        indexes = [models.Index(fields=["job"], name="casetrace_job")]

    def __str__(self) -> str:
        return f"trace of attempt {self.pk} ({self.kept} events)"


class TraceEvent(models.Model):
    """One event of an attempt's trace, as the runner numbered it."""

    attempt = models.ForeignKey("runners.JobAttempt", on_delete=models.CASCADE, related_name="+")
    seq = models.PositiveIntegerField()
    ts = models.BigIntegerField(help_text="Epoch milliseconds.")
    kind = models.CharField(max_length=16)
    name = models.CharField(max_length=100, blank=True)
    data = models.JSONField(default=dict, blank=True)
    size = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["attempt_id", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["attempt", "seq"], name="traceevent_attempt_seq")
        ]

    def __str__(self) -> str:
        return f"{self.seq} {self.kind} {self.name}"
