"""`manage.py blobs_gc`: remove the blobs nobody names, stale uploads, and with
`EVERDICT_RETENTION_DAYS` what old runs keep of their cases' worlds.

A blob is kept while anything registered in `references` names it (an artifact of a result,
a screen frame, …) and for a day after it was made (an upload whose result is still on its
way names nothing yet). An upload untouched for a day is abandoned: its staged chunks go,
and so do staged chunks no upload records (a call that failed between storing a chunk and
recording it) and files left in the staging root by a server stopped while it received a
chunk or composed a blob. With a retention of N days, the artifacts, frames and traces of runs
created more than N days ago are forgotten first (their results stay), and their blobs go with
the rest. A dry run counts all of it inside a transaction it rolls back, and removes nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Count, QuerySet, Sum
from django.utils import timezone

from core.fields import ascii_int
from scorecards.blobs.models import Blob, BlobUpload
from scorecards.blobs.references import BLOB_REFERENCES, RETENTION
from scorecards.blobs.store import STAGING_ROOT, blob_storage
from scorecards.blobs.uploads import upload_discard

# How long a blob nobody names, and an upload nobody continues, are left alone.
GRACE = timedelta(days=1)


@dataclass
class Swept:
    """What a pass removed (or, in a dry run, would remove)."""

    forgotten: int = 0  # rows retention removed: artifacts, frames, trace events
    blobs: int = 0
    blob_bytes: int = 0
    uploads: int = 0
    staged: int = 0  # staged chunk objects no upload records, and files left half-written


class _DryRun(Exception):
    pass


def unnamed(now: datetime) -> QuerySet[Blob]:
    """Blobs older than the grace that nothing registered names."""
    garbage = Blob.objects.filter(created_at__lt=now - GRACE)
    for named in BLOB_REFERENCES:
        garbage = garbage.exclude(pk__in=named())
    return garbage


def blobs_gc(*, dry_run: bool = False, now: datetime | None = None) -> Swept:
    """Remove what nobody needs any more; say what went."""
    now = now or timezone.now()
    swept = Swept()
    if dry_run:
        try:
            with transaction.atomic():
                _forget_old(swept, now)
                rows = unnamed(now)
                counted = rows.aggregate(n=Count("pk"), size=Sum("size"))
                swept.blobs, swept.blob_bytes = counted["n"] or 0, counted["size"] or 0
                swept.uploads = _stale_uploads(now).count()
                raise _DryRun
        except _DryRun:
            pass
        swept.staged = sum(1 for _ in _orphan_chunks(now))
        return swept
    with transaction.atomic():
        _forget_old(swept, now)
    for blob in unnamed(now).iterator():
        if _remove(blob, now):
            swept.blobs += 1
            swept.blob_bytes += blob.size
    for upload in _stale_uploads(now).iterator():
        upload_discard(upload.workspace_id, upload.sha256)
        swept.uploads += 1
    for name in list(_orphan_chunks(now)):
        blob_storage().delete(name)
        swept.staged += 1
    return swept


def _forget_old(swept: Swept, now: datetime) -> None:
    days = settings.EVERDICT_RETENTION_DAYS
    if days:
        before = now - timedelta(days=days)
        swept.forgotten = sum(forget(before) for forget in RETENTION)


def _remove(blob: Blob, now: datetime) -> bool:
    """Delete one blob's row if nothing names it still, then its bytes."""
    try:
        with transaction.atomic():
            gone, _ = unnamed(now).filter(pk=blob.pk).delete()
    except IntegrityError:
        return False  # a result named it at this very moment: it stays
    if gone:
        blob_storage().delete(blob.key)
    return bool(gone)


def _stale_uploads(now: datetime) -> QuerySet[BlobUpload]:
    return BlobUpload.objects.filter(updated_at__lt=now - GRACE)


def _orphan_chunks(now: datetime) -> Iterator[str]:
    """Staged chunks older than the grace whose upload records nothing (or is gone)."""
    storage = blob_storage()
    try:
        workspaces, loose = storage.listdir(STAGING_ROOT)
    except FileNotFoundError:
        return
    for name in loose:
        # A chunk being received, or a blob being composed, when its server stopped.
        key = f"{STAGING_ROOT}/{name}"
        if storage.get_modified_time(key) < now - GRACE:
            yield key
    for workspace in workspaces:
        digests, _ = storage.listdir(f"{STAGING_ROOT}/{workspace}")
        for digest in digests:
            folder = f"{STAGING_ROOT}/{workspace}/{digest}"
            recorded = _recorded(workspace, digest)
            for name in storage.listdir(folder)[1]:
                key = f"{folder}/{name}"
                if key not in recorded and storage.get_modified_time(key) < now - GRACE:
                    yield key


def _recorded(workspace: str, digest: str) -> set[str]:
    upload = BlobUpload.objects.filter(
        workspace_id=ascii_int(workspace) or -1, sha256=digest
    ).first()
    return {str(name) for name, _ in upload.chunks} if upload is not None else set()


def storage_use(workspace_id: int) -> tuple[int, int]:
    """The blobs a workspace holds: how many, and their bytes."""
    use = Blob.objects.filter(workspace_id=workspace_id).aggregate(n=Count("pk"), size=Sum("size"))
    return use["n"] or 0, use["size"] or 0
