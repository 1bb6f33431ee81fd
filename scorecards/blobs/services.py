"""The blob store's face: what other features and the MCP tools call to keep bytes as blobs of
a workspace and read them back (its modules are the blob store's own).

- `blob_holdings`, `blob_put`: what a workspace holds, and uploads in chunks (resumable,
  the digest checked on `final`, nothing kept of bytes that do not match);
- `blob_store`: whole bytes the server itself has (a screen frame);
- `blob_get`, `blob_open`: a workspace's blob by digest, and its bytes;
- `job_blob_holdings`, `job_blob_put`: the same for a runner, fenced by its lease;
- `lease_workspace`: the workspace of the job a runner holds (a fenced call's blobs are its);
- `upload_begin`, `uploads_begin`: upload URLs for blobs' raw bytes (`PUT /uploads/…`),
  fenced too;
- `blob_held`: the workspace's blob of this digest and size, if it holds it (a `Blob`).
"""

from scorecards.blobs.fence import job_blob_holdings, job_blob_put, lease_workspace
from scorecards.blobs.models import Blob
from scorecards.blobs.rawput import upload_begin, uploads_begin
from scorecards.blobs.store import (
    blob_get,
    blob_held,
    blob_open,
    blob_storage,
    blob_store,
    storage_backend,
)
from scorecards.blobs.uploads import blob_holdings, blob_put

__all__ = [
    "Blob",
    "blob_get",
    "blob_held",
    "blob_holdings",
    "blob_open",
    "blob_put",
    "blob_storage",
    "blob_store",
    "job_blob_holdings",
    "job_blob_put",
    "lease_workspace",
    "storage_backend",
    "upload_begin",
    "uploads_begin",
]
