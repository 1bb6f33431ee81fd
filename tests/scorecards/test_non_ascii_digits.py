"""A number in a query is ASCII digits: `³` or an Arabic-Indic digit, which `str.isdigit()`
accepts and `int()` refuses or reads otherwise, is a 400 naming the parameter, never a 500."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from accounts.services import api_key_create
from tests.suites import ECHO_SPEC, pair, start, suite

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("query", "parameter"),
    [
        ("compare?baseline=%C2%B3", "baseline"),
        ("compare?baseline=%D9%A1", "baseline"),
        ("results?limit=%C2%B3", "limit"),
        ("results?limit=%D9%A1", "limit"),
    ],
)
def test_a_number_that_is_not_ascii_digits_is_a_400(
    alice: Any, workspace: Any, query: str, parameter: str
) -> None:
    suite(alice, spec=ECHO_SPEC, name="h", cases=1)
    run = start(alice, pair(alice), harness="h", dataset="h")
    client = Client(HTTP_AUTHORIZATION=f"Bearer {api_key_create(user=alice).key}")

    reply = client.get(f"/api/runs/{run.pk}/{query}")

    assert reply.status_code == 400, reply.content
    assert parameter in reply.json()
