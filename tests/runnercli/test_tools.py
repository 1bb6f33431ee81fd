"""Tool versions for the fingerprint: asked once per session, each bounded in time."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from runnercli.case.tools import ToolVersions, probe, tools_of, version_of
from tests.runnercli.conftest import make_job


def fake_tool(bin_dir: Path, name: str, body: str) -> None:
    bin_dir.mkdir(exist_ok=True)
    path = bin_dir / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


@pytest.fixture
def bin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "bin"
    directory.mkdir()
    monkeypatch.setenv("PATH", f"{directory}{os.pathsep}{os.environ['PATH']}")
    return directory


def test_the_tools_of_a_job_are_its_capabilities_and_its_program() -> None:
    job = make_job(["node", "run.js"])
    job.harness.spec.capabilities[:] = ["claude", "python", "browser"]
    assert tools_of(job) == ["claude", "chromium", "google-chrome", "firefox", "node"]
    assert tools_of(make_job(["/usr/bin/python3", "x.py"])) == []


def test_a_version_is_read_from_what_the_tool_prints() -> None:
    assert version_of("2.0.14 (Claude Code)\n") == "2.0.14"
    assert version_of("git version 2.39.2\n") == "2.39.2"
    assert version_of("v20.11.0\n") == "20.11.0"
    assert version_of("Docker version 24.0.5, build ced0996") == "24.0.5"
    assert version_of("\nMozilla Firefox 115.6.0esr\n") == "115.6.0esr"
    assert version_of("nightly\x1b[2K") == "(unknown)"
    assert version_of("") == "(unknown)"
    # A wrapper's warning before the version (Debian's chromium, when `[` trips on its
    # memory check) is passed over.
    warned = "/usr/bin/chromium: 9: [: 25275424768: unexpected operator\nChromium 120.0.6099.224\n"
    assert version_of(warned) == "120.0.6099.224"


def test_a_tool_warning_before_its_version_on_either_stream_gets_its_version(
    bin_dir: Path,
) -> None:
    fake_tool(
        bin_dir,
        "chromium",
        'echo "/usr/bin/chromium: 9: [: 25275424768: unexpected operator" >&2\n'
        'echo "WARNING: proceeding, even though we could not create PATH aliases: 1.2.3" >&2\n'
        'echo "note: no GPU found"\n'
        'echo "Chromium 143.0.7499.169 built on Debian GNU/Linux 12 (bookworm)"',
    )
    fake_tool(bin_dir, "firefox", 'echo "a sentence, and no version in it"')
    assert asyncio.run(probe("chromium")) == "143.0.7499.169"
    assert asyncio.run(probe("firefox")) == "(unknown)"


def test_each_tool_is_probed_once_per_session(bin_dir: Path, tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    fake_tool(bin_dir, "claude", f'echo x >> "{calls}"; echo "2.1.0 (Claude Code)"')
    job = make_job(["claude", "-p", "hi"])

    async def twice() -> list[dict[str, str]]:
        versions = ToolVersions()
        return list(await asyncio.gather(versions.of(job), versions.of(job), versions.of(job)))

    assert asyncio.run(twice()) == [{"claude": "2.1.0"}] * 3
    assert calls.read_text().count("x") == 1


def test_a_tool_that_hangs_is_cut_off_and_recorded_so(bin_dir: Path, tmp_path: Path) -> None:
    fake_tool(bin_dir, "codex", "sleep 60")
    fake_tool(bin_dir, "git", "exit 3")
    started = time.monotonic()
    assert asyncio.run(probe("codex", timeout_s=0.5)) == "(no answer within 0.5s)"
    assert time.monotonic() - started < 5
    assert asyncio.run(probe("git")) == "(exit 3)"
    assert asyncio.run(probe("no-such-tool-here")) == "(not found)"
