"""Reads: what the pages, the API and MCP show. Nothing here writes.

Every read starts from the caller's membership, so someone outside a workspace gets
NotFound for everything in it.
"""

from scorecards.selectors.catalog import (
    DatasetEntry,
    HarnessEntry,
    VersionHistory,
    dataset_get,
    dataset_histories,
    dataset_list,
    harness_get,
    harness_histories,
    harness_list,
)
from scorecards.selectors.compare import (
    CHANGED,
    FIXED,
    MISSING,
    REGRESSED,
    UNCHANGED,
    CaseChange,
    Comparison,
    run_compare,
    verdict_change,
)
from scorecards.selectors.ledger import shadow_grade, shadow_summary
from scorecards.selectors.runs import (
    RUNTIME_ANY,
    RuntimeChoice,
    comparable_runs,
    run_get,
    run_list,
    run_logs,
    run_reply,
    run_summary,
    runtime_choices,
    runtime_label,
)
from scorecards.selectors.waiting import run_waiting
from scorecards.selectors.workspaces import membership_for, memberships_of, require_role

__all__ = [
    "CHANGED",
    "FIXED",
    "MISSING",
    "REGRESSED",
    "RUNTIME_ANY",
    "UNCHANGED",
    "CaseChange",
    "Comparison",
    "DatasetEntry",
    "HarnessEntry",
    "RuntimeChoice",
    "VersionHistory",
    "comparable_runs",
    "dataset_get",
    "dataset_histories",
    "dataset_list",
    "harness_get",
    "harness_histories",
    "harness_list",
    "membership_for",
    "memberships_of",
    "require_role",
    "run_compare",
    "run_get",
    "run_list",
    "run_logs",
    "run_reply",
    "run_summary",
    "run_waiting",
    "runtime_choices",
    "runtime_label",
    "shadow_grade",
    "shadow_summary",
    "verdict_change",
]
