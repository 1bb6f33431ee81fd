"""Where the pinned Claude Code finds a member's login and settings, what leaves the settings
out, and what it says when a plan limit is hit."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import re2

from runnercli.protocol.agents import CLAUDE_CODE
from tests.agentclis.anthropic_api import AnthropicEndpoint
from tests.agentclis.anthropic_api import error_body as anthropic_error
from tests.agentclis.clis import AgentHome, Run, claude, claude_env, claude_print
from tests.agentclis.proxy import standing_in_for
from tests.agentclis.scripted import HttpError, Text, ToolCall

pytestmark = [pytest.mark.agent_clis, pytest.mark.once]

WORKTREE = CLAUDE_CODE.permissions["worktree"]
ACCESS_TOKEN = "sk-ant-oat01-scripted-access"
USER_INSTRUCTIONS = "Member's own instructions: always answer in French."
REPO_INSTRUCTIONS = "The repo's instructions: run the tests before finishing."


def store_login(config_dir: Path, *, expires_in_s: float = 86400) -> None:
    """A subscription login as `claude` stores it on Linux: `.credentials.json`."""
    login = {
        "claudeAiOauth": {
            "accessToken": ACCESS_TOKEN,
            "refreshToken": "sk-ant-ort01-scripted-refresh",
            "expiresAt": int((time.time() + expires_in_s) * 1000),
            "scopes": ["user:inference", "user:profile", "user:sessions:claude_code"],
            "subscriptionType": "max",
        }
    }
    config_dir.mkdir(parents=True, exist_ok=True)
    (config_dir / CLAUDE_CODE.login_file).write_text(json.dumps(login))


def configure_member(home: AgentHome, repo: Path) -> Path:
    """What a member set up for themselves — a hook on every session and every command, their
    instructions, an MCP server — and what the repo sets up for everyone; each hook and
    server leaves a marker file when it runs. Returns where the markers go."""
    markers = home.root / "markers"
    markers.mkdir()

    def hook(name: str) -> list[dict[str, Any]]:
        return [{"hooks": [{"type": "command", "command": f"touch {markers / name}"}]}]

    def server(name: str) -> dict[str, Any]:
        return {"command": "sh", "args": ["-c", f"touch {markers / name}"]}

    config = home.claude_config
    user_hooks = {"SessionStart": hook("user-session"), "PreToolUse": hook("user-tool")}
    (config / "settings.json").write_text(json.dumps({"hooks": user_hooks}))
    (config / "CLAUDE.md").write_text(USER_INSTRUCTIONS + "\n")
    (config / ".claude.json").write_text(json.dumps({"mcpServers": {"mine": server("user-mcp")}}))
    (repo / ".claude").mkdir()
    repo_hooks = {"hooks": {"SessionStart": hook("repo-session")}}
    (repo / ".claude" / "settings.json").write_text(json.dumps(repo_hooks))
    (repo / "CLAUDE.md").write_text(REPO_INSTRUCTIONS + "\n")
    (repo / ".mcp.json").write_text(json.dumps({"mcpServers": {"repos": server("repo-mcp")}}))
    return markers


def run_one_command(home: AgentHome, repo: Path, serve: Any, *flags: str, **env: Any) -> Any:
    endpoint = serve(AnthropicEndpoint([ToolCall("Bash", {"command": "echo hi"}), Text("done")]))
    run = claude(
        claude_print("Say hi.", *WORKTREE, *flags),
        cwd=repo,
        env=claude_env(home, endpoint.url, **env),
    )
    assert run.returncode == 0, run.stdout + run.stderr
    return run, endpoint


def mcp_servers(run: Run) -> list[str]:
    return sorted(server["name"] for server in run.init["mcp_servers"])


def test_a_login_in_the_config_dir_is_sent_as_a_bearer_token(
    home: AgentHome, repo: Path, serve: Any
) -> None:
    store_login(home.claude_config)
    run, endpoint = run_one_command(home, repo, serve, api_key=None)

    assert run.init["apiKeySource"] == "none"
    for request in endpoint.requests():
        assert request.headers["authorization"] == f"Bearer {ACCESS_TOKEN}"
        assert "x-api-key" not in request.headers
        assert "oauth-2025-04-20" in request.headers["anthropic-beta"].split(",")


def test_a_login_near_expiry_is_refreshed_and_written_back(
    home: AgentHome, repo: Path, serve: Any
) -> None:
    store_login(home.claude_config, expires_in_s=60)
    renewed = {
        "access_token": "sk-ant-oat01-renewed",
        "refresh_token": "sk-ant-ort01-renewed",
        "expires_in": 28800,
        "scope": "user:inference user:profile user:sessions:claude_code",
        "token_type": "Bearer",
    }
    # The refresh cannot be pointed at 127.0.0.1 (CLAUDE_CODE_CUSTOM_OAUTH_URL takes only
    # Anthropic's own hosts): a proxy stands in for platform.claude.com.
    with standing_in_for("platform.claude.com", renewed, home.root) as proxy:
        _, endpoint = run_one_command(
            home,
            repo,
            serve,
            api_key=None,
            HTTPS_PROXY=proxy.url,
            NO_PROXY="127.0.0.1",
            NODE_EXTRA_CA_CERTS=str(proxy.ca),
        )

    [(request_line, body)] = proxy.requests
    assert request_line == "POST /v1/oauth/token HTTP/1.1"
    assert body == {
        "grant_type": "refresh_token",
        "refresh_token": "sk-ant-ort01-scripted-refresh",
        "client_id": "9d1c250a-e61b-44d9-88ed-5944d1962f5e",
        "scope": "user:profile user:inference user:sessions:claude_code user:mcp_servers "
        "user:file_upload",
    }
    for request in endpoint.requests():
        assert request.headers["authorization"] == "Bearer sk-ant-oat01-renewed"
    stored = json.loads((home.claude_config / CLAUDE_CODE.login_file).read_text())
    login = stored["claudeAiOauth"]
    assert (login["accessToken"], login["refreshToken"]) == (
        "sk-ant-oat01-renewed",
        "sk-ant-ort01-renewed",
    )
    assert login["expiresAt"] / 1000 == pytest.approx(time.time() + 28800, abs=120)
    assert login["subscriptionType"] == "max"


def test_a_refresh_that_fails_goes_on_with_the_old_token(
    home: AgentHome, repo: Path, serve: Any
) -> None:
    store_login(home.claude_config, expires_in_s=-60)
    # Trusting no stand-in, the refresh's TLS fails, as it would offline.
    with standing_in_for("platform.claude.com", {}, home.root) as proxy:
        _, endpoint = run_one_command(
            home, repo, serve, api_key=None, HTTPS_PROXY=proxy.url, NO_PROXY="127.0.0.1"
        )

    assert "platform.claude.com:443" in proxy.connects
    assert proxy.requests == []
    assert endpoint.requests()[0].headers["authorization"] == f"Bearer {ACCESS_TOKEN}"
    stored = json.loads((home.claude_config / CLAUDE_CODE.login_file).read_text())
    assert stored["claudeAiOauth"]["accessToken"] == ACCESS_TOKEN


def test_member_settings_apply_by_default(home: AgentHome, repo: Path, serve: Any) -> None:
    markers = configure_member(home, repo)
    run, endpoint = run_one_command(home, repo, serve)

    fired = sorted(marker.name for marker in markers.iterdir())
    assert fired == ["repo-mcp", "repo-session", "user-mcp", "user-session", "user-tool"]
    assert mcp_servers(run) == ["mine", "repos"]
    sent = endpoint.requests()[0].text
    assert USER_INSTRUCTIONS in sent
    assert REPO_INSTRUCTIONS in sent


def test_setting_sources_leave_out_the_members_settings_but_not_the_repos(
    home: AgentHome, repo: Path, serve: Any
) -> None:
    markers = configure_member(home, repo)
    store_login(home.claude_config)
    run, endpoint = run_one_command(home, repo, serve, *CLAUDE_CODE.clean_flags, api_key=None)

    assert sorted(marker.name for marker in markers.iterdir()) == ["repo-mcp", "repo-session"]
    assert mcp_servers(run) == ["repos"]
    sent = endpoint.requests()[0].text
    assert USER_INSTRUCTIONS not in sent
    assert REPO_INSTRUCTIONS in sent
    # The login is not a setting: it is still read from the same directory.
    assert endpoint.requests()[0].headers["authorization"] == f"Bearer {ACCESS_TOKEN}"


def test_a_fresh_config_dir_holding_the_login_keeps_it_and_nothing_else(
    home: AgentHome, repo: Path, serve: Any
) -> None:
    markers = configure_member(home, repo)
    clean = home.root / "clean-claude"
    store_login(clean)
    _, endpoint = run_one_command(
        home, repo, serve, *CLAUDE_CODE.clean_flags, api_key=None, CLAUDE_CONFIG_DIR=str(clean)
    )

    assert sorted(marker.name for marker in markers.iterdir()) == ["repo-mcp", "repo-session"]
    assert USER_INSTRUCTIONS not in endpoint.requests()[0].text
    assert endpoint.requests()[0].headers["authorization"] == f"Bearer {ACCESS_TOKEN}"


def test_strict_mcp_config_leaves_out_every_mcp_server_but_nothing_else(
    home: AgentHome, repo: Path, serve: Any
) -> None:
    markers = configure_member(home, repo)
    run, endpoint = run_one_command(home, repo, serve, "--strict-mcp-config")

    assert sorted(marker.name for marker in markers.iterdir()) == [
        "repo-session",
        "user-session",
        "user-tool",
    ]
    assert mcp_servers(run) == []
    assert USER_INSTRUCTIONS in endpoint.requests()[0].text


def plan_limit(reset: int) -> HttpError:
    """What the API answers a subscription over its five-hour limit."""
    headers = {
        "anthropic-ratelimit-unified-status": "rejected",
        "anthropic-ratelimit-unified-reset": str(reset),
        "anthropic-ratelimit-unified-representative-claim": "five_hour",
        "anthropic-ratelimit-unified-5h-status": "rejected",
        "anthropic-ratelimit-unified-5h-reset": str(reset),
        "anthropic-ratelimit-unified-5h-utilization": "1.0",
        "request-id": "req_scripted_limit",
    }
    message = "This request would exceed your account's rate limit. Please try again later."
    return HttpError(429, anthropic_error("rate_limit_error", message), headers)


def test_a_subscription_limit_says_when_it_resets_and_is_not_retried(
    home: AgentHome, repo: Path, serve: Any
) -> None:
    # Half past the hour, one to two hours from now.
    reset = (int(time.time()) // 3600 + 2) * 3600 - 1800
    reset_at = datetime.fromtimestamp(reset, UTC)
    store_login(home.claude_config)
    endpoint = serve(AnthropicEndpoint([plan_limit(reset)]))

    run = claude(
        claude_print("Go.", *WORKTREE), cwd=repo, env=claude_env(home, endpoint.url, api_key=None)
    )

    assert (run.returncode, run.stderr) == (1, "")
    assert len(endpoint.requests()) == 1
    [event] = run.of_type("rate_limit_event")
    assert event["rate_limit_info"]["status"] == "rejected"
    assert event["rate_limit_info"]["resetsAt"] == reset
    assert event["rate_limit_info"]["rateLimitType"] == "five_hour"
    said = f"{reset_at.hour % 12 or 12}:30{'am' if reset_at.hour < 12 else 'pm'}"
    assert run.result["is_error"] is True
    assert run.result["api_error_status"] == 429
    # In the zone the CLI runs in (the test's TZ=UTC); a day that is not today comes first
    # ("Dec 6, 4:30pm").
    text = run.result["result"]
    assert text.startswith("You've hit your session limit · resets ")
    assert text.endswith(f"{said} (UTC)")
    found = re2.search(CLAUDE_CODE.plan_limit_regex, text)
    assert found is not None
    assert found.group("limit") == "session"
    assert found.group("reset").endswith(said)


def test_an_api_key_over_its_limit_is_retried_and_not_told_when_it_resets(
    home: AgentHome, repo: Path, serve: Any
) -> None:
    endpoint = serve(AnthropicEndpoint([plan_limit(int(time.time()) + 7200)]))
    env = claude_env(home, endpoint.url, CLAUDE_CODE_MAX_RETRIES="1")

    run = claude(claude_print("Go.", *WORKTREE), cwd=repo, env=env)

    assert run.returncode == 1
    assert len(endpoint.requests()) == 2
    [retry] = [e for e in run.of_type("system") if e["subtype"] == "api_retry"]
    assert (retry["attempt"], retry["max_retries"], retry["error_status"]) == (1, 1, 429)
    assert run.of_type("rate_limit_event") == []
    assert run.result["result"] == (
        "API Error: Request rejected (429) · This request would exceed your account's rate "
        "limit. Please try again later."
    )
    assert re2.search(CLAUDE_CODE.plan_limit_regex, run.result["result"]) is None
