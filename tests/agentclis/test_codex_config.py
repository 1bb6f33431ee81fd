"""Where the pinned Codex finds a member's login and settings, what leaves the settings out,
how it refreshes a login, and what it says when a plan's usage limit is hit."""

from __future__ import annotations

import base64
import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import re2

from runnercli.protocol.agents import CODEX
from tests.agentclis.clis import AgentHome, Run, codex_env, codex_exec, run
from tests.agentclis.openai_api import ResponsesEndpoint
from tests.agentclis.openai_api import error_body as openai_error
from tests.agentclis.scripted import HttpError, Text, ToolCall

pytestmark = [pytest.mark.agent_clis, pytest.mark.once]

WORKTREE = CODEX.permissions["worktree"]
ACCOUNT = "acct-scripted"
USER_INSTRUCTIONS = "Member's own instructions: always answer in French."
CONFIG_INSTRUCTIONS = "Member's config.toml: prefer tabs."
REPO_INSTRUCTIONS = "The repo's instructions: run the tests before finishing."


def jwt(claims: dict[str, Any]) -> str:
    """A token shaped like ChatGPT's (Codex reads its claims; nobody checks the signature)."""

    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'RS256', 'typ': 'JWT'})}.{part(claims)}.{part({'sig': 0})}"


def chatgpt_tokens(*, expires_in_s: int, marker: str = "first") -> dict[str, str]:
    auth = {"chatgpt_plan_type": "plus", "chatgpt_account_id": ACCOUNT}
    expires = int(time.time()) + expires_in_s
    claims = {"exp": expires, "https://api.openai.com/auth": auth}
    return {
        "id_token": jwt({**claims, "email": "member@example.com"}),
        "access_token": jwt({**claims, "marker": marker}),
        "refresh_token": f"rt-{marker}",
    }


def store_chatgpt_login(codex_home: Path, *, expires_in_s: int = 3600) -> dict[str, Any]:
    """A ChatGPT login as `codex login` stores it: CODEX_HOME/auth.json."""
    login = {
        "OPENAI_API_KEY": None,
        "tokens": {**chatgpt_tokens(expires_in_s=expires_in_s), "account_id": ACCOUNT},
        "last_refresh": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / CODEX.login_file).write_text(json.dumps(login))
    return login


def say_hi(
    home: AgentHome, repo: Path, endpoint: ResponsesEndpoint, *flags: str, **env: Any
) -> Run:
    done = run(
        codex_exec(endpoint.url, "Say hi.", *WORKTREE, *flags, login=True),
        cwd=repo,
        env=codex_env(home, **env),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def test_a_chatgpt_login_in_codex_home_is_sent_with_its_account(
    home: AgentHome, repo: Path, serve: Any
) -> None:
    login = store_chatgpt_login(home.codex_home)
    endpoint = serve(ResponsesEndpoint([Text("hi")]))
    say_hi(home, repo, endpoint)

    [request] = endpoint.requests()
    assert request.headers["authorization"] == f"Bearer {login['tokens']['access_token']}"
    assert request.headers["chatgpt-account-id"] == ACCOUNT


def test_an_api_key_in_auth_json_is_sent_as_a_bearer_token(
    home: AgentHome, repo: Path, serve: Any
) -> None:
    (home.codex_home / CODEX.login_file).write_text(json.dumps({"OPENAI_API_KEY": "sk-stored"}))
    endpoint = serve(ResponsesEndpoint([Text("hi")]))
    say_hi(home, repo, endpoint)

    [request] = endpoint.requests()
    assert request.headers["authorization"] == "Bearer sk-stored"
    assert "chatgpt-account-id" not in request.headers


def test_an_expired_login_is_refreshed_and_written_back_to_auth_json(
    home: AgentHome, repo: Path, serve: Any
) -> None:
    store_chatgpt_login(home.codex_home, expires_in_s=-60)
    renewed = chatgpt_tokens(expires_in_s=7200, marker="renewed")
    endpoint = serve(ResponsesEndpoint([Text("hi")], answers={"/oauth/token": renewed}))
    say_hi(home, repo, endpoint, CODEX_REFRESH_TOKEN_URL_OVERRIDE=f"{endpoint.url}/oauth/token")

    [refresh] = endpoint.requests("/oauth/token")
    assert refresh.body == {
        "client_id": "app_EMoamEEZ73f0CkXaXp7hrann",
        "grant_type": "refresh_token",
        "refresh_reason": "proactive_expiry",
        "refresh_token": "rt-first",
    }
    [request] = endpoint.requests()
    assert request.headers["authorization"] == f"Bearer {renewed['access_token']}"
    stored = json.loads((home.codex_home / CODEX.login_file).read_text())
    assert stored["tokens"]["access_token"] == renewed["access_token"]
    assert stored["tokens"]["refresh_token"] == "rt-renewed"


def configure_member(home: AgentHome, repo: Path) -> Path:
    """A member's config.toml (instructions, a notify hook, an MCP server) and AGENTS.md, and
    the repo's AGENTS.md; what runs leaves a marker. Returns where the markers go."""
    markers = home.root / "markers"
    markers.mkdir()
    (home.codex_home / "config.toml").write_text(
        f'developer_instructions = "{CONFIG_INSTRUCTIONS}"\n'
        f'notify = ["sh", "-c", "touch {markers / "notify"}"]\n'
        "[mcp_servers.mine]\n"
        'command = "sh"\n'
        f'args = ["-c", "touch {markers / "user-mcp"}"]\n'
    )
    (home.codex_home / "AGENTS.md").write_text(USER_INSTRUCTIONS + "\n")
    (repo / "AGENTS.md").write_text(REPO_INSTRUCTIONS + "\n")
    return markers


def test_member_settings_apply_by_default(home: AgentHome, repo: Path, serve: Any) -> None:
    markers = configure_member(home, repo)
    store_chatgpt_login(home.codex_home)
    endpoint = serve(ResponsesEndpoint([ToolCall("exec_command", {"cmd": "true"}), Text("hi")]))
    say_hi(home, repo, endpoint)

    assert sorted(marker.name for marker in markers.iterdir()) == ["notify", "user-mcp"]
    sent = endpoint.requests()[0].text
    for instructions in (CONFIG_INSTRUCTIONS, USER_INSTRUCTIONS, REPO_INSTRUCTIONS):
        assert instructions in sent


def test_ignore_user_config_leaves_out_config_toml_but_not_codex_home_agents_md(
    home: AgentHome, repo: Path, serve: Any
) -> None:
    markers = configure_member(home, repo)
    store_chatgpt_login(home.codex_home)
    endpoint = serve(ResponsesEndpoint([ToolCall("exec_command", {"cmd": "true"}), Text("hi")]))
    say_hi(home, repo, endpoint, *CODEX.clean_flags)

    assert list(markers.iterdir()) == []
    sent = endpoint.requests()[0].text
    assert CONFIG_INSTRUCTIONS not in sent
    assert USER_INSTRUCTIONS in sent
    assert REPO_INSTRUCTIONS in sent
    assert endpoint.requests()[0].headers["chatgpt-account-id"] == ACCOUNT


def test_a_fresh_codex_home_holding_the_login_keeps_it_and_the_repos_instructions(
    home: AgentHome, repo: Path, serve: Any
) -> None:
    markers = configure_member(home, repo)
    clean = home.root / "clean-codex"
    login = store_chatgpt_login(clean)
    endpoint = serve(ResponsesEndpoint([ToolCall("exec_command", {"cmd": "true"}), Text("hi")]))
    say_hi(home, repo, endpoint, *CODEX.clean_flags, CODEX_HOME=str(clean))

    assert list(markers.iterdir()) == []
    sent = endpoint.requests()[0].text
    assert CONFIG_INSTRUCTIONS not in sent
    assert USER_INSTRUCTIONS not in sent
    assert REPO_INSTRUCTIONS in sent
    authorization = endpoint.requests()[0].headers["authorization"]
    assert authorization == f"Bearer {login['tokens']['access_token']}"


def test_a_usage_limit_says_when_to_try_again_and_is_not_retried(
    home: AgentHome, repo: Path, serve: Any
) -> None:
    # Half past the hour, one to two hours from now.
    reset = (int(time.time()) // 3600 + 2) * 3600 - 1800
    reset_at = datetime.fromtimestamp(reset, UTC)
    headers = {
        "x-codex-primary-used-percent": "100",
        "x-codex-primary-window-minutes": "300",
        "x-codex-primary-reset-at": str(reset),
    }
    body = openai_error(
        "The usage limit has been reached", "usage_limit_reached", plan_type="plus", resets_at=reset
    )
    store_chatgpt_login(home.codex_home)
    endpoint = serve(ResponsesEndpoint([HttpError(429, body, headers)]))
    # With Codex's own retries: a usage limit is not retried.
    done = run(
        codex_exec(endpoint.url, "Go.", *WORKTREE, login=True, retries=True),
        cwd=repo,
        env=codex_env(home),
    )

    assert done.returncode == 1
    assert len(endpoint.requests()) == 1
    said = f"{reset_at.hour % 12 or 12}:30 {'AM' if reset_at.hour < 12 else 'PM'}"
    [failed] = done.of_type("turn.failed")
    message = failed["error"]["message"]
    # In the runner's zone (TZ=UTC here); a day that is not today comes first
    # ("Dec 6th, 2026 4:30 PM").
    assert message.startswith(
        "You\u2019ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), "
        "visit https://chatgpt.com/settings/usage to purchase more credits or try again at "
    )
    assert message.endswith(f"{said}.")
    assert [e["message"] for e in done.of_type("error")] == [message]
    found = re2.search(CODEX.plan_limit_regex, message)
    assert found is not None
    assert found.group("reset").endswith(said)


def test_a_rate_limit_that_is_not_a_plan_limit_says_no_time(
    home: AgentHome, repo: Path, serve: Any
) -> None:
    body = openai_error("Rate limit reached. Please try again in 20s.", code="rate_limit_exceeded")
    endpoint = serve(ResponsesEndpoint([HttpError(429, body)]))
    done = run(
        codex_exec(endpoint.url, "Go.", *WORKTREE, retries=True), cwd=repo, env=codex_env(home)
    )

    assert done.returncode == 1
    assert len(endpoint.requests()) == 1
    message = "exceeded retry limit, last status: 429 Too Many Requests"
    assert done.of_type("turn.failed") == [{"type": "turn.failed", "error": {"message": message}}]
    assert re2.search(CODEX.plan_limit_regex, message) is None
