"""One vote of a judge-graded case: which judge job answers it, and what it answered."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from scorecards.models import TEXT_CHARS


class JudgementState(models.TextChoices):
    DUE = "due"
    # The judge answered `{pass, score, reason}`.
    READABLE = "readable"
    # Its answer could not be read, twice (the judge job is retried once).
    UNREADABLE = "unreadable"
    # The judge job itself ended without an answer (out of attempts, no runner, refused).
    FAILED = "failed"


class Judgement(models.Model):
    # Indexed by judgement_unique_vote, which leads with it.
    result = models.ForeignKey(
        "scorecards.CaseResult", on_delete=models.CASCADE, related_name="judgements", db_index=False
    )
    vote = models.PositiveSmallIntegerField()
    # The judge job answering this vote now; a retry points it at a new one.
    job = models.ForeignKey(
        "runners.RunnerJob", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    tries = models.PositiveSmallIntegerField(default=1)
    # The harness spec whose judge grader asked (the run's own, or another version's when
    # its outputs are regraded): its retry and `judged_by` come from it.
    spec = models.JSONField(default=dict, blank=True)
    state = models.CharField(
        max_length=12, choices=JudgementState.choices, default=JudgementState.DUE
    )
    passed = models.BooleanField(null=True, blank=True)
    score = models.FloatField(null=True, blank=True)
    reason = models.CharField(max_length=TEXT_CHARS, blank=True)
    # The end of the judge's answer, kept to show why it could not be read.
    raw_tail = models.TextField(blank=True)
    judged_by = models.JSONField(default=dict, blank=True)
    usage = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    settled_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        # Created as a table of the scorecards app: the move kept it (and its rows).
        db_table = "scorecards_judgement"
        ordering = ["result_id", "vote"]
        constraints = [
            models.UniqueConstraint(fields=["result", "vote"], name="judgement_unique_vote"),
        ]

    def __str__(self) -> str:
        return f"vote {self.vote} on {self.result_id} ({self.state})"
