"""A member's request for a running case's files, bound to the lease it was asked under."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils import timezone

from scorecards.blobs.references import blob_references


class FsOp(models.TextChoices):
    LIST = "list"
    READ = "read"


class CaseFsRequest(models.Model):
    # Bound to `(job, lease_epoch)`: only the holder of that lease is handed it or may answer.
    job = models.ForeignKey("runners.RunnerJob", on_delete=models.CASCADE, related_name="+")
    lease_epoch = models.PositiveIntegerField()
    op = models.CharField(max_length=8, choices=FsOp.choices)
    path = models.CharField(max_length=1024, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    # Handed to the runner's poll; a poll that could not deliver it gives it back.
    taken_at = models.DateTimeField(null=True, blank=True)
    answered_at = models.DateTimeField(null=True, blank=True)
    entries = models.JSONField(null=True, blank=True)
    blob = models.ForeignKey(
        "blobs.Blob", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    media_type = models.CharField(max_length=200, blank=True)
    error = models.CharField(max_length=500, blank=True)

    class Meta:
        # Created as a table of the scorecards app: the move kept it (and its rows).
        db_table = "scorecards_casefsrequest"
        indexes = [
            models.Index(
                fields=["job", "lease_epoch"],
                condition=Q(answered_at__isnull=True),
                name="casefsrequest_open",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.op} {self.path or '.'} of job {self.job_id}"


@blob_references
def _answered_blobs() -> models.QuerySet[CaseFsRequest, int]:
    # A file's content is kept while its request is: the page may be reading it still.
    return CaseFsRequest.objects.filter(blob__isnull=False).values_list("blob_id", flat=True)
