"""`doctor` says whether the claude and codex on the member's PATH are the pinned versions."""

from __future__ import annotations

from pathlib import Path

import pytest

from runnercli.commands.check import agent_lines
from runnercli.protocol.agents import CLAUDE_CODE, CODEX
from tests.agentclis.clis import CLAUDE, CODEX_BIN

pytestmark = [pytest.mark.agent_clis, pytest.mark.once]


def test_doctor_names_a_pinned_cli_and_an_unpinned_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pinned, other, none = tmp_path / "pinned", tmp_path / "other", tmp_path / "none"
    for directory in (pinned, other, none):
        directory.mkdir()
    (pinned / "claude").symlink_to(CLAUDE)
    (pinned / "codex").symlink_to(CODEX_BIN)
    # An older codex, whose wrapper warns first.
    (other / "codex").write_text("#!/bin/sh\necho 'WARNING: old' >&2\necho 'codex-cli 0.101.0'\n")
    (other / "codex").chmod(0o755)

    monkeypatch.setenv("PATH", str(pinned))
    assert agent_lines() == [
        f"✓ claude {CLAUDE_CODE.version}: the pinned version",
        f"✓ codex {CODEX.version}: the pinned version",
    ]
    monkeypatch.setenv("PATH", str(other))
    assert agent_lines() == [
        f"⚠ codex 0.101.0: not the pinned version {CODEX.version} "
        f"(install it with `npm install -g @openai/codex@{CODEX.version}`)"
    ]
    monkeypatch.setenv("PATH", str(none))
    assert agent_lines() == []
