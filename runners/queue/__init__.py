"""The lease queue: jobs keyed by (owner, runner | any), leases fenced by (job, epoch).

These primitives change queue state and return what they changed; they never write
results or run state. Callers that settle a job (scorecards) wrap them in their own
transaction together with what they record. By concern:

- `claim`: the lease of the oldest claimable jobs, each with a new attempt;
- `longpoll`: waiting for a claimable job, and the one hand-back of a lease nobody received;
- `fence`: every call after a lease (heartbeat, log, result, failure, release);
- `admission`: parking a dispatch's jobs and admitting pending ones;
- `sweeps`: expiry, idle queues, revoked runners, cancel and operator actions;
- `selectors`: reads;
- `rows`: the row-level helpers they share.
"""

from runners.queue.admission import jobs_admit, jobs_park
from runners.queue.claim import LeasedJob, claim_plan, job_lease
from runners.queue.fence import (
    Outcome,
    Settlement,
    job_fail,
    job_heartbeat,
    job_release,
    job_report_log,
    jobs_settle,
)
from runners.queue.longpoll import cancel_once, job_lease_wait
from runners.queue.rows import lease_ttl
from runners.queue.selectors import (
    jobs_idle,
    jobs_of_revoked_runners,
    leases_expired,
    run_active_count,
    run_has_pending,
    run_job_counts,
)
from runners.queue.sweeps import (
    Ended,
    job_abort,
    job_requeue,
    jobs_cancel,
    jobs_idle_expire,
    jobs_of_revoked_runner_end,
    jobs_release_from,
    lease_expire,
)

__all__ = [
    "Ended",
    "LeasedJob",
    "Outcome",
    "Settlement",
    "cancel_once",
    "claim_plan",
    "job_abort",
    "job_fail",
    "job_heartbeat",
    "job_lease",
    "job_lease_wait",
    "job_release",
    "job_report_log",
    "job_requeue",
    "jobs_admit",
    "jobs_cancel",
    "jobs_idle",
    "jobs_idle_expire",
    "jobs_of_revoked_runner_end",
    "jobs_of_revoked_runners",
    "jobs_park",
    "jobs_release_from",
    "jobs_settle",
    "lease_expire",
    "lease_ttl",
    "leases_expired",
    "run_active_count",
    "run_has_pending",
    "run_job_counts",
]
