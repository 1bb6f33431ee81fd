"""Template tags of the blob store: what a workspace keeps in it."""

from __future__ import annotations

from typing import Any

from django import template

from scorecards.blobs.gc import storage_use
from scorecards.blobs.store import storage_backend

register = template.Library()


@register.inclusion_tag("scorecards/_workspace_storage.html")
def workspace_storage(workspace: Any) -> dict[str, Any]:
    """`{% workspace_storage workspace %}`: the storage backend, and the workspace's blobs."""
    count, size = storage_use(workspace.pk)
    return {"backend": storage_backend(), "count": count, "size": size}
