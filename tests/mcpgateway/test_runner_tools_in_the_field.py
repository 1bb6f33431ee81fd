"""Field-ready, over real HTTP: a lapsed lease taken back by its holder's heartbeat or result,
a refused late result kept as a shadow, a job handed back with a pause, the server's own
trouble (the database locked or refusing connections) answered as a retryable tool error,
a catastrophic grader pattern that stalls nobody, and limits that agree with the tools."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from django.db import connection

from accounts.services import api_key_create
from runnercli.protocol import PROTOCOL_VERSION, ToolFailure
from runnercli.protocol.jsonl import json_lines
from runners.models import AttemptStatus, JobAttempt, JobStatus, Runner, RunnerJob
from scorecards.models import CaseResult as CaseResultRow
from scorecards.services import dataset_create, harness_create, scheduler_expire_one_lease
from tests.live import LiveServer, metric, wait_metric
from tests.mcpgateway.conftest import live_server_fixtures
from tests.mcpgateway.mcp_client import call, error_text, rest, session, structured
from tests.suites import ECHO_SPEC, suite

pytestmark = pytest.mark.e2e

LEASE_TTL_S = 2
field_process, field = live_server_fixtures(
    "field",
    "field",
    EVERDICT_LEASE_TTL_S=LEASE_TTL_S,
    # A writer gives up after a second: a held write lock is soon the server's refusal.
    EVERDICT_SQLITE_BUSY_TIMEOUT_S=1,
    # A request waits 2 s for a connection from the pool before the refusal is answered.
    EVERDICT_DB_POOL_TIMEOUT_S=2,
)

RESULT = {
    "status": "completed",
    "exit_code": 0,
    "output": "hello 0\n",
    "duration_ms": 12,
    "fingerprint": {"os": "linux", "python": "3.11", "runnercli_version": "test"},
}


@pytest.fixture
def key(alice: Any, workspace: Any) -> str:
    suite(alice, cases=2)
    return api_key_create(user=alice).key


def pair(server: LiveServer, key: str, label: str = "laptop") -> dict[str, Any]:
    status, paired = rest(
        server.url, "POST", "/api/runners", key, {"label": label, "capabilities": ["python"]}
    )
    assert status == 201, paired
    return paired


def dispatch(server: LiveServer, key: str, runtime: str, name: str = "echo") -> dict[str, Any]:
    body = {"harness": name, "dataset": name, "runtime": runtime}
    status, run = rest(server.url, "POST", "/api/workspaces/acme/runs", key, body)
    assert status == 201, run
    return run


def lease(server: LiveServer, token: str) -> dict[str, Any]:
    reply = structured(call(server.url, token, "lease_job", {"protocol": PROTOCOL_VERSION}))
    assert reply["job"] is not None, reply
    return {"job_id": reply["job"]["job_id"], "lease_epoch": reply["job"]["lease_epoch"]}


def lapse() -> None:
    """Let the lease run out, then the scheduler's pass: the holder went silent. (Retried for
    a few seconds: on a loaded machine the lease may be stamped a little after it was asked.)"""
    time.sleep(LEASE_TTL_S + 0.5)
    deadline = time.monotonic() + 10
    while not scheduler_expire_one_lease():
        assert time.monotonic() < deadline, "the lease never expired"
        time.sleep(0.2)


def retryable(result: Any) -> ToolFailure:
    assert result.is_error, result
    failure = ToolFailure.model_validate(result.structured_content)
    assert failure.retryable and failure.code == "unavailable", failure
    assert failure.message in error_text(result)
    return failure


def test_a_lapsed_lease_is_taken_back_by_its_holders_heartbeat_then_result(
    field: LiveServer, key: str
) -> None:
    laptop = pair(field, key)
    token = laptop["token"]
    run = dispatch(field, key, f"self:{laptop['id']}")
    fence = lease(field, token)
    lapse()
    assert RunnerJob.objects.get(pk=fence["job_id"]).status == JobStatus.QUEUED

    beat = structured(call(field.url, token, "heartbeat_job", fence))
    assert beat == {"accepted": True, "reason": "resumed", "cancel": False, "resumed": True}
    lapse()
    ack = structured(call(field.url, token, "submit_job_result", {**fence, "result": RESULT}))

    assert ack == {"accepted": True, "reason": "resumed"}
    attempt = JobAttempt.objects.get(job_id=fence["job_id"])
    assert (attempt.status, attempt.resumes) == (AttemptStatus.SUCCEEDED, 2)
    assert attempt.gap_ms > 0
    status, scored = rest(field.url, "GET", f"/api/runs/{run['id']}", key)
    assert status == 200 and scored["results"][0]["verdict"] == "pass"
    assert any("resumed, not rerun" in e["message"] for e in scored["events"])


def test_a_late_result_after_another_runner_took_the_job_is_kept_as_a_shadow(
    field: LiveServer, key: str, admin_client: Any
) -> None:
    laptop, desk = pair(field, key), pair(field, key, "desk")
    dispatch(field, key, "self:any")
    fence = lease(field, laptop["token"])
    lapse()
    taken = lease(field, desk["token"])
    assert taken == {"job_id": fence["job_id"], "lease_epoch": fence["lease_epoch"] + 1}

    beat = structured(call(field.url, laptop["token"], "heartbeat_job", fence))
    assert (beat["accepted"], beat["resumed"]) == (False, False)
    late = structured(
        call(field.url, laptop["token"], "submit_job_result", {**fence, "result": RESULT})
    )

    assert late["accepted"] is False
    assert late["reason"].startswith("stale lease") and "kept as a shadow result" in late["reason"]
    attempt = JobAttempt.objects.get(job_id=fence["job_id"], epoch=fence["lease_epoch"])
    assert attempt.shadow_result is not None and attempt.shadow_result["output"] == "hello 0\n"
    assert not CaseResultRow.objects.exists()
    page = admin_client.get(f"/admin/runners/runnerjob/{fence['job_id']}/change/")
    assert page.status_code == 200
    assert "late result from laptop, attempt 1 (expired): would pass" in page.content.decode()


def test_release_job_hands_the_job_back_and_pauses_the_runner(field: LiveServer, key: str) -> None:
    laptop = pair(field, key)
    token = laptop["token"]
    dispatch(field, key, f"self:{laptop['id']}")
    fence = lease(field, token)
    until = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=1)
    naive = call(
        field.url,
        token,
        "release_job",
        {**fence, "reason": "rate-limited", "paused_until": "2030-01-01T00:00:00"},
    )
    assert naive.is_error and "timezone" in error_text(naive).lower()

    ack = structured(
        call(
            field.url,
            token,
            "release_job",
            {**fence, "reason": "rate-limited", "paused_until": until.isoformat()},
        )
    )

    assert ack == {"accepted": True, "reason": ""}
    job = RunnerJob.objects.get(pk=fence["job_id"])
    assert (job.status, job.attempts) == (JobStatus.QUEUED, 0)
    runner = Runner.objects.get(pk=laptop["id"])
    assert (runner.paused_until, runner.pause_reason) == (until, "rate-limited")
    idle = structured(call(field.url, token, "lease_job", {"protocol": PROTOCOL_VERSION}))
    assert idle["job"] is None
    again = structured(call(field.url, token, "release_job", {**fence, "reason": "again"}))
    assert again["accepted"] is False and "stale" in again["reason"]


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's write lock")
def test_a_locked_database_is_a_retryable_tool_error_and_the_call_lands_after(
    field: LiveServer, key: str
) -> None:
    laptop = pair(field, key)
    token = laptop["token"]
    dispatch(field, key, f"self:{laptop['id']}")
    fence = lease(field, token)
    locker = sqlite3.connect(connection.settings_dict["NAME"], timeout=30)
    try:
        locker.execute("BEGIN EXCLUSIVE")
        retryable(call(field.url, token, "heartbeat_job", fence))
        retryable(call(field.url, token, "submit_job_result", {**fence, "result": RESULT}))
    finally:
        locker.rollback()
        locker.close()
    ack = structured(call(field.url, token, "submit_job_result", {**fence, "result": RESULT}))
    assert ack == {"accepted": True, "reason": ""}
    assert CaseResultRow.objects.get().verdict == "pass"


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's connections")
def test_a_database_refusing_connections_is_a_retryable_tool_error_and_the_call_lands_after(
    field: LiveServer, key: str
) -> None:
    laptop = pair(field, key)
    token = laptop["token"]
    dispatch(field, key, f"self:{laptop['id']}")
    fence = lease(field, token)
    name = connection.settings_dict["NAME"]
    settings_dict = connection.settings_dict
    admin_url = (
        f"postgres://{settings_dict.get('USER') or 'postgres'}@"
        f"{settings_dict.get('HOST') or '127.0.0.1'}:{settings_dict.get('PORT') or 5432}/postgres"
    )
    connection.close()
    with psycopg.connect(admin_url, autocommit=True) as admin:
        try:
            admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = %s AND pid <> pg_backend_pid()",
                [name],
            )
            retryable(call(field.url, token, "heartbeat_job", fence))
            retryable(call(field.url, token, "submit_job_result", {**fence, "result": RESULT}))
        finally:
            admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
    ack = structured(call(field.url, token, "submit_job_result", {**fence, "result": RESULT}))
    assert ack == {"accepted": True, "reason": ""}
    assert CaseResultRow.objects.get().verdict == "pass"


def test_a_catastrophic_regex_is_graded_while_another_users_call_is_answered(
    field: LiveServer, alice: Any, bob: Any, key: str
) -> None:
    spec = {**ECHO_SPEC, "grader": {"type": "regex"}}
    harness_create(user=alice, workspace_slug="acme", name="grep", spec=spec)
    cases = [{"key": "a", "input": {"text": "x"}, "expected": r"^(a+)+$"}]
    dataset_create(user=alice, workspace_slug="acme", name="grep", cases=cases)
    laptop = pair(field, key)
    run = dispatch(field, key, f"self:{laptop['id']}", name="grep")
    fence = lease(field, laptop["token"])
    bobs_key = api_key_create(user=bob).key
    result = {**RESULT, "output": "a" * 34 + "!"}
    acks: list[dict[str, Any]] = []

    async def submit() -> None:
        async with session(field.url, laptop["token"], read_timeout=60) as client:
            reply = await client.call_tool("submit_job_result", {**fence, "result": result})
            acks.append(structured(reply))

    gradings = metric(field.url, "everdict_gradings_started_total")
    grading = threading.Thread(target=lambda: asyncio.run(submit()), daemon=True)
    grading.start()
    # The server has begun grading the output: a backtracking engine would be at it for hours.
    wait_metric(field.url, "everdict_gradings_started_total", gradings + 1)
    # A generous bound: a server stalled by a backtracking engine answers in hours, not this.
    status, runners = rest(field.url, "GET", "/api/runners", bobs_key, timeout=20)
    grading.join(60)

    assert status == 200 and runners == []
    assert acks == [{"accepted": True, "reason": ""}]
    status, scored = rest(field.url, "GET", f"/api/runs/{run['id']}", key)
    assert scored["results"][0]["verdict"] == "fail"


def test_hello_reports_the_limits_the_tools_enforce(
    field: LiveServer, alice: Any, key: str
) -> None:
    token = pair(field, key)["token"]
    limits = structured(call(field.url, token, "hello", {"protocol": PROTOCOL_VERSION}))["limits"]
    # The contract's values, written here: then each is tried at and past its bound.
    assert limits == {
        "max_jobs_per_lease": 32,
        "max_results_per_call": 32,
        "max_bytes_per_call": 4 * 1024 * 1024,
        "max_log_lines_per_call": 500,
        "max_wait_ms": 55_000,
        "max_blob_chunk_bytes": 1024 * 1024,
        "max_artifact_bytes": 10 * 1024 * 1024,
        "max_case_artifact_bytes": 50 * 1024 * 1024,
        "screen_interval_ms": 1000,
        "max_screen_bytes": 512 * 1024,
        "max_trace_events": 20_000,
        "max_trace_bytes": 16 * 1024 * 1024,
    }
    at_most = {"protocol": PROTOCOL_VERSION, "max_jobs": limits["max_jobs_per_lease"]}
    assert not call(field.url, token, "lease_job", at_most).is_error
    over = {**at_most, "max_jobs": limits["max_jobs_per_lease"] + 1}
    assert call(field.url, token, "lease_job", over).is_error
    reports = [
        {"job_id": n, "lease_epoch": 1, "result": RESULT}
        for n in range(limits["max_results_per_call"] + 1)
    ]
    assert call(field.url, token, "submit_job_results", {"results": reports}).is_error
    acks = structured(call(field.url, token, "submit_job_results", {"results": reports[1:]}))[
        "acks"
    ]
    assert len(acks) == limits["max_results_per_call"]
    lines = ["x"] * (limits["max_log_lines_per_call"] + 1)
    fence = {"job_id": 1, "lease_epoch": 1}
    assert call(field.url, token, "report_case_log", {**fence, "lines": lines}).is_error
    assert not call(field.url, token, "report_case_log", {**fence, "lines": lines[1:]}).is_error


def raw_tool_call(server: LiveServer, token: str, tool: str, arguments_json: str) -> Any:
    """A tools/call written by hand (the SDK's client cannot even serialize such arguments)."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    body = (
        '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "'
        + tool
        + '", "arguments": '
        + arguments_json
        + ', "_meta": '
        + json.dumps(meta)
        + "}}"
    )
    request = urllib.request.Request(
        f"{server.url}/mcp",
        data=body.encode(),
        method="POST",
        headers={
            "Authorization": f"Bearer {token}",
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": "tools/call",
            "Mcp-Name": tool,
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _message(body: str) -> dict[str, Any]:
    """The JSON-RPC message of a reply, sent as JSON or as one server-sent event (whose lines
    end at CR or LF only, as the SDK's client reads them)."""
    for line in json_lines(body):
        if line.startswith("data:"):
            body = line[5:]
    message: dict[str, Any] = json.loads(body)
    return message


@pytest.mark.parametrize("depth", [150, 1000, 100_000])
def test_arguments_nested_too_deep_are_refused_as_bad_input_never_a_500(
    field: LiveServer, key: str, depth: int
) -> None:
    token = pair(field, key)["token"]
    deep = "[" * depth + "]" * depth
    calls = [
        ("hello", '{"protocol": 2, "capabilities": ' + deep + "}"),
        (
            "submit_job_result",
            '{"job_id": 1, "lease_epoch": 1, "result": {"status": "completed", "usage": {"x": '
            + deep
            + "}}}",
        ),
    ]
    for tool, arguments in calls:
        status, body = raw_tool_call(field, token, tool, arguments)
        message = _message(body)
        if status == 200:
            # Parsed: refused as invalid arguments, or answered — never a crash.
            result = message["result"]
            text = " ".join(block.get("text", "") for block in result["content"])
            assert text != f"Error executing tool {tool}", (tool, depth)
            assert not result.get("isError") or "validation error" in text, (tool, depth, text)
        else:
            # Too deep even to parse: JSON-RPC's parse error, answered 400.
            assert status == 400, (tool, depth, body[:300])
            assert message["error"]["code"] == -32700
