"""The trace and screen tools over real HTTP, as any MCP client calls them: a batch sent twice
stores its events once, the frame's base64 is bounded before it is decoded, what is not a
whole image is a tool error, a stale lease is refused; and `get_case_trace` and `search_runs`
for agents."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest
from bulk import seeded_run, traces_add

from accounts.services import api_key_create
from scorecards.traces.models import ScreenFrame, TraceEvent
from tests.live import LiveServer, daphne
from tests.mcpgateway.mcp_client import call, error_text, structured
from tests.mcpgateway.test_runner_tools import dispatch, lease, pair_via_rest
from tests.runnercli.images import png
from tests.suites import suite

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def traces_process(django_db_setup: Any, tmp_path_factory: Any) -> Iterator[LiveServer]:
    where = tmp_path_factory.mktemp("traces")
    blobs = json.dumps({"location": str(where / "blobs"), "allow_overwrite": True})
    with daphne(where, EVERDICT_BLOB_STORAGE_OPTIONS=blobs) as server:
        yield server


@pytest.fixture
def gateway(traces_process: LiveServer, transactional_db: Any) -> LiveServer:
    return traces_process


@pytest.fixture
def leased(gateway: LiveServer, alice: Any, workspace: Any) -> dict[str, Any]:
    suite(alice, cases=1)
    key = api_key_create(user=alice).key
    paired = pair_via_rest(gateway, key)
    run = dispatch(gateway, key, paired["id"])
    job = lease(gateway, paired["token"], protocol=3, features=["trace", "screens"])["job"]
    fence = {"job_id": job["job_id"], "lease_epoch": job["lease_epoch"]}
    return {"token": paired["token"], "key": key, "run": run, "fence": fence}


def event(seq: int) -> dict[str, Any]:
    return {"seq": seq, "ts": 1_000 + seq, "kind": "message", "name": "assistant", "data": {}}


def test_a_batch_sent_twice_stores_its_events_once(gateway: Any, leased: dict[str, Any]) -> None:
    url, token, fence = gateway.url, leased["token"], leased["fence"]
    batch = {**fence, "events": [event(n) for n in range(3)]}
    first = structured(call(url, token, "report_case_trace", batch))
    again = structured(call(url, token, "report_case_trace", batch))
    assert first == again == {"accepted": True, "reason": "", "last_seq": 2}
    assert TraceEvent.objects.count() == 3
    bad = call(url, token, "report_case_trace", {**fence, "events": [{**event(3), "kind": "x"}]})
    assert bad.is_error and "kind" in error_text(bad)
    stale = {**fence, "lease_epoch": fence["lease_epoch"] + 1, "events": [event(3)]}
    refused = structured(call(url, token, "report_case_trace", stale))
    assert refused["accepted"] is False and refused["reason"].startswith("stale lease")


def test_a_frame_is_taken_only_whole_and_within_its_bound(
    gateway: Any, leased: dict[str, Any]
) -> None:
    url, token, fence = gateway.url, leased["token"], leased["fence"]

    def screen(data: bytes | str, media_type: str = "image/png") -> Any:
        encoded = data if isinstance(data, str) else base64.b64encode(data).decode()
        args = {**fence, "media_type": media_type, "data": encoded, "taken_at": 5}
        return call(url, token, "report_case_screen", args)

    # The strip keeps every frame while it has room: it says so of the next one.
    assert structured(screen(png())) == {"accepted": True, "reason": "", "keeps_next": True}
    assert ScreenFrame.objects.count() == 1
    by_blob = {**fence, "media_type": "image/png", "taken_at": 6}
    unsent = {"sha256": "a" * 64, "size": 300, "media_type": "image/png"}
    huge = {**unsent, "size": 600 * 1024}
    refusals = [
        (call(url, token, "report_case_screen", {**by_blob, "blob": unsent}), "not uploaded"),
        (call(url, token, "report_case_screen", {**by_blob, "blob": huge}), "at most"),
        (screen(b"GIF89a" + b"\x00" * 30), "not a PNG or JPEG"),
        (screen(png()[:-12]), "cut short"),
        (screen(png(), "image/gif"), "media_type"),
        (screen("A" * (700 * 1024)), "data"),
        (screen("not base64!"), "base64"),
    ]
    for result, says in refusals:
        assert result.is_error and says in error_text(result), error_text(result)
    assert ScreenFrame.objects.count() == 1


def test_an_agent_reads_the_trace_with_get_case_trace(gateway: Any, leased: dict[str, Any]) -> None:
    url, fence = gateway.url, leased["fence"]
    batch = {**fence, "events": [event(n) for n in range(12)]}
    structured(call(url, leased["token"], "report_case_trace", batch))
    run_id = leased["run"]["id"]
    args = {"run_id": run_id, "key": "c0", "after_seq": 4, "limit": 5}
    reply = structured(call(url, leased["key"], "get_case_trace", args))
    assert [e["seq"] for e in reply["events"]] == [5, 6, 7, 8, 9]
    assert (reply["next_after_seq"], reply["kept"], reply["running"]) == (9, 12, True)
    refused = call(url, leased["token"], "get_case_trace", {"run_id": run_id, "key": "c0"})
    assert refused.is_error
    unknown = call(url, leased["key"], "get_case_trace", {"run_id": run_id, "key": "c0", "x": 1})
    assert unknown.is_error


def test_an_agent_searches_settled_traces_with_search_runs(
    gateway: Any, alice: Any, charlie: Any, workspace: Any
) -> None:
    run = seeded_run(alice, cases=3, attempts=True)
    boom = {"kind": "tool_result", "output": "Traceback …\nTypeError: boom <here>"}
    traces_add(run, events=2, data=lambda c, n: boom if (c, n) == (1, 1) else {"text": "fine"})
    key = api_key_create(user=alice).key
    args = {"query": "typeerror: BOOM", "run_id": run.pk}
    reply = structured(call(gateway.url, key, "search_runs", args))
    assert [m["case"] for m in reply["matches"]] == ["c1"] and reply["method"] == "index"
    assert reply["matches"][0]["hits"][0]["snippet"] == (
        "Traceback …\n<mark>TypeError: boom</mark> &lt;here&gt;"
    )
    wide = structured(call(gateway.url, key, "search_runs", {"query": "boom", "workspace": "acme"}))
    assert [m["case"] for m in wide["matches"]] == ["c1"]
    stranger = api_key_create(user=charlie).key
    assert call(gateway.url, stranger, "search_runs", args).is_error
    too_long = call(gateway.url, key, "search_runs", {**args, "query": "x" * 10_000})
    assert too_long.is_error and "At most 500 characters" in error_text(too_long)
