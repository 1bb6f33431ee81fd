"""The `Allow` stage: the member decides what runs here (`Consent`, in `decide`).

The lease heartbeats while they are asked. A case they refuse ends here (`fail_job`, naming
the `allow` command); one the server took back meanwhile, or that the stopping runner hands
back, ends without running; one they allow is announced, and runs.
"""

from __future__ import annotations

from runnercli.case.consent.decide import Consent
from runnercli.case.consent.refusals import Outcome
from runnercli.case.pipeline import CaseContext, CaseEnded, Failed, HandedBack, Stage, Stopped
from runnercli.session import Session


class Allow(Stage):
    name = "consent"

    def __init__(self, consent: Consent, session: Session) -> None:
        self.consent = consent
        self.session = session

    async def start(self, case: CaseContext) -> None:
        job, job_run = case.job, case.job_run
        decision = await self.consent.decide(job, kill=case.kill, stop=self.session.stop)
        if decision.outcome is Outcome.RUN:
            started = f"▶ started {job.harness.name} v{job.harness.version} case {job.case.key}"
            case.note(started)
            self.session.status.event(f"{job_run.title}: {started}")
            return
        if decision.outcome is Outcome.REFUSE:
            summary = f"refused {job.harness.name}"
            raise CaseEnded(Failed(decision.message, verb="refused", summary=summary))
        if decision.outcome is Outcome.HAND_BACK or job_run.abandoned:
            raise CaseEnded(HandedBack())
        raise CaseEnded(Stopped(job_run.lost_reason or decision.message))
