"""Grader `verify`: the verifier's report, the tests a case lists and tampering decide."""

from __future__ import annotations

from typing import Any

import pytest

from runnercli.protocol import HarnessSpec
from scorecards import scoring

pytestmark = pytest.mark.once

REPORT = {
    "passed": ["tests.test_calc.test_zero", "tests.test_calc.TestX.test_y"],
    "failed": ["tests.test_calc.test_add"],
    "errored": ["tests.test_other.test_boom"],
}


def spec(output: str = "junit", **more: Any) -> HarnessSpec:
    verify: dict[str, Any] = {"command": ["pytest"], "output": output}
    if output == "junit":
        verify["report"] = "report.xml"
    return HarnessSpec.model_validate(
        {
            "command": ["agent"],
            "repo": {"name": "acme/calc"},
            "verify": verify,
            "grader": {"type": "verify"},
            **more,
        }
    )


def grade(spec: HarnessSpec, verify: Any, tampered: Any = None, tests: Any = None):
    return scoring.grade(
        spec=spec,
        status="completed",
        output="",
        exit_code=0,
        expected=None,
        verify=verify,
        tampered=tampered,
        tests=tests,
    )


def junit(tests: dict[str, list[str]] = REPORT) -> dict[str, Any]:
    return {"exit_code": 1, "outcome": {"tests": tests}}


def test_listed_tests_decide_and_are_named_in_the_reason() -> None:
    lists = {
        "fail_to_pass": ["tests/test_calc.py::test_add", "test_missing"],
        "pass_to_pass": ["tests/test_calc.py::TestX::test_y", "test_zero"],
    }
    got = grade(spec(), junit(), tests=lists)
    assert (got.verdict, got.score) == ("fail", 0.5)
    assert got.detail == (
        "2 of 4 listed tests failing: fail_to_pass tests/test_calc.py::test_add (failed), "
        "fail_to_pass test_missing (missing)"
    )
    fixed = {"passed": [*REPORT["passed"], "tests.test_calc.test_add"], "failed": []}
    got = grade(spec(), junit(fixed), tests={"fail_to_pass": ["tests/test_calc.py::test_add"]})
    assert (got.verdict, got.score, got.detail) == ("pass", 1.0, "all 1 listed tests passed")


def test_with_none_listed_no_test_may_fail_or_error() -> None:
    got = grade(spec(), junit())
    assert (got.verdict, got.score) == ("fail", 0.5)
    assert "tests.test_calc.test_add (failed)" in got.detail
    assert "tests.test_other.test_boom (errored)" in got.detail
    got = grade(spec(), junit({"passed": ["a"], "failed": [], "errored": []}))
    assert (got.verdict, got.score) == ("pass", 1.0)
    assert grade(spec(), junit({"passed": []})).verdict == "fail"


def test_exit_code_json_and_errors() -> None:
    assert grade(spec("exit_code"), {"exit_code": 0}).verdict == "pass"
    assert grade(spec("exit_code"), {"exit_code": 2}).detail == "the verifier exited with 2"
    said = grade(spec("json"), {"exit_code": 0, "outcome": {"pass": False, "score": 0.25}})
    assert (said.verdict, said.score) == ("fail", 0.25)
    err = grade(spec(), {"error": "the verifier (pytest) outlived its 5-second timeout"})
    assert (err.verdict, err.detail) == (
        "error",
        "the verifier (pytest) outlived its 5-second timeout",
    )
    assert grade(spec(), None).verdict == "error"


def test_tampering_fails_unless_the_harness_only_flags_it() -> None:
    tampered = [{"path": "tests/test_x.py", "change": "modified"}]
    passing = {"exit_code": 0, "outcome": {"tests": {"passed": ["t"]}}}
    got = grade(spec(protect=["tests/**"]), passing, tampered)
    assert (got.verdict, got.detail) == (
        "fail",
        "the agent changed protected paths: tests/test_x.py (modified)",
    )
    flagged = grade(spec(protect=["tests/**"], on_tamper="flag"), passing, tampered)
    assert flagged.verdict == "pass"
    assert grade(spec(protect=["tests/**"]), passing, []).verdict == "pass"
