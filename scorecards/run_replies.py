"""The run reply shape, shared by the REST API, the pages and the MCP `get_run` tool."""

from __future__ import annotations

from typing import Any

from scorecards.models import Run
from scorecards.services import run_summary


def run_reply(run: Run) -> dict[str, Any]:
    """`{id, workspace, status, runtime, submitted_by, created_at, finished_at, summary,
    events, results}` — `results` holds the settled cases."""
    results = run.results.select_related("case", "runner").order_by("case__position")
    return {
        "id": run.pk,
        "workspace": run.workspace.slug,
        "harness": {"name": run.harness.name, "version": run.harness.version},
        "dataset": {"name": run.dataset.name, "version": run.dataset.version},
        "status": run.status,
        "runtime": run.runtime,
        "concurrency": run.concurrency,
        "submitted_by": run.submitted_by.get_username(),
        "created_at": run.created_at.isoformat(),
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        "summary": run_summary(run),
        "events": [
            {"at": e.at.isoformat(), "level": e.level, "message": e.message}
            for e in run.events.all()
        ],
        "results": [
            {
                "case": r.case.key,
                "verdict": r.verdict,
                "score": r.score,
                "status": r.status,
                "output": r.output,
                "error": r.error,
                "duration_ms": r.duration_ms,
                "usage": r.usage,
                "provenance": r.provenance,
                "runner": r.runner_id,
            }
            for r in results
        ],
    }
