"""Blobs: content-addressed bytes of one workspace, the uploads in progress that become them,
and the artifacts of results that name them."""

from __future__ import annotations

from datetime import datetime

from django.db import models
from django.db.models import QuerySet
from django.utils import timezone

from scorecards.blobs.references import blob_references, retention


class Blob(models.Model):
    """Bytes a workspace holds, by their SHA-256. The same bytes in two workspaces are two
    blobs: nothing reveals one workspace's blobs to another."""

    # Indexed by blob_unique, which leads with it.
    workspace = models.ForeignKey(
        "scorecards.Workspace", on_delete=models.CASCADE, related_name="blobs", db_index=False
    )
    sha256 = models.CharField(max_length=64)
    size = models.PositiveBigIntegerField()
    media_type = models.CharField(max_length=200, default="application/octet-stream")
    # Where the bytes are in the blob storage (derived from the workspace and the digest; a
    # backend that renames on save says where it put them).
    key = models.CharField(max_length=300)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        # Created as a table of the scorecards app: the move kept it (and its rows).
        db_table = "scorecards_blob"
        constraints = [models.UniqueConstraint(fields=["workspace", "sha256"], name="blob_unique")]
        indexes = [models.Index(fields=["created_at"], name="blob_created")]

    def __str__(self) -> str:
        return f"{self.sha256[:12]} ({self.size} bytes)"


class BlobUpload(models.Model):
    """An upload in progress: its chunks are staged in the blob storage itself, so that any
    replica sharing it resumes what another one received."""

    # Indexed by blobupload_unique, which leads with it.
    workspace = models.ForeignKey(
        "scorecards.Workspace", on_delete=models.CASCADE, related_name="+", db_index=False
    )
    sha256 = models.CharField(max_length=64)
    received = models.PositiveBigIntegerField(default=0)
    # The staged chunks' names in the storage, in order, and each one's size.
    chunks = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "scorecards_blobupload"
        constraints = [
            models.UniqueConstraint(fields=["workspace", "sha256"], name="blobupload_unique")
        ]
        indexes = [models.Index(fields=["updated_at"], name="blobupload_updated")]

    def __str__(self) -> str:
        return f"upload of {self.sha256[:12]}: {self.received} bytes"


class Artifact(models.Model):
    """A file a case left, named by its result and kept as a blob of the run's workspace."""

    # Indexed by artifact_unique, which leads with it.
    result = models.ForeignKey(
        "scorecards.CaseResult", on_delete=models.CASCADE, related_name="artifacts", db_index=False
    )
    path = models.CharField(max_length=1024)
    blob = models.ForeignKey(Blob, on_delete=models.PROTECT, related_name="artifacts")
    size = models.PositiveBigIntegerField()
    media_type = models.CharField(max_length=200)

    class Meta:
        db_table = "scorecards_artifact"
        ordering = ["result_id", "path"]
        constraints = [models.UniqueConstraint(fields=["result", "path"], name="artifact_unique")]

    def __str__(self) -> str:
        return self.path


@blob_references
def _named_by_artifacts() -> QuerySet[Artifact, int]:
    return Artifact.objects.values_list("blob_id", flat=True)


@retention
def _old_artifacts(before: datetime) -> int:
    """Forget the artifacts of runs created before `before` (their blobs go with the GC)."""
    deleted, _ = Artifact.objects.filter(result__run__created_at__lt=before).delete()
    return deleted
