"""Writes: every change to workspaces, the catalog, runs and results goes through here.

One service per action, shared by the pages, the REST API and the MCP tools.
"""

from scorecards.services.catalog import dataset_create, dataset_parse_jsonl, harness_create
from scorecards.services.leases import lease_hand_back, lease_heartbeat
from scorecards.services.pushes import DatasetFile, HarnessFile, catalog_push
from scorecards.services.reruns import RERUN_CHOICES, rerun_cases, run_rerun
from scorecards.services.results import (
    failure_report,
    provenance_for,
    result_submit,
    results_submit,
)
from scorecards.services.runs import (
    MAX_BUDGET_USD,
    MAX_CONCURRENCY,
    MAX_METADATA_BYTES,
    MAX_REPEATS,
    MIN_BUDGET_USD,
    run_cancel,
    run_start,
    runtime_resolve,
)
from scorecards.services.sweeps import (
    SCHEDULER_STEPS,
    operator_job_fail,
    operator_job_requeue,
    scheduler_complete_one_run,
    scheduler_end_one_lapsed_lease,
    scheduler_expire_one_idle_run,
    scheduler_expire_one_lease,
    scheduler_settle_one_revoked,
)
from scorecards.services.workspaces import member_add, workspace_create, workspace_update

__all__ = [
    "MAX_BUDGET_USD",
    "MAX_CONCURRENCY",
    "MAX_METADATA_BYTES",
    "MAX_REPEATS",
    "MIN_BUDGET_USD",
    "RERUN_CHOICES",
    "SCHEDULER_STEPS",
    "DatasetFile",
    "HarnessFile",
    "catalog_push",
    "dataset_create",
    "dataset_parse_jsonl",
    "failure_report",
    "harness_create",
    "lease_hand_back",
    "lease_heartbeat",
    "member_add",
    "operator_job_fail",
    "operator_job_requeue",
    "provenance_for",
    "rerun_cases",
    "result_submit",
    "results_submit",
    "run_cancel",
    "run_rerun",
    "run_start",
    "runtime_resolve",
    "scheduler_complete_one_run",
    "scheduler_end_one_lapsed_lease",
    "scheduler_expire_one_idle_run",
    "scheduler_expire_one_lease",
    "scheduler_settle_one_revoked",
    "workspace_create",
    "workspace_update",
]
