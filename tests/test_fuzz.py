"""Bad input at scale, against a real daphne: the REST API fuzzed from its own OpenAPI schema
(schemathesis) and /mcp fed malformed JSON-RPC, wrong types, huge bodies, unknown tools and
methods, missing or misused credentials.

Every reply is a clean error — a 4xx, a JSON-RPC error or a tool error, never a 5xx — the
server is still serving afterwards, and nothing is stored: no job, result or log line
appears, and a job leased before the fuzzing is still leased with the same fence.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Ok
from schemathesis.generation import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from accounts.services import api_key_create
from runners.models import AttemptStatus, JobAttempt, JobLogLine, JobStatus, RunnerJob
from runners.queue import job_lease
from runners.services import runner_pair
from scorecards.models import CaseResult, Run
from tests.live import LiveServer, daphne
from tests.suites import pair, start, suite

pytestmark = pytest.mark.e2e

# Bounded: a few hundred generated requests in all, well inside the suite's time budget.
EXAMPLES_PER_OPERATION = 20
MCP_EXAMPLES = 100
ACCEPT = "application/json, text/event-stream"
# Every reply, errors included, is one the schema declares, in the declared shape and type.
FUZZ_CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
RESULT = {"status": "completed", "exit_code": 0, "output": "hello 0", "duration_ms": 5}


@pytest.fixture(scope="module")
def fuzz_process(
    django_db_setup: Any, django_db_blocker: Any, tmp_path_factory: Any
) -> Iterator[LiveServer]:
    # One server for the module: generated requests are many, daphne starts in seconds.
    with (
        django_db_blocker.unblock(),
        daphne(
            tmp_path_factory.mktemp("fuzz"),
            EVERDICT_LEASE_TTL_S=300,
            EVERDICT_WAKE_RECHECK_S=30,
            # As deployed: with DEBUG on, an unrouted path gets Django's HTML debug page.
            DEBUG="false",
            SECRET_KEY="fuzz-secret-key-not-for-production",
        ) as server,
    ):
        yield server


@pytest.fixture
def server(fuzz_process: LiveServer, transactional_db: Any) -> LiveServer:
    return fuzz_process


@pytest.fixture
def world(server: LiveServer, workspace: Any, alice: Any, charlie: Any) -> dict[str, Any]:
    """Something to aim at: alice's workspace with a suite, a run whose first job is leased."""
    suite(alice, cases=2)
    holder = runner_pair(owner=alice, label="holder", capabilities=["python"])
    start(alice, holder.runner, concurrency=2)
    (leased,) = job_lease(runner=holder.runner)
    # A runner of someone with no jobs at all: whatever it sends, nothing is its to change.
    stranger = runner_pair(owner=charlie, label="stranger", capabilities=["python"])
    pair(alice, "spare")
    listed = mcp_post(
        server, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, token=holder.token
    )
    schemas = {
        t["name"]: t["inputSchema"]["properties"] for t in messages(listed)[0]["result"]["tools"]
    }
    return {
        "key": api_key_create(user=alice, name="fuzz").key,
        "holder": holder.token,
        "stranger": stranger.token,
        "job_id": leased.job.pk,
        "epoch": leased.job.lease_epoch,
        # The bounds the tools advertise: one past each must be refused.
        "bounds": {
            "message": schemas["fail_job"]["message"]["maxLength"],
            "lines": schemas["report_case_log"]["lines"]["maxItems"],
            "line": schemas["report_case_log"]["lines"]["items"]["maxLength"],
        },
    }


def stored() -> dict[str, int]:
    return {
        "jobs": RunnerJob.objects.count(),
        "results": CaseResult.objects.count(),
        "log_lines": JobLogLine.objects.count(),
        "attempts": JobAttempt.objects.count(),
        "runs": Run.objects.count(),
    }


def assert_lease_untouched(world: dict[str, Any]) -> None:
    job = RunnerJob.objects.get(pk=world["job_id"])
    assert (job.status, job.lease_epoch) == (JobStatus.LEASED, world["epoch"])
    attempt = JobAttempt.objects.get(pk=job.current_attempt_id or 0)
    assert attempt.status == AttemptStatus.EXECUTING


# ----------------------------------------------------------------------- REST API


def served_schema() -> dict[str, Any]:
    """The OpenAPI document /api/schema/ serves, built by the same generator in this process.

    Built at import so that schemathesis can make one test per operation at collection;
    a test below checks that the live server serves this very document.
    """
    from drf_spectacular.generators import SchemaGenerator
    from drf_spectacular.renderers import OpenApiJsonRenderer

    document = SchemaGenerator().get_schema(request=None, public=True)
    return dict(json.loads(OpenApiJsonRenderer().render(document)))


schema = schemathesis.openapi.from_dict(served_schema())


def test_the_fuzzed_schema_is_the_one_the_server_serves(server: LiveServer) -> None:
    response = httpx2.get(f"{server.url}/api/schema/?format=json", timeout=30)
    assert response.status_code == 200
    assert response.json() == served_schema()


def known_path_values(world: dict[str, Any]) -> dict[str, Any]:
    """Path parameters that name real rows, so generated bodies reach past the 404s."""
    from accounts.models import ApiKey
    from runners.models import Runner

    spare_key = api_key_create(user=ApiKey.objects.get(name="fuzz").user, name="spare")
    return {
        "slug": "acme",
        "run_id": RunnerJob.objects.get(pk=world["job_id"]).run_id,
        "runner_id": Runner.objects.get(label="spare").pk,
        "key_id": spare_key.api_key.pk,
    }


def operation_cases(operation: Any, known: dict[str, Any]) -> Any:
    """Valid and invalid requests, half of them aimed at real rows."""
    names = [p.name for p in operation.path_parameters]
    strategies = [
        operation.as_strategy(GenerationMode.POSITIVE),
        operation.as_strategy(GenerationMode.NEGATIVE),
    ]
    if names and all(name in known for name in names):
        aimed = {name: known[name] for name in names}
        strategies.append(operation.as_strategy(GenerationMode.POSITIVE, path_parameters=aimed))
        strategies.append(operation.as_strategy(GenerationMode.NEGATIVE, path_parameters=aimed))
    return st.one_of(strategies)


def test_the_api_answers_generated_input_without_a_server_error(
    server: LiveServer, world: dict[str, Any]
) -> None:
    """Every operation of the schema, fed generated valid and invalid input: no 5xx, and
    every reply, errors included, is declared with its status, content type and shape."""
    from accounts.models import ApiKey

    own_key = ApiKey.objects.get(name="fuzz").pk
    known = known_path_values(world)
    headers = {"Authorization": f"Bearer {world['key']}"}
    failures: list[str] = []
    for result in schema.get_all_operations():
        if not isinstance(result, Ok):
            failures.append(f"the schema has an operation schemathesis cannot read: {result}")
            continue
        operation = result.ok()

        @given(case=operation_cases(operation, known))
        @settings(
            max_examples=EXAMPLES_PER_OPERATION,
            deadline=None,
            database=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        def fuzz(case: Any) -> None:
            if (case.path_parameters or {}).get("key_id") == own_key:
                # Revoking the fuzzer's own key would end the test, not find a bug.
                return
            if case.headers:
                # A Host the server does not serve is refused (400) before any API view, on
                # every path alike (ALLOWED_HOSTS): framing, not an operation's input.
                case.headers = {k: v for k, v in case.headers.items() if k.lower() != "host"}
            response = case.call(base_url=server.url, headers=headers, timeout=30)
            case.validate_response(response, checks=FUZZ_CHECKS)

        try:
            fuzz()
        except (Exception, BaseExceptionGroup) as exc:  # schemathesis' FailureGroup is the latter
            failures.append(f"{operation.label}: {exc}")
    assert not failures, "\n\n".join(failures)


# -------------------------------------------------------------------------- /mcp


def mcp_post(
    server: LiveServer,
    body: Any,
    *,
    token: str | None,
    raw: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> httpx2.Response:
    sent = {"Content-Type": "application/json", "Accept": ACCEPT, **(headers or {})}
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    content = raw if raw is not None else json.dumps(body).encode()
    return httpx2.post(f"{server.url}/mcp", content=content, headers=sent, timeout=60)


def messages(response: httpx2.Response) -> list[dict[str, Any]]:
    """The JSON-RPC messages of a reply, whether sent as JSON or as server-sent events (read
    as the SDK's client reads them: lines end at CR or LF only, not at U+0085 or U+2028,
    which a message's text may hold)."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        return [json.loads(event.data) for event in httpx2.EventSource(response) if event.data]
    return [response.json()] if response.content else []


def unclean(response: httpx2.Response, what: str) -> str | None:
    """Why a reply is not a clean refusal, or None.

    Clean: a 4xx, or a 2xx whose every JSON-RPC message is an error, a tool error or a
    refusal (`accepted: false`, no job leased, or a bare `hello`). Never a 5xx.
    """
    if response.status_code >= 500:
        return f"{what}: HTTP {response.status_code} {response.text[:300]}"
    if response.status_code >= 400 or response.status_code == 202:
        return None
    for message in messages(response):
        if "error" in message:
            if not isinstance(message["error"].get("code"), int):
                return f"{what}: malformed JSON-RPC error {message}"
            continue
        result = message["result"]
        structured = result.get("structuredContent") or {}
        refused = result.get("isError") or structured.get("accepted") is False
        empty_lease = "job" in structured and structured["job"] is None
        if not (refused or empty_lease or "runner_id" in structured):
            return f"{what}: accepted — {json.dumps(result)[:300]}"
    return None


def call(name: str, arguments: Any, request_id: Any = 1) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


def hostile_requests(world: dict[str, Any]) -> list[tuple[str, str | None, Any, bytes | None]]:
    """(what, token, JSON body, raw body) — each must be refused cleanly."""
    fence = {"job_id": world["job_id"], "lease_epoch": world["epoch"]}
    holder, stranger, key = world["holder"], world["stranger"], world["key"]
    bounds = world["bounds"]
    big_output = {**RESULT, "output": "x" * (1024 * 1024 + 1)}
    return [
        ("not JSON", holder, None, b"{not json"),
        ("empty body", holder, None, b""),
        ("invalid UTF-8", holder, None, b"\xff\xfe\x00{"),
        ("deeply nested", holder, None, b"[" * 200_000),
        ("a bare number", holder, 42, None),
        ("a batch", holder, [call("hello", {"protocol": 2})] * 3, None),
        ("no jsonrpc field", holder, {"id": 1, "method": "tools/list"}, None),
        ("method is a number", holder, {"jsonrpc": "2.0", "id": 1, "method": 7}, None),
        (
            "id is an object",
            holder,
            {"jsonrpc": "2.0", "id": {"a": 1}, "method": "tools/list"},
            None,
        ),
        (
            "params is a list",
            holder,
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": ["hello"]},
            None,
        ),
        ("unknown method", holder, {"jsonrpc": "2.0", "id": 1, "method": "jobs/steal"}, None),
        ("unknown tool", holder, call("steal_job", {}), None),
        ("arguments is a string", holder, call("hello", "protocol=2"), None),
        ("protocol is a string", holder, call("lease_job", {"protocol": "one"}), None),
        ("wait_ms is a list", holder, call("lease_job", {"protocol": 2, "wait_ms": [1]}), None),
        (
            "capability out of pattern",
            holder,
            call("lease_job", {"protocol": 2, "capabilities": ["Not A Cap!"]}),
            None,
        ),
        ("job_id is a string", holder, call("heartbeat_job", {**fence, "job_id": "all"}), None),
        ("epoch is huge", holder, call("heartbeat_job", {**fence, "lease_epoch": 10**30}), None),
        ("result is a string", holder, call("submit_job_result", {**fence, "result": "ok"}), None),
        (
            "result status unknown",
            holder,
            call("submit_job_result", {**fence, "result": {**RESULT, "status": "great"}}),
            None,
        ),
        (
            "result forges provenance",
            holder,
            call(
                "submit_job_result",
                {**fence, "result": {**RESULT, "score": 1.0, "provenance": {"ran_on": "cloud"}}},
            ),
            None,
        ),
        (
            "result output over 1 MiB (a 1 MB body)",
            holder,
            call("submit_job_result", {**fence, "result": big_output}),
            None,
        ),
        (
            "a body over the 8 MiB limit",
            holder,
            call("submit_job_result", {**fence, "result": {**RESULT, "output": "y" * (9 * 2**20)}}),
            None,
        ),
        (
            "too many log lines",
            holder,
            call("report_case_log", {**fence, "lines": ["l"] * (bounds["lines"] + 1)}),
            None,
        ),
        (
            "a log line over its bound",
            holder,
            call("report_case_log", {**fence, "lines": ["z" * (bounds["line"] + 1)]}),
            None,
        ),
        ("log lines of numbers", holder, call("report_case_log", {**fence, "lines": [1, 2]}), None),
        (
            "a fail message over its bound",
            holder,
            call("fail_job", {**fence, "message": "m" * (bounds["message"] + 1)}),
            None,
        ),
        (
            "someone else's job: result",
            stranger,
            call("submit_job_result", {**fence, "result": RESULT}),
            None,
        ),
        (
            "someone else's job: log",
            stranger,
            call("report_case_log", {**fence, "lines": ["mine now"]}),
            None,
        ),
        (
            "someone else's job: fail",
            stranger,
            call("fail_job", {**fence, "message": "gone"}),
            None,
        ),
        (
            "a stale epoch",
            holder,
            call(
                "submit_job_result", {**fence, "lease_epoch": world["epoch"] + 1, "result": RESULT}
            ),
            None,
        ),
        ("no credentials", None, call("hello", {"protocol": 2}), None),
        ("a made-up runner token", "rnr_" + "A" * 43, call("hello", {"protocol": 2}), None),
        (
            "an API key on a runner tool",
            key,
            call("submit_job_result", {**fence, "result": RESULT}),
            None,
        ),
        (
            "a runner token on a personal tool",
            holder,
            call(
                "start_run",
                {
                    "workspace": "acme",
                    "harness": "echo",
                    "dataset": "echo",
                    "runtime": "self:any",
                    "concurrency": 1,
                },
            ),
            None,
        ),
        (
            "a personal tool with a bad runtime",
            key,
            call(
                "start_run",
                {
                    "workspace": "acme",
                    "harness": "echo",
                    "dataset": "echo",
                    "runtime": "cloud",
                    "concurrency": 1,
                },
            ),
            None,
        ),
    ]


def test_malformed_mcp_requests_get_clean_errors_and_store_nothing(
    server: LiveServer, world: dict[str, Any]
) -> None:
    before = stored()
    replies = [
        unclean(mcp_post(server, body, token=token, raw=raw), what)
        for what, token, body, raw in hostile_requests(world)
    ]
    problems = [p for p in replies if p]
    assert not problems, "\n".join(problems)
    # Transport-level misuse: wrong verbs and headers.
    url = f"{server.url}/mcp"
    bearer = {"Authorization": f"Bearer {world['holder']}"}
    hello = json.dumps(call("hello", {"protocol": 2})).encode()
    for what, response in [
        ("PUT", httpx2.put(url, headers=bearer, content=hello, timeout=30)),
        ("DELETE", httpx2.delete(url, headers=bearer, timeout=30)),
        (
            "text/plain",
            mcp_post(
                server,
                None,
                token=world["holder"],
                raw=hello,
                headers={"Content-Type": "text/plain"},
            ),
        ),
        (
            "no Accept",
            mcp_post(
                server, None, token=world["holder"], raw=hello, headers={"Accept": "text/html"}
            ),
        ),
    ]:
        assert response.status_code < 500, f"{what}: {response.status_code} {response.text}"
    assert mcp_post(server, {}, token=world["holder"], raw=b"x" * (9 * 2**20)).status_code == 413

    assert stored() == before
    assert_lease_untouched(world)
    still = mcp_post(server, call("hello", {"protocol": 2}), token=world["holder"])
    assert still.status_code == 200
    assert messages(still)[0]["result"]["structuredContent"]["label"] == "holder"


def test_a_get_on_mcp_is_answered_rather_than_held_open(
    server: LiveServer, world: dict[str, Any]
) -> None:
    response = httpx2.get(
        f"{server.url}/mcp",
        headers={"Authorization": f"Bearer {world['holder']}", "Accept": ACCEPT},
        timeout=httpx2.Timeout(10, read=3),
    )
    assert 400 <= response.status_code < 500


def test_a_nul_in_a_runner_label_is_refused_and_nothing_is_stored(
    server: LiveServer, world: dict[str, Any]
) -> None:
    from runners.models import Runner

    before = Runner.objects.count()
    rest = httpx2.post(
        f"{server.url}/api/runners",
        json={"label": "a\x00b"},
        headers={"Authorization": f"Bearer {world['key']}"},
        timeout=30,
    )
    assert rest.status_code == 400
    reply = mcp_post(
        server,
        call("pair_runner", {"label": "a\x00b", "os": "linux", "capabilities": []}),
        token=world["key"],
    )
    assert reply.status_code < 500
    assert messages(reply)[0]["result"]["isError"] is True
    assert Runner.objects.count() == before


RUNNER_TOOLS = {
    "hello": ["protocol", "capabilities", "status"],
    "lease_job": ["protocol", "wait_ms", "capabilities", "status"],
    "heartbeat_job": ["job_id", "lease_epoch", "status"],
    "submit_job_result": ["job_id", "lease_epoch", "result"],
    "fail_job": ["job_id", "lease_epoch", "message", "retryable"],
    "report_case_log": ["job_id", "lease_epoch", "lines"],
}
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=40),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=12,
)


@st.composite
def tool_calls(draw: Any, job_id: int, epoch: int) -> tuple[str, Any]:
    tool = draw(st.sampled_from(sorted(RUNNER_TOOLS)))
    names = RUNNER_TOOLS[tool] + ["extra", "job", "score"]
    value = st.one_of(json_values, st.sampled_from([job_id, epoch, 1, 0, -1, RESULT, ["python"]]))
    arguments = draw(
        st.one_of(
            st.dictionaries(st.sampled_from(names), value, max_size=5),
            json_values,
        )
    )
    if tool == "lease_job" and isinstance(arguments, dict):
        # A valid wait would park the call; the fuzz is about what is sent, not waiting.
        arguments.pop("wait_ms", None)
    return tool, arguments


def test_generated_tool_calls_get_clean_errors_and_store_nothing(
    server: LiveServer, world: dict[str, Any]
) -> None:
    before = stored()

    @given(data=st.data())
    @settings(
        max_examples=MCP_EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def fuzz(data: Any) -> None:
        tool, arguments = data.draw(tool_calls(world["job_id"], world["epoch"]))
        response = mcp_post(server, call(tool, arguments), token=world["stranger"])
        assert unclean(response, f"{tool}({arguments!r})") is None

    fuzz()
    assert stored() == before
    assert_lease_untouched(world)
    still = mcp_post(server, call("hello", {"protocol": 2}), token=world["holder"])
    assert messages(still)[0]["result"]["isError"] is False


def test_a_refusal_quoting_unicode_line_separators_reads_as_one_message(
    server: LiveServer, world: dict[str, Any]
) -> None:
    # The refusal quotes the keys it was given; U+0085 and U+2028 end a line for
    # str.splitlines, not for a server-sent event.
    result = {"\x85": None, "\u2028": 1, "\u2029": 2}
    arguments = {"job_id": world["job_id"], "result": result}
    response = mcp_post(server, call("submit_job_result", arguments), token=world["stranger"])
    [message] = messages(response)
    assert message["result"]["isError"] is True
    assert "\x85" in response.text and "\u2028" in response.text
    assert unclean(response, "submit_job_result with separators in its keys") is None
