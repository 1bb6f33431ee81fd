"""Where a topology's processes run, and what they are given.

`cwd: case` — the case's directory; `cwd: repo` — the case's worktree of the member's repo
when a stage made one (`EVERDICT_REPO_DIR`), else a worktree of its own (a version-scoped
service always has its own: cases come and go, the service stays); no `cwd` — the case's
directory for a case-scoped service, a directory of its own for a version-scoped one.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from runnercli.case.argv import PLACEHOLDER, StartError, render_argv
from runnercli.case.repo import RepoError, Worktree
from runnercli.case.repo.owner import owner_write
from runnercli.case.services.errors import ServiceError
from runnercli.case.services.ports import free_port
from runnercli.case.services.processes import ProcessService, service_env
from runnercli.case.services.records import ProcessRecord
from runnercli.case.services.runtime import SERVICE_DIR_PREFIX, Runtime
from runnercli.protocol import CaseJob, CaseRef, ServiceSpec


@dataclass(frozen=True)
class Where:
    """The case a case-scoped topology belongs to."""

    case_dir: Path
    case: CaseRef
    repo_dir: Path | None = None


class Places:
    """The directories and worktree of one topology's processes, removed with it."""

    def __init__(
        self, job: CaseJob, runtime: Runtime, topology_id: str, where: Where | None
    ) -> None:
        self.job = job
        self.runtime = runtime
        self.topology_id = topology_id
        self.where = where
        self.scratch: Path | None = None
        self.worktree: Worktree | None = None

    async def process(self, name: str, spec: ServiceSpec, labels: dict[str, str]) -> ProcessService:
        port = spec.fixed_port or free_port()
        cwd = await self._cwd(name, spec)
        records = self.runtime.records
        record = ProcessRecord(
            runner=self.runtime.runner,
            owner=self.runtime.owner,
            topology=self.job.harness.digest,
            topology_id=self.topology_id,
            scope=spec.scope,
            service=name,
            pid=0,
            started=None,
            port=port,
            log=str(records.log_path(self.topology_id, name)),
        )
        return ProcessService(
            record, self._argv(name, spec, port), service_env(spec.env, port), cwd, records
        )

    def _argv(self, name: str, spec: ServiceSpec, port: int) -> list[str]:
        assert spec.run is not None
        if self.where is not None:  # a case's own service may use the case's placeholders
            try:
                return render_argv(spec.run, self.where.case, {"port": str(port)})
            except StartError as exc:
                raise ServiceError(name, f"service {name}: {exc}") from exc
        return [
            PLACEHOLDER.sub(lambda m: str(port) if m.group(1) == "port" else m.group(0), arg)
            for arg in spec.run
        ]

    async def _cwd(self, name: str, spec: ServiceSpec) -> Path:
        if spec.cwd == "repo":
            if self.where is not None and self.where.repo_dir is not None:
                return self.where.repo_dir
            return await self._repo(name)
        if self.where is not None:
            return self.where.case_dir
        return self._scratch()

    def _scratch(self) -> Path:
        if self.scratch is None:
            self.scratch = Path(
                tempfile.mkdtemp(prefix=SERVICE_DIR_PREFIX, dir=self.runtime.tmp_root)
            )
            owner_write(self.scratch)
        return self.scratch

    async def _repo(self, name: str) -> Path:
        if self.worktree is not None:
            return self.worktree.path
        repo = self.job.harness.spec.repo
        assert repo is not None  # the spec refuses cwd: repo without the harness's repo
        checkout = self.runtime.repos.get(repo.name)
        if checkout is None:
            raise ServiceError(
                name,
                f"service {name} runs in {repo.name}, which is not mapped here: "
                f"python -m runnercli repo add {repo.name} PATH",
            )
        base = self.where.case_dir if self.where is not None else self._scratch()
        dirname = "service-repo" if self.where is not None else "repo"
        try:
            self.worktree = await self.runtime.worktrees.add(
                name=repo.name,
                checkout=Path(checkout),
                case_dir=base,
                ref=repo.ref,
                sha=self.job.git_sha,
                dirname=dirname,
            )
        except RepoError as exc:
            raise ServiceError(name, f"service {name}: {exc}") from exc
        return self.worktree.path

    async def remove(self) -> None:
        if self.worktree is not None:
            try:
                await self.runtime.worktrees.remove(self.worktree)
            except RepoError as exc:
                self.runtime.say(f"⚠ {exc}")
            self.worktree = None
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None
