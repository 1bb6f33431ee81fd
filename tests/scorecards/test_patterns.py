"""Graders cannot stall the server: `regex` runs RE2 (linear time); a pattern RE2 cannot run
is refused when stored and judged `error` if stored before — never run by a backtracking
engine; JSON outputs are parsed within a nesting bound."""

from __future__ import annotations

import json
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client

from accounts.services import api_key_create
from runnercli.protocol import HarnessSpec
from scorecards.models import Case, DatasetVersion, HarnessVersion, Run
from scorecards.patterns import MAX_JSON_DEPTH, backtracking_only
from scorecards.scoring import grade
from tests.suites import ECHO_SPEC

CATASTROPHIC = r"^(a+)+$"


def regex_spec(**extra: Any) -> HarnessSpec:
    return HarnessSpec.model_validate({"command": ["run"], "grader": {"type": "regex"}, **extra})


@pytest.mark.timeout(30)
def test_a_catastrophic_pattern_is_graded_in_linear_time() -> None:
    # Python's backtracking engine takes hours on this; RE2 answers at once.
    result = grade(
        spec=regex_spec(),
        status="completed",
        output="a" * 34 + "!",
        exit_code=0,
        expected=CATASTROPHIC,
    )
    assert result.verdict == "fail"
    big = json.dumps({"log": "error " * 150_000})
    result = grade(
        spec=regex_spec(),
        status="completed",
        output=big,
        exit_code=0,
        expected=".*error.*timeout",
    )
    assert result.verdict == "fail"


@pytest.mark.parametrize(
    "pattern", [r"^(a)\1$", r"foo(?=bar)", r"(?<!x)y", r"(?>ab)c", r"(?P<x>a)(?P=x)"]
)
def test_a_stored_pattern_re2_cannot_run_is_an_error_saying_so(pattern: str) -> None:
    result = grade(
        spec=regex_spec(), status="completed", output="aa foobar", exit_code=0, expected=pattern
    )
    assert result.verdict == "error"
    assert "cannot run under RE2" in result.detail and repr(pattern) in result.detail


def test_output_nested_past_the_bound_is_judged_not_crashed() -> None:
    deep = "[" * 5000 + "]" * 5000
    result = grade(
        spec=HarnessSpec.model_validate(
            {"command": ["run"], "output": "json", "grader": {"type": "json_equals"}}
        ),
        status="completed",
        output=deep,
        exit_code=0,
        expected=[],
    )
    assert result.verdict == "error"
    assert f"nested deeper than {MAX_JSON_DEPTH} levels" in result.detail
    within = "[" * 50 + "]" * 50
    assert (
        grade(
            spec=regex_spec(output="json"),
            status="completed",
            output=within,
            exit_code=0,
            expected=r"^\[+\]+$",
        ).verdict
        == "pass"
    )


def test_a_field_path_with_other_scripts_digits_is_missing_not_a_crash() -> None:
    s = HarnessSpec.model_validate(
        {"command": ["run"], "output": "json", "grader": {"type": "exact", "field": "items.²"}}
    )
    result = grade(
        spec=s, status="completed", output='{"items": [1, 2, 3]}', exit_code=0, expected="1"
    )
    assert (result.verdict, result.detail) == ("fail", "field items.² missing")


def test_only_patterns_for_a_backtracking_engine_count_as_such() -> None:
    assert backtracking_only(r"^(a)\1$")
    assert backtracking_only("foo(?=bar)")
    # Text that is no pattern, a pattern RE2 runs, and C++ (more likely text) are not.
    assert backtracking_only("f(x") is None
    assert backtracking_only(CATASTROPHIC) is None
    assert backtracking_only("What is C++?") is None
    assert backtracking_only("Paris") is None


@pytest.fixture
def admin_client(alice: Any, workspace: Any) -> Client:
    key = api_key_create(user=alice, name="t").key
    return Client(headers={"Authorization": f"Bearer {key}"})


def post(client: Client, path: str, body: Any) -> Any:
    return client.post(f"/api/workspaces/acme/{path}", body, content_type="application/json")


def test_a_dataset_with_a_pattern_re2_cannot_run_is_refused_naming_it(
    admin_client: Client,
) -> None:
    cases = [
        {"key": "ok", "input": {}, "expected": "C++ and f(x"},
        {"key": "look", "input": {}, "expected": r"^foo(?=bar)"},
    ]
    reply = admin_client.post(
        "/api/workspaces/acme/datasets",
        {"name": "d", "cases": cases},
        content_type="application/json",
    )
    assert reply.status_code == 400
    (message,) = reply.json()["cases"]
    assert message.startswith("cases[1].expected (case 'look'): pattern '^foo(?=bar)'")
    assert "cannot run under RE2" in message
    assert not DatasetVersion.objects.exists()


def test_a_harness_whose_retry_regex_re2_cannot_run_is_refused_naming_it(
    admin_client: Client,
) -> None:
    spec = {**ECHO_SPEC, "retry_on": {"stderr_regex": r"(?<=limit) (?P<retry_after>\d+)"}}
    reply = admin_client.post(
        "/api/workspaces/acme/harnesses",
        {"name": "h", "spec": spec},
        content_type="application/json",
    )
    assert reply.status_code == 400
    (message,) = reply.json()["spec"]
    assert message.startswith("retry_on.stderr_regex: pattern '(?<=limit)")
    good = {**ECHO_SPEC, "retry_on": {"stderr_regex": r"retry in (?P<retry_after>\d+)s"}}
    reply = admin_client.post(
        "/api/workspaces/acme/harnesses",
        {"name": "h", "spec": good},
        content_type="application/json",
    )
    assert reply.status_code == 201
    assert HarnessVersion.objects.get().version == 1


def test_the_command_lists_stored_patterns_re2_refuses(alice: Any, workspace: Any) -> None:
    # Stored before graders ran RE2: written here as they were, past today's checks.
    harness = HarnessVersion.objects.create(
        workspace=workspace,
        name="grep",
        version=1,
        created_by=alice,
        spec={**ECHO_SPEC, "grader": {"type": "regex"}, "retry_on": {"stderr_regex": "(a)\\1"}},
    )
    dataset = DatasetVersion.objects.create(
        workspace=workspace, name="grep", version=1, created_by=alice, case_count=3
    )
    for position, (key, expected) in enumerate(
        [("plain", "hello"), ("bad", "(?<=x)y"), ("broken", "f(x")]
    ):
        Case.objects.create(
            dataset=dataset, position=position, key=key, input={}, expected=expected
        )
    Run.objects.create(
        workspace=workspace,
        harness=harness,
        dataset=dataset,
        runtime="self:any",
        submitted_by=alice,
    )
    out = StringIO()

    call_command("check_patterns", stdout=out)

    lines = out.getvalue().splitlines()
    assert lines[0].startswith("acme/grep v1 retry_on.stderr_regex: pattern '(a)\\\\1'")
    assert lines[1].startswith("acme/grep v1 case 'bad': pattern '(?<=x)y' cannot run under RE2")
    # Graded by `regex`, a pattern that does not parse is listed too.
    assert lines[2].startswith("acme/grep v1 case 'broken': invalid regex pattern 'f(x'")
    assert lines[3] == "3 stored patterns RE2 refuses."
