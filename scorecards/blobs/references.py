"""Who names blobs, so that `manage.py blobs_gc` removes only the blobs nobody names.

Each model that keeps a blob's id registers a function returning the ids it names (a query,
used as a subquery): artifacts of results, screen frames, files a page asked for. A blob that
none of them names is garbage once it is old enough not to be an upload whose result is still
on its way. Each also may register what it forgets under `EVERDICT_RETENTION_DAYS`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.db.models import QuerySet

BlobIds = Callable[[], QuerySet[Any, int]]
Forget = Callable[[datetime], int]

BLOB_REFERENCES: list[BlobIds] = []
RETENTION: list[Forget] = []


def blob_references(fn: BlobIds) -> BlobIds:
    """Register `fn`: the ids of the blobs some model names (`values_list("blob_id")`)."""
    BLOB_REFERENCES.append(fn)
    return fn


def retention(fn: Forget) -> Forget:
    """Register `fn(before)`: forget what a model keeps of runs created before `before`
    (artifacts, frames, traces); return how many rows it removed."""
    RETENTION.append(fn)
    return fn
