"""`agent_config: clean` with the pinned Claude Code and Codex, through the runner's own stages: the
member's hook does not fire and their instructions never reach the model, their login still
works (and a token the CLI refreshed goes back to their file); under `member` both are
there. The fresh configuration lives under the runner's state directory and goes after."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from runnercli.case import argv as argv_module
from runnercli.case.agentconfig.stage import AgentConfig, with_flags
from runnercli.case.collect import Collect
from runnercli.case.execute import Execute
from runnercli.case.pipeline import CaseContext, Pipeline
from runnercli.case.prepare import Prepare
from runnercli.protocol import Lease
from runnercli.protocol.agents import CLAUDE_CODE
from runnercli.session import JobRun
from tests.agentclis.anthropic_api import AnthropicEndpoint
from tests.agentclis.clis import CLAUDE, CODEX_BIN, CODEX_MODEL, AgentHome, codex_provider
from tests.agentclis.openai_api import ResponsesEndpoint
from tests.agentclis.proxy import standing_in_for
from tests.agentclis.scripted import Text, ToolCall
from tests.agentclis.test_claude_code_config import ACCESS_TOKEN, USER_INSTRUCTIONS, store_login
from tests.agentclis.test_codex_config import ACCOUNT, CONFIG_INSTRUCTIONS, store_chatgpt_login
from tests.agentclis.test_codex_config import USER_INSTRUCTIONS as CODEX_USER_INSTRUCTIONS
from tests.agentclis.test_codex_config import configure_member as configure_codex_member
from tests.runnercli.conftest import make_job

pytestmark = [pytest.mark.agent_clis, pytest.mark.once]

RENEWED = {
    "access_token": "sk-ant-oat01-renewed",
    "refresh_token": "sk-ant-ort01-renewed",
    "expires_in": 28800,
    "scope": "user:inference user:profile user:sessions:claude_code",
    "token_type": "Bearer",
}


def run_case(agent_config: str, state_dir: Path, command: list[str] | None = None) -> CaseContext:
    command = command or ["claude", "-p", "Say hi.", "--output-format", "json"]
    job = make_job(command, timeout_s=60)
    job.harness.spec.agent_config = agent_config  # type: ignore[assignment]
    # A runner reads its environment once per session; each case here is a session of its own.
    argv_module._inherited_env.cache_clear()
    lease = Lease(job_id=1, lease_epoch=1, lease_ttl_ms=0, heartbeat_ms=0)
    case = CaseContext(JobRun(job, lease, kill=asyncio.Event()))
    stages = [Prepare(), AgentConfig(state_dir), Execute(), Collect()]
    asyncio.run(Pipeline(stages).run(case))
    return case


@pytest.fixture
def member(home: AgentHome, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The member's machine as the runner sees it: `claude` on PATH, a subscription login
    near its expiry, a SessionStart hook that leaves a marker, their own CLAUDE.md."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "claude").symlink_to(CLAUDE)
    markers = home.root / "markers"
    markers.mkdir()
    hook = [{"hooks": [{"type": "command", "command": f"touch {markers / 'user-session'}"}]}]
    config = home.claude_config
    (config / "settings.json").write_text(json.dumps({"hooks": {"SessionStart": hook}}))
    (config / "CLAUDE.md").write_text(USER_INSTRUCTIONS + "\n")
    store_login(config, expires_in_s=60)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setenv("HOME", str(home.home))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(config))
    monkeypatch.setenv("TMPDIR", str(home.temporary))
    monkeypatch.setenv("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
    monkeypatch.setenv("DISABLE_AUTOUPDATER", "1")
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    return markers


def test_clean_drops_the_members_hook_and_instructions_and_keeps_their_login(
    home: AgentHome, member: Path, serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    endpoint = serve(AnthropicEndpoint([Text("hi")]))
    monkeypatch.setenv("ANTHROPIC_BASE_URL", endpoint.url)
    state = home.root / "state"
    login = home.claude_config / CLAUDE_CODE.login_file
    # The refresh cannot be pointed at 127.0.0.1: a proxy stands in for platform.claude.com.
    with standing_in_for("platform.claude.com", RENEWED, home.root) as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        monkeypatch.setenv("NODE_EXTRA_CA_CERTS", str(proxy.ca))
        clean = run_case("clean", state)

    assert clean.result is not None and clean.result.status == "completed", clean.result
    assert json.loads(clean.result.output)["result"] == "hi"
    assert clean.result.fingerprint.agent_config == "clean"
    assert not (member / "user-session").exists()
    assert all(USER_INSTRUCTIONS not in request.text for request in endpoint.requests())
    # The login worked: refreshed during the case, and written back to the member's file.
    assert [r.headers["authorization"] for r in endpoint.requests()] == [
        "Bearer sk-ant-oat01-renewed"
    ]
    assert len(proxy.requests) == 1
    stored = json.loads(login.read_text())["claudeAiOauth"]
    assert (stored["accessToken"], stored["refreshToken"]) == (
        "sk-ant-oat01-renewed",
        "sk-ant-ort01-renewed",
    )
    # Its configuration was made under the runner's state directory, and is gone.
    assert clean.env["CLAUDE_CONFIG_DIR"].startswith(str(state / "agent-config"))
    assert list((state / "agent-config").iterdir()) == []
    assert clean.argv is not None and "--setting-sources" in clean.argv

    store_login(home.claude_config)
    endpoint.received.clear()
    mine = run_case("member", state)
    assert mine.result is not None and mine.result.status == "completed", mine.result
    assert mine.result.fingerprint.agent_config == "member"
    assert (member / "user-session").exists()
    assert USER_INSTRUCTIONS in endpoint.requests()[0].text
    assert endpoint.requests()[0].headers["authorization"] == f"Bearer {ACCESS_TOKEN}"

    # The fingerprints: digests of what each ran with, never the contents.
    theirs = (mine.result.fingerprint.agent_settings or {})["claude"]
    assert all(len(theirs[name]) == 16 for name in ("settings", "instructions", "hooks"))
    assert (theirs["plugins"], theirs["mcp_servers"]) == ("", "")
    assert USER_INSTRUCTIONS not in json.dumps(mine.result.fingerprint.model_dump())
    assert (clean.result.fingerprint.agent_settings or {})["claude"] == {
        "settings": "",
        "instructions": "",
        "hooks": "",
        "plugins": "",
        "mcp_servers": "",
    }


def test_clean_codex_keeps_the_login_and_drops_config_toml_and_agents_md(
    home: AgentHome, tmp_path: Path, serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "codex").symlink_to(CODEX_BIN)
    markers = configure_codex_member(home, tmp_path)
    store_chatgpt_login(home.codex_home)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setenv("HOME", str(home.home))
    monkeypatch.setenv("CODEX_HOME", str(home.codex_home))
    monkeypatch.setenv("TMPDIR", str(home.temporary))
    endpoint = serve(ResponsesEndpoint([ToolCall("exec_command", {"cmd": "true"}), Text("hi")]))
    # The provider on the command line: a clean run reads no config.toml.
    command = [
        "codex",
        "exec",
        "--json",
        "--skip-git-repo-check",
        "--ephemeral",
        *codex_provider(endpoint.url, login=True),
        "-m",
        CODEX_MODEL,
        "--",
        "Say hi.",
    ]
    clean = run_case("clean", home.root / "state", command)
    assert clean.result is not None and clean.result.status == "completed", clean.result
    assert '"type":"agent_message","text":"hi"' in clean.result.output
    assert list(markers.iterdir()) == []
    sent = endpoint.requests()[0]
    assert CODEX_USER_INSTRUCTIONS not in sent.text and CONFIG_INSTRUCTIONS not in sent.text
    assert sent.headers["chatgpt-account-id"] == ACCOUNT
    assert clean.argv is not None and "--ignore-user-config" in clean.argv
    assert list((home.root / "state" / "agent-config").iterdir()) == []

    endpoint.received.clear()
    mine = run_case("member", home.root / "state", command)
    assert mine.result is not None and '"text":"hi"' in mine.result.output, mine.result
    assert CODEX_USER_INSTRUCTIONS in endpoint.requests()[0].text
    assert (mine.result.fingerprint.agent_settings or {})["codex"]["hooks"] != ""


def test_the_clean_flags_go_among_the_options() -> None:
    flags = CLAUDE_CODE.clean_flags
    assert with_flags(["claude", "-p", "--", "hi"], flags) == ["claude", "-p", *flags, "--", "hi"]
    assert with_flags(["claude", "-p", "hi"], flags) == ["claude", "-p", "hi", *flags]
