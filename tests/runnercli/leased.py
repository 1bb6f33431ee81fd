"""A job leased on a live server to the runner's real client: the fence its blob, result and
log calls carry, each call answered by the server's own rules (offsets, digests, limits, the
workspace's blobs) — never by a stand-in of them. What is simulated is the network only: a
reply lost on its way back, or a call that never reaches the server."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from runnercli.client import RunnerClient, ServerUnavailable
from runnercli.console.status import StatusLine
from runnercli.options import RunOptions
from runnercli.protocol import PROTOCOL_VERSION, CaseJob, JobFence, Lease
from runnercli.protocol.features import RUNNER_FEATURES
from runnercli.session import Session
from runners.services import runner_hello, runner_pair
from scorecards.blobs.models import Blob
from scorecards.models import Workspace
from scorecards.services import dataset_create, harness_create, run_start
from tests.live import LiveServer, daphne

ModelT = TypeVar("ModelT", bound=BaseModel)

SPEC: dict[str, Any] = {"command": ["python", "-c", "print('ok')"], "timeout_s": 30}


@contextmanager
def blob_server(tmp_path: Path, blob_dir: Path, **env: Any) -> Iterator[LiveServer]:
    """A daphne over the test database whose blobs are kept in `blob_dir` (the test's own:
    the `blob_dir` fixture points this process's storage there too)."""
    options = {"location": str(blob_dir), "allow_overwrite": True}
    settings: dict[str, Any] = {
        "EVERDICT_LEASE_TTL_S": 60,
        "EVERDICT_BLOB_STORAGE_OPTIONS": json.dumps(options),
        **env,
    }
    with daphne(tmp_path, **settings) as server:
        yield server


@dataclass(frozen=True)
class PairedRun:
    token: str
    workspace_id: int
    run_id: int


def paired_run(
    user: Any,
    *,
    cases: int = 1,
    spec: dict[str, Any] | None = None,
    capabilities: list[str] | None = None,
    slug: str = "acme",
) -> PairedRun:
    """A harness and a dataset of `cases` cases, a runner of `user` (greeted: the server knows
    its features) and a run pinned to it, through the services; every case can be leased at
    once."""
    harness_create(user=user, workspace_slug=slug, name="blobs", spec=spec or SPEC)
    keys = [{"key": f"c{i}", "input": {}, "expected": "ok"} for i in range(cases)]
    dataset_create(user=user, workspace_slug=slug, name="blobs", cases=keys)
    capabilities = capabilities or ["python"]
    paired = runner_pair(owner=user, label="laptop", capabilities=capabilities)
    # Greeted once already, as a runner is before its runs: the server knows its features.
    runner_hello(
        runner=paired.runner,
        protocol=PROTOCOL_VERSION,
        capabilities=capabilities,
        features=RUNNER_FEATURES,
    )
    run = run_start(
        user=user,
        workspace_slug=slug,
        harness="blobs",
        dataset="blobs",
        runtime=f"self:{paired.runner.pk}",
        concurrency=cases,
    )
    workspace = Workspace.objects.get(slug=slug)
    return PairedRun(token=paired.token, workspace_id=workspace.pk, run_id=run.pk)


class ObservedClient(RunnerClient):
    """The runner's client with its calls written down. A `put_blob` whose number is in
    `lost_replies` reaches the server, but its reply is lost with the connection; a blob
    call for a digest in `unreachable` never reaches it."""

    def __init__(self, server: LiveServer | str, token: str, **kwargs: Any) -> None:
        url = server if isinstance(server, str) else server.url
        super().__init__(url, token, **kwargs)
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.lost_replies: set[int] = set()
        self.unreachable: set[str] = set()
        self.puts = 0

    async def __aenter__(self) -> ObservedClient:
        return self

    async def call(
        self, tool: str, args: dict[str, Any], model: type[ModelT], wait_s: float = 0.0
    ) -> ModelT:
        self.calls.append((tool, args))
        digests = args.get("sha256")
        named = set(digests) if isinstance(digests, list) else {digests}
        if named & self.unreachable:
            raise ServerUnavailable("connection refused")
        reply = await super().call(tool, args, model, wait_s)
        if tool == "put_blob":
            self.puts += 1
            if self.puts in self.lost_replies:
                raise ServerUnavailable("connection reset")
        return reply

    def of(self, tool: str) -> list[dict[str, Any]]:
        return [args for called, args in self.calls if called == tool]

    def put_offsets(self) -> list[int]:
        return [args["offset"] for args in self.of("put_blob")]

    async def lease(self, jobs: int = 1, capabilities: list[str] | None = None) -> list[Held]:
        """Greet the server (its limits) and lease `jobs` jobs at once."""
        capabilities = capabilities or ["python"]
        await self.hello(capabilities=capabilities)
        batch = await self.lease_job(
            wait_ms=0, capabilities=capabilities, status="", max_jobs=jobs if jobs > 1 else None
        )
        grants = batch.grants()
        assert len(grants) == jobs and not batch.unparsed, batch
        return [Held(grant.job, grant.lease) for grant in grants]


@dataclass(frozen=True)
class Held:
    job: CaseJob
    lease: Lease

    @property
    def fence(self) -> JobFence:
        return JobFence(job_id=self.job.job_id, lease_epoch=self.lease.lease_epoch)


def stored(blob_dir: Path, workspace_id: int) -> dict[str, bytes]:
    """The blobs the server holds for the workspace, by digest, read from its storage."""
    blobs = Blob.objects.filter(workspace_id=workspace_id)
    return {blob.sha256: (blob_dir / blob.key).read_bytes() for blob in blobs}


def session_over(client: RunnerClient, **options: Any) -> Session:
    """The runner's session over `client`, its status line written to a string (`said`)."""
    status = StatusLine(stream=io.StringIO(), live=False)
    return Session(client, RunOptions(capabilities=["python"], **options), status)
