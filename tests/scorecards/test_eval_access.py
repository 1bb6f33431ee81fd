"""Someone outside the workspace gets 404 from every page and endpoint of the eval workspace,
over REST (API key) and as pages (session)."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pytest
from bulk import seeded_run
from django.test import Client

from accounts.services import api_key_create
from scorecards.models import Run

pytestmark = pytest.mark.django_db


def test_an_outsider_gets_404_on_every_new_endpoint_and_page(
    client: Client, alice: Any, charlie: Any, workspace: Any
) -> None:
    run = seeded_run(alice, cases=3, verdict=lambda c, r: "fail")
    seeded_run(alice, cases=3)
    rest = Client(HTTP_AUTHORIZATION=f"Bearer {api_key_create(user=charlie).key}")
    gets = [
        f"/api/runs/{run.pk}",
        f"/api/runs/{run.pk}/results",
        f"/api/runs/{run.pk}/results?verdict=fail",
        f"/api/runs/{run.pk}/results.csv",
        f"/api/runs/{run.pk}/results.jsonl",
        f"/api/runs/{run.pk}/cases/c0",
        f"/api/runs/{run.pk}/cases?key=c0",
        f"/api/runs/{run.pk}/compare",
        "/api/workspaces/acme/runs",
    ]
    for path in gets:
        assert rest.get(path).status_code == 404, path
    rerun = rest.post(
        f"/api/runs/{run.pk}/rerun", {"only": "failed"}, content_type="application/json"
    )
    assert rerun.status_code == 404

    client.force_login(charlie)
    for path in (
        f"/runs/{run.pk}/",
        f"/runs/{run.pk}/cases/c0/",
        f"/runs/{run.pk}/cases/?key=c0",
        "/w/acme/harnesses/bulk/",
        f"/w/acme/compare?b={run.pk}",
    ):
        assert client.get(path).status_code == 404, path
    assert client.post(f"/runs/{run.pk}/rerun", {"only": "failed"}).status_code == 404
    assert Run.objects.count() == 2


def test_the_exports_hold_every_result_with_its_input_and_expected_value(
    client: Client, alice: Any, workspace: Any
) -> None:
    run = seeded_run(alice, cases=5, verdict=lambda c, r: "fail" if c == 3 else "pass",
                     output=lambda c, r: f'line one\nsaid "{c}", then, more')  # fmt: skip
    client.force_login(alice)

    csv_reply: Any = client.get(f"/api/runs/{run.pk}/results.csv")
    jsonl_reply: Any = client.get(f"/api/runs/{run.pk}/results.jsonl")

    rows = list(csv.DictReader(io.StringIO(b"".join(csv_reply.streaming_content).decode())))
    lines = [json.loads(line) for line in b"".join(jsonl_reply.streaming_content).splitlines()]
    assert csv_reply["Content-Type"].startswith("text/csv")
    assert 'filename="run-' in csv_reply["Content-Disposition"]
    assert [r["case"] for r in rows] == [f"c{i}" for i in range(5)]
    assert rows[3]["verdict"] == "fail" and rows[3]["output"] == 'line one\nsaid "3", then, more'
    assert json.loads(rows[0]["input"]) == {"i": 0} and rows[0]["cost_usd"] == "0.001"
    assert [(x["case"], x["verdict"], x["expected"]) for x in lines][3] == (
        "c3",
        "fail",
        "answer 3",
    )
    assert lines[0]["provenance"]["ran_on"] == "self-hosted"
