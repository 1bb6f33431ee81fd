"""The verdict of a verified case (protocol 4): what the runner read of the verifier, the
tests a case lists, and the protected paths the agent changed. Pure functions, no database;
`scoring.grade` calls them.

Grader `verify`: an `exit_code` verifier passes on 0; a `json` one says `{pass, score,
reason}`; a `junit` one passes when every test the case lists (`tests: {fail_to_pass,
pass_to_pass}`) passed — a listed test missing from the report counts as failed — or, with
none listed, when no test failed or errored; its score is the fraction of those tests
passing. A listed name matches a reported one as `path::name` (pytest's node id),
`classname.name` (the report's) or `name` alone.

Protected paths: a result whose agent changed one fails whatever the verifier said, unless
the harness says `on_tamper: flag` (then the verifier decides and the result is marked).
"""

from __future__ import annotations

from typing import Any

from runnercli.protocol import CaseResult, HarnessSpec

_SHOWN = _SHOWN_TESTS = 5
_SHOWN_PATHS = 5
# How the test lists of a case are named, in the order a reason names them.
TEST_LISTS = ("fail_to_pass", "pass_to_pass")


def verified_fields(result: CaseResult) -> dict[str, Any]:
    """What the runner reported of the verifier and the protected paths, as stored."""
    return {
        "verify": None if result.verify is None else result.verify.model_dump(mode="json"),
        "tampered": None
        if result.tampered is None
        else [item.model_dump(mode="json") for item in result.tampered],
    }


def tamper_reason(tampered: Any) -> str | None:
    """ "the agent changed protected paths: tests/test_x.py (modified)", or None."""
    if not isinstance(tampered, list) or not tampered:
        return None
    shown = [
        f"{item.get('path')} ({item.get('change')})"
        for item in tampered[:_SHOWN_PATHS]
        if isinstance(item, dict)
    ]
    more = f" and {len(tampered) - _SHOWN_PATHS} more" if len(tampered) > _SHOWN_PATHS else ""
    return f"the agent changed protected paths: {', '.join(shown)}{more}"


def tampering_fails(spec: HarnessSpec, tampered: Any) -> str | None:
    """The reason a tampered result fails (None: untampered, or the harness only flags it)."""
    if (spec.on_tamper or "fail") != "fail":
        return None
    return tamper_reason(tampered)


def normal_name(name: str) -> str:
    """A test's name as a JUnit report's `classname.name`: `tests/test_x.py::T::t` →
    `tests.test_x.T.t`."""
    if "::" not in name:
        return name
    path, _, rest = name.partition("::")
    path = path[:-3] if path.endswith(".py") else path
    return f"{path.replace('/', '.')}.{rest.replace('::', '.')}"


def _matches(listed: str, reported: str) -> bool:
    wanted = normal_name(listed)
    if reported in (listed, wanted):
        return True
    # A bare name (no class, no path) matches a reported test of that name.
    return "." not in listed and "::" not in listed and reported.rsplit(".", 1)[-1] == listed


def _state(listed: str, tests: dict[str, list[str]]) -> str:
    for state in ("passed", "failed", "errored"):
        if any(_matches(listed, reported) for reported in tests.get(state, [])):
            return state
    return "missing"


def grade_verify(verify: Any, tests: Any, output: str) -> tuple[str, float, str]:
    """(verdict, score, reason) of a `verify` grader from the runner's report."""
    if not isinstance(verify, dict):
        return "error", 0.0, "the runner sent no verifier report"
    if verify.get("error"):
        return "error", 0.0, str(verify["error"])
    outcome = verify.get("outcome")
    exit_code = verify.get("exit_code")
    if output == "exit_code" or not isinstance(outcome, dict):
        if exit_code == 0:
            return "pass", 1.0, "the verifier exited with 0"
        return "fail", 0.0, f"the verifier exited with {exit_code}"
    if output == "json" or outcome.get("tests") is None:
        passed = outcome.get("pass") is True
        score = outcome.get("score")
        score = float(score) if isinstance(score, int | float) else (1.0 if passed else 0.0)
        reason = str(outcome.get("reason") or ("the verifier passed" if passed else "failed"))
        return ("pass" if passed else "fail"), score, reason
    return _grade_tests(outcome["tests"], tests if isinstance(tests, dict) else {})


def _grade_tests(report: dict[str, list[str]], lists: dict[str, Any]) -> tuple[str, float, str]:
    listed = [
        (kind, name)
        for kind in TEST_LISTS
        for name in (lists.get(kind) or [])
        if isinstance(name, str)
    ]
    if listed:
        states = [(kind, name, _state(name, report)) for kind, name in listed]
        failing = [(kind, name, state) for kind, name, state in states if state != "passed"]
        score = (len(states) - len(failing)) / len(states)
        if not failing:
            return "pass", 1.0, f"all {len(states)} listed tests passed"
        shown = ", ".join(f"{kind} {name} ({state})" for kind, name, state in failing[:_SHOWN])
        more = f" and {len(failing) - _SHOWN} more" if len(failing) > _SHOWN else ""
        return "fail", score, f"{len(failing)} of {len(states)} listed tests failing: {shown}{more}"
    passed, failed = report.get("passed", []), report.get("failed", [])
    errored = report.get("errored", [])
    total = len(passed) + len(failed) + len(errored)
    if total == 0:
        return "fail", 0.0, "the verifier's report holds no test"
    bad = [*(f"{n} (failed)" for n in failed), *(f"{n} (errored)" for n in errored)]
    if not bad:
        return "pass", 1.0, f"all {total} tests passed"
    more = f" and {len(bad) - _SHOWN_TESTS} more" if len(bad) > _SHOWN_TESTS else ""
    shown = ", ".join(bad[:_SHOWN_TESTS])
    return "fail", len(passed) / total, f"{len(bad)} of {total} tests failing: {shown}{more}"
