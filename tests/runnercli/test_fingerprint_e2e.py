"""Every result says where and with what it ran, end to end: two laptops whose `claude`
differs run the same harness, and the comparison of their runs names the difference."""

from __future__ import annotations

import os
import platform
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from accounts.services import api_key_create
from runnercli.protocol import HarnessSpec, harness_digest
from scorecards.models import CaseResult, HarnessVersion
from scorecards.services import dataset_create, harness_create
from tests.live import daphne, runner_cli, scheduler
from tests.runnercli.test_consent_e2e import page
from tests.runnercli.test_e2e import Api

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def api(workspace: Any, alice: Any, tmp_path: Path) -> Iterator[Api]:
    with daphne(tmp_path) as server, scheduler(tmp_path):
        yield Api(server, api_key_create(user=alice, name="e2e").key)


def laptop(api: Api, tmp_path: Path, name: str, claude_version: str) -> tuple[int, Any]:
    """A paired runner whose PATH holds a `claude` printing `claude_version`."""
    bin_dir = tmp_path / f"{name}-bin"
    bin_dir.mkdir()
    claude = bin_dir / "claude"
    claude.write_text(f'#!/bin/sh\necho "{claude_version} (Claude Code)"\n')
    claude.chmod(0o755)
    paired = api.ok("POST", "/api/runners", {"label": name, "capabilities": ["python", "claude"]})
    path = f"{bin_dir}{os.pathsep}{os.environ['PATH']}"
    args = ["pair", "--server", api.server.url, "--token", paired["token"]]
    setup = runner_cli(tmp_path, args, name=name, PATH=path)
    assert setup.popen.wait(30) == 0, setup.output()
    proc = runner_cli(tmp_path, ["run", "--wait-ms", "2000"], name=name, PATH=path)
    return int(paired["id"]), proc


def test_results_carry_the_fingerprint_and_compare_names_the_tool_that_changed(
    api: Api, alice: Any, tmp_path: Path
) -> None:
    spec = {
        "command": [sys.executable, "-c", "print('ok')"],
        "capabilities": ["python", "claude"],
        "timeout_s": 60,
    }
    harness_create(user=alice, workspace_slug="acme", name="agent", spec=spec)
    cases = [{"key": f"q{i}", "input": {}, "expected": "ok"} for i in range(3)]
    dataset_create(user=alice, workspace_slug="acme", name="qs", cases=cases)
    old_id, old = laptop(api, tmp_path, "old", "2.0.14")
    new_id, new = laptop(api, tmp_path, "new", "2.1.0")
    try:
        a = api.wait_run(api.start_run("agent", "qs", f"self:{old_id}", concurrency=3))
        b = api.wait_run(api.start_run("agent", "qs", f"self:{new_id}", concurrency=3))
    finally:
        old.stop(signal.SIGTERM)
        new.stop(signal.SIGTERM)
    assert a["status"] == b["status"] == "succeeded", (a, b)

    digest = harness_digest(HarnessSpec.model_validate(HarnessVersion.objects.get().spec))
    fingerprints = list(
        CaseResult.objects.filter(run_id=a["id"]).values_list("fingerprint", flat=True)
    )
    assert len(fingerprints) == 3
    for fingerprint in fingerprints:
        assert fingerprint["tools"] == {"claude": "2.0.14"}
        assert fingerprint["harness_digest"] == digest
        assert fingerprint["python"] == platform.python_version()
        assert fingerprint["arch"] == platform.machine()
        assert fingerprint["os"] and fingerprint["os_version"] and fingerprint["runnercli_version"]

    compared = page(api, alice, f"/w/acme/compare?a={a['id']}&b={b['id']}")
    assert '<strong>claude</strong> <span class="mono">2.0.14</span> → ' in compared
    assert '<span class="mono">2.1.0</span> on 3 of 3 cases' in compared
    run_page = page(api, alice, f"/runs/{b['id']}/")
    assert "Where it ran" in run_page
    assert 'data-tool="claude">claude <span class="mono">2.1.0</span>' in run_page
