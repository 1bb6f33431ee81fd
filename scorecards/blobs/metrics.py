"""Prometheus counters of blob uploads (per process, like the queue's)."""

from __future__ import annotations

from prometheus_client import Counter

BLOB_CHUNKS = Counter("everdict_blob_chunks", "put_blob chunks answered, by outcome.", ["outcome"])
BLOB_BYTES = Counter(
    "everdict_blob_bytes_received", "Bytes of put_blob chunks staged (accepted and new)."
)
BLOBS_COMMITTED = Counter("everdict_blobs_committed", "Uploads whose digest matched, kept.")
UPLOAD_URLS = Counter("everdict_upload_urls", "Raw upload URLs minted by begin_upload.")
UPLOAD_HEADS = Counter(
    "everdict_upload_heads", "HEADs of raw upload URLs answered (where an upload stands)."
)
