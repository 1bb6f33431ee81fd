"""Exports and imports as a user tries them: a cell a spreadsheet would run as a formula is
neutralized in the CSV (the JSONL stays exact), and a JSON body over the limit is a 413 that
names the limit and the JSONL upload that streams."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pytest
from bulk import seeded_run
from django.test import Client

from accounts.services import api_key_create
from scorecards.exports import neutralized

pytestmark = pytest.mark.django_db

OUTPUTS = [
    '=HYPERLINK("http://evil.example","x")',
    "+cmd|' /C calc'!A0",
    "-2+3",
    "@SUM(A1:A2)",
    "\t=1+1",
    "\r=1+1",
    "plain answer",
    "a=b, not at the start",
]


def test_formula_cells_are_neutralized_in_the_csv_and_exact_in_the_jsonl(
    client: Client, alice: Any, workspace: Any
) -> None:
    run = seeded_run(alice, cases=len(OUTPUTS), output=lambda c, r: OUTPUTS[c])
    client.force_login(alice)
    csv_reply: Any = client.get(f"/api/runs/{run.pk}/results.csv")
    jsonl_reply: Any = client.get(f"/api/runs/{run.pk}/results.jsonl")
    rows = list(csv.DictReader(io.StringIO(b"".join(csv_reply.streaming_content).decode())))
    lines = [json.loads(x) for x in b"".join(jsonl_reply.streaming_content).splitlines()]
    assert [row["output"] for row in rows] == ["'" + text for text in OUTPUTS[:6]] + OUTPUTS[6:]
    assert [line["output"] for line in lines] == OUTPUTS
    # Numbers the export writes itself stay numbers.
    assert rows[0]["score"] in ("1.0", "0.0") and rows[0]["duration_ms"].isdigit()


def test_only_text_starting_like_a_formula_is_touched() -> None:
    assert neutralized(-1) == -1
    assert neutralized(0.5) == 0.5
    assert neutralized("") == ""
    assert neutralized("=x") == "'=x"


def test_a_json_body_over_the_limit_is_a_413_pointing_to_the_jsonl_upload(
    client: Client, alice: Any, workspace: Any, settings: Any
) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100_000
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {api_key_create(user=alice).key}"
    cases = [{"key": f"k{i}", "input": {"t": "x" * 100}, "expected": "y"} for i in range(2000)]
    body = json.dumps({"name": "big", "cases": cases})
    reply = client.post("/api/workspaces/acme/datasets", body, content_type="application/json")
    assert reply.status_code == 413
    detail = reply.json()["detail"]
    assert "over the limit of 100000 bytes" in detail
    assert "Content-Type: application/x-ndjson" in detail
    jsonl = "\n".join(json.dumps(case) for case in cases)
    taken = client.post(
        "/api/workspaces/acme/datasets?name=big", jsonl, content_type="application/x-ndjson"
    )
    assert taken.status_code == 201, taken.content
