"""Reads: what the pages, the API and MCP show. Nothing here writes.

Every read starts from the caller's membership, so someone outside a workspace gets
NotFound for everything in it.
"""

from scorecards.selectors.cases import case_detail
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
    run_versions_get,
)
from scorecards.selectors.compare import (
    CHANGED,
    FIXED,
    MISSING,
    REGRESSED,
    UNCHANGED,
    CaseChange,
    Comparison,
    compare_reply,
    output_diffs,
    run_compare,
    verdict_change,
)
from scorecards.selectors.cursors import cursor_decode, cursor_encode
from scorecards.selectors.history import harness_history
from scorecards.selectors.ledger import shadow_grade, shadow_summary
from scorecards.selectors.results import (
    FAILURES,
    MAX_RESULTS_PAGE,
    RESULTS_PAGE,
    limit_parse,
    result_items,
    results_after,
    results_of,
    results_page,
    run_reply,
    verdicts_parse,
    with_previews,
)
from scorecards.selectors.runs import (
    RUNTIME_ANY,
    RuntimeChoice,
    comparable_runs,
    run_baseline,
    run_get,
    run_item,
    run_list,
    run_logs,
    runs_of,
    runs_page,
    runtime_choices,
    runtime_label,
)
from scorecards.selectors.summary import run_summary, score_distribution
from scorecards.selectors.waiting import run_waiting
from scorecards.selectors.workspaces import membership_for, memberships_of, require_role

__all__ = [
    "CHANGED",
    "FAILURES",
    "FIXED",
    "MAX_RESULTS_PAGE",
    "MISSING",
    "REGRESSED",
    "RESULTS_PAGE",
    "RUNTIME_ANY",
    "UNCHANGED",
    "CaseChange",
    "Comparison",
    "DatasetEntry",
    "HarnessEntry",
    "RuntimeChoice",
    "VersionHistory",
    "case_detail",
    "comparable_runs",
    "compare_reply",
    "cursor_decode",
    "cursor_encode",
    "dataset_get",
    "dataset_histories",
    "dataset_list",
    "harness_get",
    "harness_histories",
    "harness_history",
    "harness_list",
    "limit_parse",
    "membership_for",
    "memberships_of",
    "output_diffs",
    "require_role",
    "result_items",
    "results_after",
    "results_of",
    "results_page",
    "run_baseline",
    "run_compare",
    "run_get",
    "run_item",
    "run_list",
    "run_logs",
    "run_reply",
    "run_summary",
    "run_versions_get",
    "run_waiting",
    "runs_of",
    "runs_page",
    "runtime_choices",
    "runtime_label",
    "score_distribution",
    "shadow_grade",
    "shadow_summary",
    "verdict_change",
    "verdicts_parse",
    "with_previews",
]
