"""One leased job: its case through the pipeline, with a heartbeat and a log meanwhile.

The pipeline of a job (`runnercli.case.pipeline`): `Deliver` (first, so that answering for
the lease comes last), `Allow` (the member's consent), `Prepare`, `Repo` (a harness with a
repo: the case runs in a worktree of the member's checkout), `Services` (a harness with
services: its topology acquired, the case's own started), `Trace` and `Screens` (what the
case does and shows, sent as it runs), `Files` (its working directory read on request
while it runs), `AgentConfig` (an agent CLI's configuration: a clean one holding the
member's login alone, under `agent_config: clean`), `Execute`, `Collect`, `Redact` (when
the member set `redact` patterns), `Artifacts` (the files the case left, uploaded before the
result names them). A judge job's pipeline is shorter: `Deliver`, `Allow`, `Judge` (its own
directory and the file of what it judges), `AgentConfig`, `Execute`, `Collect`, `Redact`.
"""

from __future__ import annotations

import asyncio

from runnercli.case.agentconfig.stage import AgentConfig
from runnercli.case.artifacts.stage import Artifacts
from runnercli.case.collect import Collect
from runnercli.case.consent.decide import Consent
from runnercli.case.consent.stage import Allow
from runnercli.case.delivery.ratelimit import Pauses
from runnercli.case.delivery.reports import Delivery
from runnercli.case.delivery.stage import Deliver
from runnercli.case.execute import Execute
from runnercli.case.files.rendezvous import CaseFiles
from runnercli.case.files.stage import Files
from runnercli.case.heartbeats import Heartbeats
from runnercli.case.judge.stage import BillingWarning, Judge
from runnercli.case.limits.stage import Limits
from runnercli.case.log import CaseLog
from runnercli.case.pipeline import CaseContext, Pipeline, Stage
from runnercli.case.prepare import Prepare
from runnercli.case.redact import Redact
from runnercli.case.repo import Worktrees
from runnercli.case.repo.stage import Repo
from runnercli.case.screens.stage import Screens
from runnercli.case.services.part import RunnerServices
from runnercli.case.services.stage import Services
from runnercli.case.tools import ToolVersions
from runnercli.case.trace.outbox import TraceOutbox
from runnercli.case.trace.stage import Trace
from runnercli.case.verify.stage import Verify
from runnercli.session import JobRun, Session
from runnercli.slots import Slots
from runnercli.tasks import ended


class Jobs:
    """Run each leased job's case and report it, a slot held until the case is over."""

    def __init__(
        self,
        session: Session,
        *,
        slots: Slots,
        consent: Consent,
        heartbeats: Heartbeats,
        delivery: Delivery,
        pauses: Pauses,
        worktrees: Worktrees | None = None,
        traces: TraceOutbox | None = None,
        services: RunnerServices | None = None,
        files: CaseFiles | None = None,
    ) -> None:
        self.session = session
        self.files = files
        self.traces = traces
        # One per runner: it serializes `git worktree` commands on each checkout.
        self.worktrees = worktrees or Worktrees()
        self.services = services or RunnerServices(session.options, self.worktrees, session.status)
        # The versions of the tools behind a harness, each asked once per runner.
        self.tools = ToolVersions()
        self.slots = slots
        self.consent = consent
        self.heartbeats = heartbeats
        self.delivery = delivery
        self.pauses = pauses
        self.billing = BillingWarning()

    def stages(self, job_run: JobRun, log: CaseLog) -> list[Stage]:
        """The pipeline of one job's case."""
        if job_run.job.kind == "judge":
            return self._judge_stages(job_run, log)
        session, spec = self.session, job_run.job.harness.spec
        redactor = session.options.redactor
        repo = self._repo() if spec.repo is not None else None
        verify = (
            Verify(repo)
            if repo is not None and (spec.verify is not None or spec.protect is not None)
            else None
        )
        return [
            self._deliver(job_run, log),
            Allow(self.consent, session),
            Prepare(),
            *([repo] if repo is not None else []),
            # After the repo's diff is kept, before the result is collected.
            *([verify] if verify is not None else []),
            *([self._services()] if spec.services else []),
            *self._watched(),
            # Last before the run: the working directory is the one the case runs in.
            *([Files(self.files)] if self.files is not None else []),
            self._agent_config(),
            *([Limits()] if spec.limits is not None else []),
            Execute(),
            *([verify.reap()] if verify is not None else []),
            Collect(self.tools),
            *([Redact(redactor)] if redactor else []),
            Artifacts(session.client, self.delivery.shelf, redactor=redactor, abort=session.abort),
        ]

    def _judge_stages(self, job_run: JobRun, log: CaseLog) -> list[Stage]:
        """A judge job: consent, the judge's file, the judge's command, its output reported
        like a case's (the server reads the verdict)."""
        session, redactor = self.session, self.session.options.redactor
        return [
            self._deliver(job_run, log),
            Allow(self.consent, session),
            Judge(self.billing),
            self._agent_config(),
            Execute(),
            Collect(self.tools),
            *([Redact(redactor)] if redactor else []),
        ]

    def _deliver(self, job_run: JobRun, log: CaseLog) -> Deliver:
        return Deliver(
            self.session,
            self.delivery,
            self.pauses,
            log=log,
            on_over=lambda: self._over(job_run),
        )

    def _agent_config(self) -> AgentConfig:
        """An agent CLI's configuration: the member's, or a clean one under the runner's own
        state directory (beside its config file)."""
        spool = self.session.options.spool_dir
        return AgentConfig(spool.parent if spool is not None else None)

    def _services(self) -> Services:
        return Services(self.services.topologies, no_docker=self.services.no_docker)

    def _repo(self) -> Repo:
        session = self.session
        return Repo(
            self.worktrees,
            session.options.repos,
            max_diff_bytes=lambda: session.client.limits.max_artifact_bytes,
        )

    def _watched(self) -> list[Stage]:
        """The trace and the screens of the case, sent unless the member keeps them here."""
        session, options = self.session, self.session.options
        redact = options.redactor.text if options.redactor else None
        return [
            Trace(session.client, send=not options.no_trace, redact=redact, outbox=self.traces),
            Screens(session.client, send=not options.no_screens),
        ]

    async def handle(self, job_run: JobRun) -> bool:
        """Run one leased job and report it; return whether the server took the report."""
        session, job = self.session, job_run.job
        session.running[job.job_id] = job_run
        session.show()
        log = CaseLog(
            session.client,
            job.job_id,
            lambda: job_run.epoch,
            lock=job_run.calls,
            redact=session.options.redactor.text,
        )
        log.on_resumed = lambda: self.heartbeats.resumed_elsewhere(job_run)
        heartbeat = asyncio.create_task(self.heartbeats.keep(job_run))
        case = CaseContext(job_run, stderr_lines=[log.add], notes=[log.add])
        log.start()
        try:
            # Beside a case taking many slots, or leased ahead, it waits its turn (its lease
            # heartbeaten); leased ahead, it is handed back on a stop before its turn.
            await self.slots.start(job_run, stop=session.stop if job_run.ahead else None)
            if job_run.ahead and not job_run.started:
                await self.delivery.release(
                    job.job_id,
                    job_run.epoch,
                    "the runner is stopping",
                    title=f"job {job.job_id}",
                    patience_s=10.0,
                )
                return False
            await Pipeline(self.stages(job_run, log)).run(case)
            return case.reported
        finally:
            self.slots.give_back(job_run)
            # The heartbeat and the log's pump are both cancelled before either is waited for,
            # and the case leaves the roster even when this task is cancelled meanwhile.
            heartbeat.cancel()
            try:
                await log.close(flush=False)
                await ended(heartbeat)
            finally:
                session.running.pop(job.job_id, None)
                session.show()

    def _over(self, job_run: JobRun) -> None:
        """The case is over; its lease is heartbeaten until the server answers its report,
        and its slot takes the next case meanwhile."""
        job_run.finished = True
        self.slots.give_back(job_run)
