"""One person's look at one result: what they said, and what the machine had said."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from scorecards.models import TEXT_CHARS


class ReviewAction(models.TextChoices):
    PASS = "pass"  # a person's verdict: pass
    FAIL = "fail"  # a person's verdict: fail
    CONFIRM = "confirm"  # the machine's verdict stands: agreement, not an override
    NOTE = "note"  # a note, nothing decided


# What takes a result out of the queue.
DECIDING = (ReviewAction.PASS, ReviewAction.FAIL, ReviewAction.CONFIRM)


class Review(models.Model):
    # Indexed by review_result_action, which leads with it.
    result = models.ForeignKey(
        "scorecards.CaseResult", on_delete=models.CASCADE, related_name="reviews", db_index=False
    )
    by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    action = models.CharField(max_length=10, choices=ReviewAction.choices)
    # What the machine (grader or judges) said when the person looked.
    machine_verdict = models.CharField(max_length=10, blank=True)
    note = models.CharField(max_length=TEXT_CHARS, blank=True)
    at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["result", "action"], name="review_result_action")]

    def __str__(self) -> str:
        return f"{self.action} on {self.result_id}"
