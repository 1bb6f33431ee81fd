"""A run's results as CSV or JSON Lines, streamed in settlement order with constant memory.

Rows are read in keyset chunks (`seq > last`, through the (run, seq) index): no long-lived
cursor, no transaction held open, and only one chunk in memory however many results a run
has. Under ASGI (daphne) the stream is an async iterator — Django would read a synchronous
one whole into memory before sending it — whose chunks are read off the event loop.
"""

from __future__ import annotations

import csv
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

from asgiref.sync import sync_to_async
from django.http import StreamingHttpResponse

from scorecards.models import CaseResult, Run

# Rows per read: a chunk of outputs is what an export holds in memory at once.
EXPORT_CHUNK = 200

COLUMNS = (
    "seq",
    "case__key",
    "repeat",
    "verdict",
    "score",
    "status",
    "exit_code",
    "duration_ms",
    "usage",
    "provenance",
    "runner_id",
    "created_at",
    "reason",
    "error",
    "output",
    "stderr_tail",
    "case__input",
    "case__expected",
    "judged_by",
    "verdict_by__username",
    "grader_verdict",
    "verify",
    "tampered",
    "stopped",
    "phases",
)
CSV_HEADER = (
    "case",
    "repeat",
    "seq",
    "verdict",
    "score",
    "status",
    "exit_code",
    "duration_ms",
    "cost_usd",
    "input_tokens",
    "output_tokens",
    "runner",
    "ran_on",
    "by",
    "settled_at",
    "reason",
    "error",
    "output",
    "input",
    "expected",
    "tampered",
    "verify_s",
    "judged_by",
    "verdict_by",
    "grader_verdict",
)


def _chunk(run_id: int, after: int) -> list[dict[str, Any]]:
    rows = (
        CaseResult.objects.filter(run_id=run_id, seq__gt=after)
        .order_by("seq")
        .values_list(*COLUMNS)[:EXPORT_CHUNK]
    )
    return [dict(zip(COLUMNS, row, strict=True)) for row in rows]


def _rows(run_id: int) -> Iterator[dict[str, Any]]:
    after = 0
    while chunk := _chunk(run_id, after):
        yield from chunk
        after = chunk[-1]["seq"]


async def _rows_async(run_id: int) -> AsyncIterator[dict[str, Any]]:
    after = 0
    read = sync_to_async(_chunk)
    while chunk := await read(run_id, after):
        for row in chunk:
            yield row
        after = chunk[-1]["seq"]


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def jsonl_line(row: dict[str, Any]) -> str:
    return (
        _json(
            {
                "case": row["case__key"],
                "repeat": row["repeat"],
                "seq": row["seq"],
                "verdict": row["verdict"],
                "score": row["score"],
                "status": row["status"],
                "exit_code": row["exit_code"],
                "duration_ms": row["duration_ms"],
                "usage": row["usage"],
                "provenance": row["provenance"],
                "runner": row["runner_id"],
                "settled_at": row["created_at"].isoformat(),
                "reason": row["reason"],
                "error": row["error"],
                "output": row["output"],
                "stderr_tail": row["stderr_tail"],
                "input": row["case__input"],
                "expected": row["case__expected"],
                "judged_by": row["judged_by"] or None,
                # A person's verdict: who set it, and what the grader says underneath.
                "verdict_by": row["verdict_by__username"],
                "grader_verdict": row["grader_verdict"] or None,
                # Protocol 4: the verifier's report, the protected paths the agent changed,
                # what stopped it, each phase's seconds (null when none).
                "verify": row["verify"],
                "tampered": row["tampered"],
                "stopped": row["stopped"],
                "phases": row["phases"],
            }
        )
        + "\n"
    )


class _Line:
    """csv.writer's file: hands back what was written instead of keeping it."""

    def write(self, value: str) -> str:
        return value


_WRITER = csv.writer(_Line())

# A cell a spreadsheet would read as a formula (`=HYPERLINK(…)`, `+cmd|…`, `@SUM(…)`), or
# whose tab or carriage return some programs strip first. JSONL keeps every value exact.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def neutralized(value: Any) -> Any:
    """A text cell that starts like a formula, with a leading `'` so it stays text."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def csv_line(row: dict[str, Any]) -> str:
    usage = row["usage"] or {}
    provenance = row["provenance"] or {}
    return str(
        _WRITER.writerow(
            neutralized(cell)
            for cell in [
                row["case__key"],
                row["repeat"],
                row["seq"],
                row["verdict"],
                row["score"],
                row["status"],
                "" if row["exit_code"] is None else row["exit_code"],
                row["duration_ms"],
                usage.get("total_cost_usd", ""),
                usage.get("input_tokens", ""),
                usage.get("output_tokens", ""),
                provenance.get("runner", ""),
                provenance.get("ran_on", ""),
                provenance.get("by", ""),
                row["created_at"].isoformat(),
                row["reason"],
                row["error"],
                row["output"],
                _json(row["case__input"]),
                _json(row["case__expected"]),
                "; ".join(f"{t['path']} ({t['change']})" for t in row["tampered"] or []),
                (row["phases"] or {}).get("verify_s", ""),
                _json(row["judged_by"]) if row["judged_by"] else "",
                row["verdict_by__username"] or "",
                row["grader_verdict"],
            ]
        )
    )


def _lines(run_id: int, fmt: str) -> Iterator[str]:
    if fmt == "csv":
        yield str(_WRITER.writerow(CSV_HEADER))
    line = csv_line if fmt == "csv" else jsonl_line
    for row in _rows(run_id):
        yield line(row)


async def _lines_async(run_id: int, fmt: str) -> AsyncIterator[str]:
    if fmt == "csv":
        yield str(_WRITER.writerow(CSV_HEADER))
    line = csv_line if fmt == "csv" else jsonl_line
    async for row in _rows_async(run_id):
        yield line(row)


CONTENT_TYPES = {"csv": "text/csv; charset=utf-8", "jsonl": "application/x-ndjson"}


def export_response(run: Run, fmt: str, *, asynchronous: bool) -> StreamingHttpResponse:
    """The run's results as a download, streamed (async iterator under ASGI)."""
    content = _lines_async(run.pk, fmt) if asynchronous else _lines(run.pk, fmt)
    response = StreamingHttpResponse(content, content_type=CONTENT_TYPES[fmt])
    response["Content-Disposition"] = f'attachment; filename="run-{run.pk}-results.{fmt}"'
    response["X-Content-Type-Options"] = "nosniff"
    return response
