"""What the member is shown of a harness's services before it runs here, and what the runner
refuses of them whatever the server says."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from runnercli.case.consent.prompt import describe, one_line
from runnercli.protocol import RUNNER_CONTEXT, HarnessSpec, harness_digest
from tests.runnercli.fake_server import fake_server, wire_job, writer
from tests.runnercli.servicejobs import service_job
from tests.runnercli.test_consent_wire import start

DB = {
    "image": "postgres:16",
    "command": ["postgres", "-c", "fsync=off"],
    "env": {"POSTGRES_PASSWORD": "pw"},
    "ports": [5432, 8080],
    "ready": {"tcp": 5432, "timeout_s": 30},
}
WEB = {"run": ["npm", "run", "dev", "--", "--port", "{port}"], "cwd": "case", "scope": "case",
       "ready": {"http": "/health"}}  # fmt: skip


def test_the_prompt_shows_each_service_in_full() -> None:
    shown = "\n".join(describe(service_job({"db": DB, "web": WEB})))
    assert (
        "  service:     db: container 'postgres:16', command 'postgres' '-c' 'fsync=off', "
        "ports 5432, 8080 on 127.0.0.1 (shared by this version's cases)"
    ) in shown
    assert "db env POSTGRES_PASSWORD='pw'" in shown
    assert "db ready: tcp :5432 within 30s" in shown
    assert (
        "  service:     web: process 'npm' 'run' 'dev' '--' '--port' '{port}' in the case's "
        "directory, on a free port (one per case)"
    ) in shown
    assert "web ready: http GET /health on its {port} answering 200 within 60s" in shown
    assert "needs:       docker" in shown
    assert "service: db: container 'postgres:16'" in one_line(service_job({"db": DB}))


@pytest.mark.e2e
def test_a_service_env_the_runner_refuses_is_refused_whatever_the_server_says(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "ran"
    job: dict[str, Any] = wire_job(1, writer(marker))
    service = {"run": [sys.executable, "-m", "http.server", "{port}"], "ready": {"http": "/"},
               "env": {"LD_PRELOAD": "/tmp/evil.so"}}  # fmt: skip
    job["harness"]["spec"]["services"] = {"web": service}
    spec = HarnessSpec.model_validate(job["harness"]["spec"], context=RUNNER_CONTEXT)
    job["harness"]["digest"] = harness_digest(spec)
    with fake_server() as server:
        server.add(job)
        runner = start(tmp_path, server, allow_any=True)
        try:
            server.wait(lambda: server.answered() == {1})
        finally:
            runner.stop(signal.SIGTERM)
    assert not marker.exists()
    message = server.failure(1)["message"]
    assert "service web sets LD_PRELOAD in its environment, which this runner refuses" in message
