"""The lease queue: jobs keyed by (owner, runner | any), leases fenced by (job, epoch).

These primitives change queue state and return what they changed; they never write
results or run state. Callers that settle a job (scorecards) wrap them in their own
transaction together with what they record. By concern:

- `claim`: the lease of the oldest claimable jobs, each with a new attempt;
- `longpoll`: waiting for a claimable job, and the one hand-back of a lease nobody received;
- `fence`: every call after a lease (heartbeat, failure), and taking back a lapsed lease;
- `settle`: results, and the refused late ones kept as shadows;
- `handback`: leases given back without spending an attempt, and runner pauses;
- `logs`: a job's log lines, bounded per job;
- `admission`: parking a dispatch's jobs (and their statistics after a large one) and
  admitting pending ones;
- `activity`: which runners are active, and the idle timeout that runs off it;
- `sweeps`: expiry, idle queues, revoked runners, cancel and operator actions;
- `selectors`: reads;
- `rows`: the row-level helpers they share.
"""

from runners.queue.activity import absence, jobs_idle, runners_active
from runners.queue.admission import (
    ParkWithRun,
    admit_plan,
    analyse_if_outgrown,
    jobs_admit,
    jobs_park,
    jobs_park_with_run,
    judge_jobs_queue,
    parks_with_run,
)
from runners.queue.claim import LeasedJob, claim_plan, job_lease
from runners.queue.fence import RESUMED, Settlement, job_fail, job_heartbeat
from runners.queue.handback import job_hand_back, job_release, runner_pause
from runners.queue.logs import job_report_log, logs_append
from runners.queue.longpoll import cancel_once, job_lease_wait
from runners.queue.rows import lease_ttl
from runners.queue.selectors import (
    jobs_of_revoked_runners,
    leases_expired,
    leases_lapsed_for_good,
    not_held,
    run_active_count,
    run_has_pending,
    run_job_counts,
    run_judges_open,
    run_load,
    run_load_plan,
)
from runners.queue.settle import KEPT, Outcome, jobs_settle
from runners.queue.sweeps import (
    Ended,
    job_abort,
    job_hold,
    job_requeue,
    jobs_cancel,
    jobs_idle_expire,
    jobs_of_revoked_runner_end,
    jobs_release_from,
    lapsed_lease_end,
    lease_expire,
)

__all__ = [
    "KEPT",
    "RESUMED",
    "Ended",
    "LeasedJob",
    "Outcome",
    "ParkWithRun",
    "Settlement",
    "absence",
    "admit_plan",
    "analyse_if_outgrown",
    "cancel_once",
    "claim_plan",
    "job_abort",
    "job_fail",
    "job_hand_back",
    "job_heartbeat",
    "job_hold",
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
    "jobs_park_with_run",
    "jobs_release_from",
    "jobs_settle",
    "judge_jobs_queue",
    "lapsed_lease_end",
    "lease_expire",
    "lease_ttl",
    "leases_expired",
    "leases_lapsed_for_good",
    "logs_append",
    "not_held",
    "parks_with_run",
    "run_active_count",
    "run_has_pending",
    "run_job_counts",
    "run_judges_open",
    "run_load",
    "run_load_plan",
    "runner_pause",
    "runners_active",
]
