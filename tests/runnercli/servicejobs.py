"""Jobs of harnesses with services, and a runtime for them, for the service tests."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Any

from runnercli.case.services import Records, Runtime
from runnercli.protocol import CaseJob, HarnessSpec, harness_digest

# A process service: Python's own HTTP server on its `{port}`, in its directory.
HTTP_SERVER = [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", "{port}"]


def service_job(
    services: dict[str, Any],
    *,
    command: list[str] | None = None,
    job_id: int = 1,
    key: str = "c1",
    input: Any = None,
    name: str = "web-eval",
    timeout_s: int = 60,
    **spec: Any,
) -> CaseJob:
    """A CaseJob of a harness with `services`, as the server sends it."""
    given = {"command": command or ["true"], "timeout_s": timeout_s, "services": services, **spec}
    harness = HarnessSpec.model_validate(given)
    return CaseJob.model_validate(
        {
            "job_id": job_id,
            "attempt_id": job_id,
            "lease_epoch": 1,
            "run_id": 1,
            "workspace": "acme",
            "submitted_by": "alice",
            "case": {"key": key, "input": input if input is not None else {}},
            "harness": {
                "name": name,
                "version": 1,
                "digest": harness_digest(harness),
                "author": "alice",
                "spec": harness.model_dump(mode="json"),
            },
            "capabilities": [],
            "timeout_s": timeout_s,
        }
    )


def web(**overrides: Any) -> dict[str, Any]:
    """A process service serving its directory over HTTP, ready when `/` answers 200."""
    return {"run": HTTP_SERVER, "ready": {"http": "/", "timeout_s": 20}, **overrides}


def script_service(tmp_path: Path, source: str, **overrides: Any) -> dict[str, Any]:
    """A process service running a Python script given its `{port}`."""
    path = tmp_path / f"service_{abs(hash(source))}.py"
    path.write_text(textwrap.dedent(source))
    return {
        "run": [sys.executable, str(path), "{port}"],
        "ready": {"http": "/", "timeout_s": 5},
        **overrides,
    }


def runtime(tmp_path: Path, events: list[str] | None = None, **kwargs: Any) -> Runtime:
    say = events.append if events is not None else (lambda message: None)
    return Runtime(Records(tmp_path / "records"), runner="7", tmp_root=tmp_path, say=say, **kwargs)
