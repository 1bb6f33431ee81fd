"""What consent decides, and the words of a refusal: content that does not match its digest
or sets a refused environment key, a version the member did not allow, a pin broken."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from runnercli.case.consent.settings import ConsentSettings
from runnercli.case.consent.trust import HarnessId
from runnercli.protocol import CaseJob, harness_digest, refused_env_keys


class Outcome(Enum):
    """What becomes of the job."""

    RUN = "run"
    REFUSE = "refuse"  # final: fail_job, not retryable
    HAND_BACK = "hand back"  # the runner is stopping: another attempt may run it
    LOST = "lost"  # the server took the job back while the member was asked


@dataclass(frozen=True)
class Decision:
    """The outcome, and for a refusal the reason `fail_job` gives."""

    outcome: Outcome
    message: str = ""


RUN = Decision(Outcome.RUN)


def short(digest: str) -> str:
    """A digest as the member reads it."""
    return f"sha256:{digest[:16]}…"


def content_problem(job: CaseJob, harness: HarnessId, refused_env: list[str]) -> str | None:
    """Why the job's content is refused whoever allowed it, if it is: a server can lie, so
    the digest and the environment are checked here again."""
    if not harness.valid:
        return f"harness {harness} does not have a valid workspace and name: refused"
    computed = harness_digest(job.harness.spec)
    if computed != job.harness.digest:
        return (
            f"harness {harness} arrived with content that does not match its digest "
            f"(the server says {short(job.harness.digest)}, the content is "
            f"{short(computed)}): refused"
        )
    if refused := refused_env_keys(job.harness.spec.env, refused_env):
        return (
            f"harness {harness} sets {', '.join(refused)} in its environment, which this "
            "runner refuses: it would change what runs on this machine, not configure "
            "the tool"
        )
    for name, service in (job.harness.spec.services or {}).items():
        if refused := refused_env_keys(service.env, refused_env):
            return (
                f"harness {harness}'s service {name} sets {', '.join(refused)} in its "
                "environment, which this runner refuses"
            )
    return None


def not_allowed(settings: ConsentSettings, harness: HarnessId) -> str:
    """A version the member did not allow, and the two commands that would."""
    entries = [str(e) for e in settings.session + settings.standing]
    listed = f" (allowed: {', '.join(entries[:10])})" if entries else ""
    every = f"{harness.workspace}/{harness.name}"
    return (
        f"harness {harness.name} v{harness.version} is not allowed on this runner{listed}: "
        f"allow it with `{settings.command('allow', str(harness))}` (this version) or "
        f"`{settings.command('allow', every)}` (every version)"
    )


def lying(settings: ConsentSettings, harness: HarnessId, pinned: str, digest: str) -> str:
    """A pinned version arriving with other content: the server lies."""
    return (
        f"harness {harness} was pinned to {short(pinned)} (the content this runner first "
        f"saw under that version), and the server now sends {short(digest)} under the same "
        "version; a version never changes on the server, so this one is refused (if the "
        "server's data was replaced on "
        f"purpose: `{settings.command('trust', '--remove', str(harness))}`)"
    )
