"""Builders for runs in tests: a harness, a dataset and a runner, through the services."""

from __future__ import annotations

from typing import Any

from runnercli.protocol import CaseResult, Fingerprint
from runners.services import runner_pair
from scorecards.services import dataset_create, harness_create, run_start

ECHO_SPEC: dict[str, Any] = {
    "command": ["python", "-c", "print('{input.text}')"],
    "timeout_s": 30,
    "output": "text",
    "grader": {"type": "exact"},
}


def suite(
    user: Any,
    slug: str = "acme",
    *,
    cases: int = 3,
    spec: dict[str, Any] | None = None,
    name: str = "echo",
) -> None:
    harness_create(user=user, workspace_slug=slug, name=name, spec=spec or ECHO_SPEC)
    dataset_create(
        user=user,
        workspace_slug=slug,
        name=name,
        cases=[
            {"key": f"c{i}", "input": {"text": f"hello {i}"}, "expected": f"hello {i}"}
            for i in range(cases)
        ],
    )


def pair(user: Any, label: str = "laptop", capabilities: list[str] | None = None) -> Any:
    return runner_pair(owner=user, label=label, capabilities=capabilities or ["python"]).runner


def start(user: Any, runner: Any | None, slug: str = "acme", **kwargs: Any) -> Any:
    runtime = "self:any" if runner is None else f"self:{runner.pk}"
    return run_start(
        user=user,
        workspace_slug=slug,
        harness=kwargs.pop("harness", "echo"),
        dataset=kwargs.pop("dataset", "echo"),
        runtime=runtime,
        **kwargs,
    )


def completed(output: str, **kwargs: Any) -> CaseResult:
    return CaseResult(
        status="completed",
        exit_code=kwargs.pop("exit_code", 0),
        output=output,
        duration_ms=5,
        fingerprint=Fingerprint(os="linux", python="3.11", runnercli_version="test"),
        **kwargs,
    )
