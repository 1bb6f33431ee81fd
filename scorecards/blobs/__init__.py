"""Blobs: bytes a workspace holds by their SHA-256 — artifacts of results, screen frames,
files a page asked of a running case — kept in `STORAGES["blobs"]`.

- `blob_holdings`, `blob_put`: what a workspace holds, and uploads in chunks (resumable,
  the digest checked on `final`, nothing kept of bytes that do not match);
- `blob_store`: whole bytes the server itself has (a screen frame);
- `blob_get`, `blob_open`: a workspace's blob by digest, and its bytes;
- `job_blob_holdings`, `job_blob_put`: the same for a runner, fenced by its lease;
- `references`: who names blobs, for `manage.py blobs_gc`.
"""

from scorecards.blobs.fence import job_blob_holdings, job_blob_put, lease_workspace
from scorecards.blobs.store import blob_get, blob_open, blob_storage, blob_store, storage_backend
from scorecards.blobs.uploads import blob_holdings, blob_put

__all__ = [
    "blob_get",
    "blob_holdings",
    "blob_open",
    "blob_put",
    "blob_storage",
    "blob_store",
    "job_blob_holdings",
    "job_blob_put",
    "lease_workspace",
    "storage_backend",
]
