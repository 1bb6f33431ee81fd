"""A client we did not write: the MCP Inspector CLI lists the tools and calls one."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from accounts.services import api_key_create
from tests.required import INSPECTOR, NODE
from tests.suites import pair

# The engine under the server does not change what this shows: one database pass runs it.
# Without the Inspector it is skipped, or fails under REQUIRE_INSPECTOR (tests/required.py).
pytestmark = [pytest.mark.e2e, pytest.mark.once, pytest.mark.mcp_inspector]


def inspector(tmp_path: Path, url: str, key: str, *args: str) -> Any:
    env = {
        **os.environ,
        # Node 22 from var/node first: the Inspector needs it, the system's may be older.
        "PATH": f"{NODE.parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(tmp_path),
        "MCP_CATALOG_PATH": str(tmp_path / "mcp.json"),
        "NO_COLOR": "1",
    }
    done = subprocess.run(
        [
            str(NODE),
            str(INSPECTOR),
            "--cli",
            f"{url}/mcp",
            "--transport",
            "http",
            "--header",
            f"Authorization: Bearer {key}",
            *args,
        ],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return json.loads(done.stdout)


def test_the_mcp_inspector_lists_the_tools_and_calls_list_runners(
    gateway: Any, alice: Any, tmp_path: Path
) -> None:
    laptop = pair(alice, label="laptop")
    key = api_key_create(user=alice).key

    listed = inspector(tmp_path, gateway.url, key, "--method", "tools/list")
    names = {tool["name"] for tool in listed["tools"]}
    assert {"hello", "lease_job", "submit_job_result", "list_runners", "get_run"} <= names

    called = inspector(
        tmp_path, gateway.url, key, "--method", "tools/call", "--tool-name", "list_runners"
    )
    assert not called.get("isError")
    runners = called["structuredContent"]["runners"]
    assert [(r["id"], r["label"]) for r in runners] == [(laptop.pk, "laptop")]
