"""A case key never holds a NUL, and PostgreSQL cannot even compare one: every endpoint that
names a case by its key answers such a key as a case that does not exist, never a 500."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from accounts.services import api_key_create
from tests.suites import ECHO_SPEC, pair, start, suite

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "path",
    [
        "screens?key=a%00b",
        "screens/0?key=a%00b",
        "trace?key=a%00b&attempt=5",
        "artifacts?key=a%00b&path=report.txt",
        "files?key=a%00b&path=report.txt",
        "cases/a%00b",
    ],
)
def test_a_key_with_a_nul_is_a_case_that_does_not_exist(
    alice: Any, workspace: Any, path: str
) -> None:
    suite(alice, spec=ECHO_SPEC, name="h", cases=1)
    run = start(alice, pair(alice), harness="h", dataset="h")
    client = Client(HTTP_AUTHORIZATION=f"Bearer {api_key_create(user=alice).key}")

    reply = client.get(f"/api/runs/{run.pk}/{path}")

    assert reply.status_code == 404, reply.content
    detail = reply.json()["detail"].lower()
    assert "not found" in detail or "no artifact" in detail


def test_a_persons_verdict_on_a_key_with_a_nul_is_refused_as_not_found(
    alice: Any, workspace: Any
) -> None:
    suite(alice, spec=ECHO_SPEC, name="h", cases=1)
    run = start(alice, pair(alice), harness="h", dataset="h")
    client = Client(HTTP_AUTHORIZATION=f"Bearer {api_key_create(user=alice).key}")

    reply = client.put(
        f"/api/runs/{run.pk}/verdict?key=a%00b", {"verdict": "pass"}, "application/json"
    )

    assert reply.status_code == 404, reply.content
