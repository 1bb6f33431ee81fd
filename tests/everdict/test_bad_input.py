"""Bad input stays a 4xx and changes nothing: JSON nested too deep, ids and cursors written in
other scripts' digits (read by `int()` as another id, or a crash), a proxied /metrics call."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from accounts.services import api_key_create
from scorecards.models import DatasetVersion, Run
from tests.suites import pair, start, suite

pytestmark = pytest.mark.django_db

ARABIC_INDIC = str.maketrans(
    "0123456789", "\u0660\u0661\u0662\u0663\u0664\u0665\u0666\u0667\u0668\u0669"
)


@pytest.fixture
def api(alice: Any, workspace: Any) -> Client:
    return Client(headers={"Authorization": f"Bearer {api_key_create(user=alice).key}"})


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize("depth", [150, 100_000])
def test_json_nested_too_deep_is_a_400_naming_the_bound(api: Client, depth: int) -> None:
    body = '{"name": "deep", "cases": [{"key": "k", "input": ' + nested(depth) + "}]}"
    reply = api.post("/api/workspaces/acme/datasets", body, content_type="application/json")
    assert reply.status_code == 400
    assert "nested deeper than 100 levels" in reply.json()["detail"]
    assert not DatasetVersion.objects.exists()


def test_a_jsonl_line_nested_too_deep_is_a_400(api: Client) -> None:
    line = json.dumps({"key": "k", "expected": "x"})[:-1] + ', "input": ' + nested(5000) + "}"
    reply = api.post(
        "/api/workspaces/acme/datasets?name=deep", line, content_type="application/jsonl"
    )
    assert 400 <= reply.status_code < 500
    assert not DatasetVersion.objects.exists()


@pytest.mark.parametrize("after", ["²", "\u0661", "1\u0662", "-1", "1.0", " 1"])
def test_a_log_cursor_in_anything_but_ascii_digits_is_a_400(
    api: Client, alice: Any, after: str
) -> None:
    suite(alice)
    run = start(alice, pair(alice))
    reply = api.get(f"/api/runs/{run.pk}/logs", {"after": after})
    assert reply.status_code == 400
    assert "after" in reply.json()


def test_a_runner_id_in_other_scripts_digits_is_refused_not_read_as_another_id(
    api: Client, alice: Any
) -> None:
    suite(alice)
    laptop = pair(alice)
    runtime = f"self:{str(laptop.pk).translate(ARABIC_INDIC)}"
    body = {"harness": "echo", "dataset": "echo", "runtime": runtime}
    reply = api.post("/api/workspaces/acme/runs", body, content_type="application/json")
    assert reply.status_code == 400
    assert "runtime" in reply.json()
    assert not Run.objects.exists()


@pytest.mark.parametrize("version", ["\u0661", "²"])
def test_a_version_in_other_scripts_digits_is_a_400(api: Client, alice: Any, version: str) -> None:
    suite(alice)
    laptop = pair(alice)
    body = {
        "harness": "echo",
        "harness_version": version,
        "dataset": "echo",
        "runtime": f"self:{laptop.pk}",
    }
    reply = api.post("/api/workspaces/acme/runs", body, content_type="application/json")
    assert reply.status_code == 400
    assert "harness_version" in reply.json()
    assert not Run.objects.exists()


@pytest.mark.parametrize("value", ["²", "\u0661"])
def test_the_compare_page_refuses_run_ids_in_other_scripts_digits(
    client: Client, alice: Any, workspace: Any, value: str
) -> None:
    client.force_login(alice)
    reply = client.get("/w/acme/compare", {"a": value, "b": "1"})
    assert reply.status_code == 400
    assert "ASCII digits" in reply.content.decode()


def test_metrics_in_loopback_mode_refuse_a_request_relayed_by_a_proxy(client: Client) -> None:
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 200
    relayed = client.get(
        "/metrics", REMOTE_ADDR="127.0.0.1", headers={"X-Forwarded-For": "203.0.113.9"}
    )
    assert relayed.status_code == 403
    forwarded = client.get(
        "/metrics", REMOTE_ADDR="127.0.0.1", headers={"Forwarded": "for=203.0.113.9"}
    )
    assert forwarded.status_code == 403
