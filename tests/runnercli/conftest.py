from __future__ import annotations

import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from runnercli.protocol import CaseJob, HarnessSpec, harness_digest


def make_job(
    command: list[str],
    *,
    key: str = "c1",
    input: Any = None,
    env: dict[str, str] | None = None,
    timeout_s: int = 30,
    name: str = "probe",
    retry_on: dict[str, Any] | None = None,
) -> CaseJob:
    """A CaseJob as the server sends it, for running the executor without a server."""
    given: dict[str, Any] = {"command": command, "env": env or {}, "timeout_s": timeout_s}
    if retry_on is not None:
        given["retry_on"] = retry_on
    spec = HarnessSpec.model_validate(given)
    return CaseJob.model_validate(
        {
            "job_id": 1,
            "attempt_id": 1,
            "lease_epoch": 1,
            "run_id": 1,
            "workspace": "acme",
            "submitted_by": "alice",
            "case": {"key": key, "input": input if input is not None else {}},
            "harness": {
                "name": name,
                "version": 1,
                "digest": harness_digest(spec),
                "author": "alice",
                "spec": spec.model_dump(mode="json"),
            },
            "capabilities": ["python"],
            "timeout_s": timeout_s,
        }
    )


@pytest.fixture
def script(tmp_path: Path) -> Callable[[str], list[str]]:
    """Write a Python harness and return the argv prefix that runs it."""

    def write(source: str) -> list[str]:
        path = tmp_path / f"harness_{abs(hash(source))}.py"
        path.write_text(textwrap.dedent(source))
        return [sys.executable, str(path)]

    return write
