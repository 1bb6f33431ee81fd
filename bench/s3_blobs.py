"""What blobs on an S3-compatible object store cost the server: reading one back and
committing one from its staged chunks, each timed and its peak memory measured, beside a
plain GetObject / PutObject of the same bytes in the same run.

Against a SeaweedFS started on this machine (bench/objectstore.py), through django-storages'
S3Storage as `STORAGES["blobs"]` configures it. Every operation runs in a fresh child
process, so that its peak RSS (`ru_maxrss`) above what the child held before it began is
the operation's own:

- reads of an object of `--mib` MiB: the body streamed from GetObject in 1 MiB pieces, and
  `storage.open()` read in 1 MiB pieces (which downloads the whole object first: into memory
  by default, into a temporary file past `max_memory_size`); baseline: one GetObject read
  whole.
- commits of a blob staged as `--chunk-mib` MiB chunk objects (each chunk read as a stream and
  hashed on the way): through the server with `storage.save()` and boto3's default
  TransferConfig, with a bounded one (`--part-mib` MiB parts, `max_concurrency` 2, 2 parts in
  memory), and without threads (`--part-mib` MiB parts); and server-side, a hashing pass then
  S3 UploadPartCopy of each chunk as a part (needs chunks of ≥ 5 MiB but the last); baseline:
  one PutObject of the same bytes from memory.

    .venv/bin/python bench/s3_blobs.py [--mib 50] [--chunk-mib 8] [--part-mib 5] [--rounds 3]
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any, cast

from objectstore import ObjectStore, object_store
from report import Summary, finish

BENCH = Path(__file__).resolve().parent
MIB = 1024 * 1024
PIECE = MIB
# S3's smallest part, but for the last one of an upload (SeaweedFS enforces it as AWS does).
MIN_PART = 5 * MIB

READS = ("get-whole", "read-stream", "read-open")
# A streamed read holds a piece or two and the HTTP client's buffers, whatever the size.
STREAM_PEAK = 6 * MIB
COMMITS = ("put-whole", "commit-default", "commit-bounded", "commit-unthreaded", "commit-copy")


# ------------------------------------------------------------------ in the child process


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise LookupError(field)


def reset_peak_rss() -> int:
    """Start measuring the peak RSS from now (Linux: the high-water mark is reset to what
    the process holds); what it holds now, in bytes.

    Not `ru_maxrss`: Linux keeps it across exec, so a child would report its parent's peak.
    """
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")
    return _status_kib("VmRSS") * 1024


def peak_rss() -> int:
    """The highest RSS since the last `reset_peak_rss()`, in bytes."""
    return _status_kib("VmHWM") * 1024


def _storage(options: dict[str, Any]) -> Any:
    from django.conf import settings

    if not settings.configured:
        settings.configure(USE_TZ=True)
    from storages.backends.s3 import S3Storage

    return S3Storage(**options)


def transfer_config(kind: str, part_bytes: int) -> Any:
    """boto3's TransferConfig for a commit through the server: django-storages' default,
    bounded (parts of `part_bytes`, two in flight, two held), or without threads."""
    from boto3.s3.transfer import TransferConfig

    if kind == "default":
        return TransferConfig()
    if kind == "unthreaded":
        return TransferConfig(
            multipart_threshold=part_bytes, multipart_chunksize=part_bytes, use_threads=False
        )
    config = TransferConfig(
        multipart_threshold=part_bytes, multipart_chunksize=part_bytes, max_concurrency=2
    )
    # Not an argument of boto3's TransferConfig, but what bounds a non-seekable upload's
    # memory: parts read ahead of those being sent (10 by default).
    config.max_in_memory_upload_chunks = 2
    return config


class StagedChunks(io.RawIOBase):
    """Chunk objects read one after the other as one stream, each a GetObject body, hashed
    as it is read.

    A read returns all it is asked for unless the chunks are exhausted: boto3's upload of a
    stream that cannot seek takes a short read for the end of it (it decides between one
    PutObject and a multipart upload by whether the first read filled its threshold, and
    sizes each part by one read).
    """

    def __init__(self, storage: Any, keys: list[str]) -> None:
        super().__init__()
        self.storage = storage
        self.keys = list(keys)
        self.digest = hashlib.sha256()
        self.size = 0
        self._body: Any = None

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        wanted = size if size is not None and size >= 0 else None
        out = bytearray()
        while wanted is None or len(out) < wanted:
            piece = self._piece(PIECE if wanted is None else min(PIECE, wanted - len(out)))
            if not piece:
                break
            out += piece
        self.digest.update(out)
        self.size += len(out)
        return bytes(out)

    def _piece(self, size: int) -> bytes:
        while True:
            if self._body is None:
                if not self.keys:
                    return b""
                self._body = self.storage.bucket.Object(self.keys.pop(0)).get()["Body"]
            piece = self._body.read(size)
            if piece:
                return bytes(piece)
            self._body.close()
            self._body = None


def _read(storage: Any, op: str, key: str) -> str:
    digest = hashlib.sha256()
    if op == "get-whole":
        digest.update(storage.bucket.Object(key).get()["Body"].read())
    elif op == "read-stream":
        for piece in storage.bucket.Object(key).get()["Body"].iter_chunks(PIECE):
            digest.update(piece)
    else:
        with storage.open(key, "rb") as handle:
            while piece := handle.read(PIECE):
                digest.update(piece)
    return digest.hexdigest()


def commit_by_copy(storage: Any, keys: list[str], target: str) -> str:
    """Hash the staged chunks (streamed), then have the store assemble them at `target`:
    each chunk becomes a part by UploadPartCopy, no byte of it through this process; the
    digest. Every chunk but the last must have at least 5 MiB (S3's smallest part)."""
    reader = StagedChunks(storage, keys)
    while reader.read(PIECE):
        pass
    client = storage.connection.meta.client
    bucket = storage.bucket_name
    upload = client.create_multipart_upload(Bucket=bucket, Key=target)["UploadId"]
    try:
        parts = []
        for number, key in enumerate(keys, start=1):
            copied = client.upload_part_copy(
                Bucket=bucket,
                Key=target,
                UploadId=upload,
                PartNumber=number,
                CopySource={"Bucket": bucket, "Key": key},
            )
            parts.append({"ETag": copied["CopyPartResult"]["ETag"], "PartNumber": number})
        client.complete_multipart_upload(
            Bucket=bucket, Key=target, UploadId=upload, MultipartUpload={"Parts": parts}
        )
    except Exception:
        # An upload never completed keeps its parts (and their storage) until aborted.
        client.abort_multipart_upload(Bucket=bucket, Key=target, UploadId=upload)
        raise
    return reader.digest.hexdigest()


def _commit(storage: Any, op: str, keys: list[str], target: str, part_bytes: int) -> str:
    from django.core.files import File

    if op == "commit-copy":
        return commit_by_copy(storage, keys, target)
    storage.transfer_config = transfer_config(op.removeprefix("commit-"), part_bytes)
    reader = StagedChunks(storage, keys)
    storage.save(target, File(cast(IO[bytes], reader), name=target))
    return reader.digest.hexdigest()


def _put_whole(storage: Any, keys: list[str], target: str) -> tuple[str, float]:
    """The baseline of a commit: the same bytes, already in memory, in one PutObject (only
    the PutObject is timed)."""
    data = b"".join(storage.bucket.Object(key).get()["Body"].read() for key in keys)
    started = time.perf_counter()
    storage.bucket.Object(target).put(Body=data)
    return hashlib.sha256(data).hexdigest(), time.perf_counter() - started


def child(op: str, options: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """Run one operation; its seconds, result and peak RSS growth."""
    storage = _storage(options)
    # Connected and warmed up before the baseline RSS: a HEAD of what it will touch.
    storage.exists(params.get("key") or params["keys"][0])
    before = reset_peak_rss()
    started = time.perf_counter()
    if op in READS:
        digest = _read(storage, op, params["key"])
    elif op == "put-whole":
        digest, put_s = _put_whole(storage, params["keys"], params["target"])
        started = time.perf_counter() - put_s
    else:
        digest = _commit(storage, op, params["keys"], params["target"], params["part_bytes"])
    return {
        "op": op,
        "seconds": time.perf_counter() - started,
        "digest": digest,
        "peak_growth_bytes": max(0, peak_rss() - before),
    }


# ------------------------------------------------------------------ in the calling process


def measure(
    op: str, options: dict[str, Any], *, timeout_s: float = 120, **params: Any
) -> dict[str, Any]:
    """Run `op` in a fresh child process against the storage `options` name."""
    command = [
        sys.executable,
        str(BENCH / "s3_blobs.py"),
        "--child",
        op,
        "--options",
        json.dumps(options),
        "--params",
        json.dumps(params),
    ]
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    done = subprocess.run(
        command, cwd=BENCH, env=env, capture_output=True, text=True, timeout=timeout_s
    )
    if done.returncode != 0:
        raise RuntimeError(f"{op} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def put_random(client: Any, bucket: str, key: str, size: int, seed: int = 0) -> str:
    """Write `size` pseudo-random bytes at `key` (streamed from a generator, never whole in
    memory); their SHA-256."""
    source = RandomBytes(size, seed)
    client.upload_fileobj(source, bucket, key)
    return source.digest.hexdigest()


def stage(
    client: Any, bucket: str, prefix: str, total: int, chunk: int, seed: int = 0
) -> tuple[list[str], str]:
    """Stage `total` bytes as chunk objects of `chunk` bytes under `prefix`, as an upload in
    progress keeps them; their keys in order and the whole's SHA-256."""
    keys, source = [], RandomBytes(total, seed)
    for offset in range(0, total, chunk):
        key = f"{prefix}/{offset:012d}"
        client.put_object(Bucket=bucket, Key=key, Body=source.read(chunk))
        keys.append(key)
    return keys, source.digest.hexdigest()


class RandomBytes(io.RawIOBase):
    """`size` bytes that do not compress, produced as they are read (a function of the
    offset alone: however they are read, the same `seed` gives the same bytes)."""

    def __init__(self, size: int, seed: int = 0) -> None:
        super().__init__()
        self.size = size
        self.offset = 0
        self.block = hashlib.sha256(f"blob-{seed}".encode()).digest() * (PIECE // 32)
        self.digest = hashlib.sha256()

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        left = self.size - self.offset
        size = left if size is None or size < 0 else min(size, left)
        out = bytearray()
        while len(out) < size:
            index, within = divmod(self.offset + len(out), PIECE)
            # Each MiB differs from the others: a store that deduplicates cannot skip any.
            block = index.to_bytes(8, "big") + self.block[8:]
            out += block[within : within + size - len(out)]
        self.offset += size
        data = bytes(out)
        self.digest.update(data)
        return data

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


# ------------------------------------------------------------------ the benchmark


def _mib(value: float) -> str:
    return f"{value / MIB:.1f} MiB"


def run(args: argparse.Namespace, store: ObjectStore, summary: Summary) -> None:
    client = store.client()
    options = store.storage_options()
    total = args.mib * MIB
    digest = put_random(client, store.bucket, "bench/whole", total)
    keys, staged = stage(client, store.bucket, "bench/uploads", total, args.chunk_mib * MIB)
    assert staged == digest, "staged chunks differ from the object"

    def rounds(op: str, opts: dict[str, Any] = options, **params: Any) -> tuple[float, int]:
        """The median seconds and the highest peak RSS growth of `op` over the rounds."""
        times, peaks = [], []
        for _ in range(args.rounds):
            done = measure(op, opts, **params)
            assert done["digest"] == digest, f"{op} read other bytes"
            times.append(done["seconds"])
            peaks.append(done["peak_growth_bytes"])
        return statistics.median(times), max(peaks)

    base_s, base_rss = rounds("get-whole", key="bench/whole")
    spooled = dict(options, max_memory_size=MIB)
    for figure, op, opts in (
        ("read-stream", "read-stream", options),
        ("read-open", "read-open", options),
        ("read-open, max_memory_size 1 MiB", "read-open", spooled),
    ):
        seconds, peak = rounds(op, opts, key="bench/whole")
        bounded = op == "read-stream"
        summary.add(
            benchmark="s3_blobs",
            figure=f"{figure}, {args.mib} MiB: s / peak RSS growth",
            value=f"{seconds:.3f} s / {_mib(peak)}",
            baseline=f"GetObject whole {base_s:.3f} s / {_mib(base_rss)}",
            ratio=f"{base_s / seconds:.0%} of its speed" if seconds else "-",
            target=f"peak ≤ {_mib(STREAM_PEAK)}" if bounded else "-",
            met=(peak <= STREAM_PEAK) if bounded else None,
        )

    commit = {"keys": keys, "part_bytes": args.part_mib * MIB}
    put_s, _ = rounds("put-whole", target="bench/put", **commit)
    for op in COMMITS[1:]:
        if op == "commit-copy" and args.chunk_mib * MIB < MIN_PART:
            summary.notes.append(f"commit-copy skipped: chunks under {MIN_PART // MIB} MiB")
            continue
        seconds, peak = rounds(op, target=f"bench/{op}", **commit)
        parts = (
            f", {args.part_mib} MiB parts" if op in ("commit-bounded", "commit-unthreaded") else ""
        )
        summary.add(
            benchmark="s3_blobs",
            figure=f"{op} {args.mib} MiB of {args.chunk_mib} MiB chunks{parts}",
            value=f"{seconds:.3f} s / {_mib(peak)}",
            baseline=f"PutObject whole {put_s:.3f} s",
            ratio=f"{put_s / seconds:.0%} of its speed" if seconds else "-",
            target="-",
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=50, help="the blob's size")
    parser.add_argument("--chunk-mib", type=int, default=8, help="staged chunks' size")
    parser.add_argument("--part-mib", type=int, default=5, help="bounded commits' parts")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--summary-json", default="")
    parser.add_argument("--sqlite", action="store_true", help="(no database is used)")
    parser.add_argument("--postgres", default=None, help="(no database is used)")
    parser.add_argument("--child", default="", help=argparse.SUPPRESS)
    parser.add_argument("--options", default="{}", help=argparse.SUPPRESS)
    parser.add_argument("--params", default="{}", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, json.loads(args.options), json.loads(args.params))))
        return
    summary = Summary(f"blob storage on SeaweedFS's S3, {args.mib} MiB, {os.cpu_count()} cores")
    with object_store() as store:
        run(args, store, summary)
    finish(summary, args)


if __name__ == "__main__":
    main()
