"""A number in a query is ASCII digits: `³` or an Arabic-Indic digit, which `str.isdigit()`
accepts and `int()` refuses or reads otherwise, is a 400 naming the parameter, never a 500."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.test import Client

from accounts.services import api_key_create
from core.errors import Invalid
from runners import queue
from scorecards.selectors.cursors import cursor_decode
from scorecards.services import result_submit
from tests.scorecards.test_pages import _socket, logged_in
from tests.suites import ECHO_SPEC, completed, pair, start, suite

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


@pytest.mark.parametrize(
    ("query", "parameter"),
    [
        ("artifacts?key=c0&path=out.txt&repeat=%D9%A1", "repeat"),
        ("files?key=c0&path=.&repeat=%D9%A1", "repeat"),
        ("trace?key=c0&repeat=%D9%A1", "repeat"),
        ("screens?key=c0&repeat=%D9%A1", "repeat"),
        ("trace?key=c0&repeat=0&after_seq=%D9%A1", "after_seq"),
        ("logs?after=%D9%A1", "after"),
        ("verdict?key=c0&repeat=%D9%A1", "repeat"),
    ],
)
def test_a_repeat_or_a_seq_in_other_digits_is_a_400_never_another_repeat(
    alice: Any, workspace: Any, query: str, parameter: str
) -> None:
    suite(alice, spec=ECHO_SPEC, name="h", cases=1)
    run = start(alice, pair(alice), harness="h", dataset="h", repeats=2)
    client = Client(HTTP_AUTHORIZATION=f"Bearer {api_key_create(user=alice).key}")

    method = client.delete if query.startswith("verdict") else client.get
    reply = method(f"/api/runs/{run.pk}/{query}")

    assert reply.status_code == 400, reply.content
    assert parameter in reply.json()


def test_a_cursor_in_other_digits_is_invalid_not_read_as_another_position() -> None:
    # A cursor whose position is an Arabic-Indic one (percent-encoded), which `int()` reads as 1.
    cursor = base64.b64encode(b"p=%D9%A1").decode()

    with pytest.raises(Invalid) as refused:
        cursor_decode(cursor)

    assert "cursor" in refused.value.detail


@pytest.mark.django_db(transaction=True)
def test_the_run_socket_refuses_a_sequence_number_in_other_digits(
    client: Client, alice: Any, workspace: Any
) -> None:
    suite(alice, spec=ECHO_SPEC, name="h", cases=1)
    run = start(alice, pair(alice), harness="h", dataset="h")
    socket = _socket(logged_in(client, alice), run.pk, after="%D9%A1")  # type: ignore[arg-type]

    async def closed() -> tuple[bool, Any]:
        connected, code = await socket.connect()
        await socket.disconnect()
        return connected, code

    assert async_to_sync(closed)() == (False, 4400)


def test_a_regrade_from_the_page_with_a_version_in_other_digits_regrades_nothing(
    client: Client, alice: Any, workspace: Any
) -> None:
    suite(alice, spec=ECHO_SPEC, name="h", cases=1)
    laptop = pair(alice)
    run = start(alice, laptop, harness="h", dataset="h")
    (grant,) = queue.job_lease(runner=laptop)
    job = {"runner": laptop, "job_id": grant.job.pk, "lease_epoch": grant.job.lease_epoch}
    assert result_submit(**job, result=completed("hello 0")).accepted

    page = logged_in(client, alice).post(
        f"/runs/{run.pk}/regrade", {"harness_version": "\u0661"}, follow=True
    )

    run.refresh_from_db()
    assert run.regraded_at is None
    assert "in ASCII digits" in page.content.decode()
