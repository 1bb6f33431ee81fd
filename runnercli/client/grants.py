"""A `lease_job` reply read grant by grant: a job this runner cannot read poisons no other.

A server of a later release may send a job whose spec this runner does not understand, or
one it refuses (a stored harness that sets `PATH`). Validating the whole `LeaseReply` at once
would drop every job of the batch with it, each then held until its lease expires and leased
again to the same fate. Each grant is validated on its own instead; one that fails is
reported with `fail_job` (final, with the reason) while the others run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from runnercli.protocol import RUNNER_CONTEXT, CaseJob, HarnessRef, Lease, LeaseGrant

# How many of a grant's validation errors its failure names.
REASONS_SHOWN = 3


@dataclass(frozen=True)
class Unparsed:
    """A grant this runner could not read: its fence (when readable) and why."""

    job_id: int | None
    lease_epoch: int | None
    reason: str


@dataclass
class LeaseBatch:
    """What `lease_job` granted: the jobs this runner can run, and those it cannot read."""

    granted: list[LeaseGrant] = field(default_factory=list)
    unparsed: list[Unparsed] = field(default_factory=list)
    update_required: bool = False

    def grants(self) -> list[LeaseGrant]:
        return list(self.granted)

    @property
    def job(self) -> CaseJob | None:
        return self.granted[0].job if self.granted else None

    @property
    def lease(self) -> Lease | None:
        return self.granted[0].lease if self.granted else None


def parse_lease_reply(payload: Any) -> LeaseBatch:
    """Read a `lease_job` reply; raise ValueError only if the reply itself has no known shape."""
    if not isinstance(payload, dict):
        raise ValueError(f"lease_job answered {type(payload).__name__}, not an object")
    batch = LeaseBatch(update_required=payload.get("update_required") is True)
    # The harnesses read so far: a lease's cases of one run share theirs, read once (and its
    # digest, taken per spec, is taken once).
    harnesses: list[tuple[Any, HarnessRef]] = []
    for raw in _raw_grants(payload):
        try:
            grant = LeaseGrant.model_validate(_with_harness(raw, harnesses), context=RUNNER_CONTEXT)
        except ValidationError as exc:
            job_id, epoch = _fence_of(raw)
            batch.unparsed.append(Unparsed(job_id, epoch, describe_errors(exc)))
            continue
        batch.granted.append(grant)
        if all(held is not grant.job.harness for _, held in harnesses):
            harnesses.append((raw["job"]["harness"], grant.job.harness))
    return batch


def _with_harness(raw: Any, harnesses: list[tuple[Any, HarnessRef]]) -> Any:
    """The grant with its job's harness replaced by one read already when it is the same
    (a model instance is taken as it is, not validated again)."""
    job = raw.get("job") if isinstance(raw, dict) else None
    if not isinstance(job, dict) or (harness := job.get("harness")) is None:
        return raw
    for seen, parsed in harnesses:
        if harness == seen:
            return {**raw, "job": {**job, "harness": parsed}}
    return raw


def _raw_grants(payload: dict[str, Any]) -> list[Any]:
    jobs = payload.get("jobs")
    if jobs is not None:
        if not isinstance(jobs, list):
            raise ValueError("lease_job answered `jobs` that is not a list")
        return jobs
    if payload.get("job") is not None or payload.get("lease") is not None:
        return [{"job": payload.get("job"), "lease": payload.get("lease")}]
    return []


def _fence_of(raw: Any) -> tuple[int | None, int | None]:
    """The grant's `(job_id, lease_epoch)`, from its lease or else its job."""
    for part in ("lease", "job"):
        found = raw.get(part) if isinstance(raw, dict) else None
        if isinstance(found, dict):
            job_id, epoch = found.get("job_id"), found.get("lease_epoch")
            if _is_int(job_id) and _is_int(epoch):
                return job_id, epoch
    return None, None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def describe_errors(exc: ValidationError) -> str:
    """The first few validation errors, each as `where: what`."""
    parts = []
    for error in exc.errors()[:REASONS_SHOWN]:
        where = ".".join(str(part) for part in error["loc"])
        message = error["msg"].removeprefix("Value error, ")
        parts.append(f"{where}: {message}" if where else message)
    more = exc.error_count() - REASONS_SHOWN
    if more > 0:
        parts.append(f"and {more} more")
    return "; ".join(parts)
