"""In Debian's chromium: a Claude Code harness made from the "New harness" form, run on the
member's runner with the real pinned Claude Code, its trace read on the case page; the
Harnesses page read without opening any JSON.

Real processes throughout: daphne, the scheduler, `python -m runnercli run`, and the pinned
`claude` it starts, which talks to a scripted Anthropic endpoint on 127.0.0.1 (its tool call
runs for real, in Claude Code's own sandbox). The pages' pictures in docs/ come from here.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from accounts.services import api_key_create
from runners.services import runner_pair
from scorecards.services import dataset_create
from tests.agentclis.anthropic_api import AnthropicEndpoint
from tests.agentclis.clis import CLAUDE, agent_home
from tests.agentclis.scripted import Text, ToolCall
from tests.browser.screenshots import keep
from tests.browser.test_run_page import Console, browser, log_in
from tests.live import daphne, rest, runner_cli, scheduler, sealed_host

__all__ = ["browser"]

pytestmark = [pytest.mark.browser, pytest.mark.agent_clis, pytest.mark.once, pytest.mark.e2e]

SCRIPT = [
    ToolCall("Bash", {"command": "echo hello from the case", "description": "Say hello"}),
    Text("I said hello."),
]


@pytest.fixture
def member(transactional_db: Any, alice: Any, workspace: Any) -> tuple[str, str]:
    """A dataset of one question, a runner token and an API key (made before the browser
    starts: its event loop runs in this thread, where the ORM may not)."""
    case = {"key": "greet", "input": {"prompt": "Say hello in the shell."}, "expected": "hello"}
    dataset_create(user=alice, workspace_slug="acme", name="greetings", cases=[case])
    token = runner_pair(owner=alice, label="laptop", capabilities=["claude"]).token
    return token, api_key_create(user=alice).key


def claude_on_path(tmp_path: Path) -> str:
    """A directory holding `claude`: the pinned native binary, as a member's PATH has it."""
    bin_dir = tmp_path / "claude-bin"
    bin_dir.mkdir()
    (bin_dir / "claude").symlink_to(CLAUDE)
    return str(bin_dir)


def create_from_the_form(page: Any, url: str) -> None:
    page.goto(f"{url}/w/acme/harnesses/")
    # The fields follow the kind: the agent's for Claude Code, the command's for a command.
    assert page.locator("input[name=kind][value=claude-code]").is_checked()
    assert page.locator("#id_command").is_hidden() and page.locator("#id_prompt").is_visible()
    page.check("input[name=kind][value=command]")
    assert page.locator("#id_command").is_visible() and page.locator("#id_prompt").is_hidden()
    page.check("input[name=kind][value=claude-code]")
    page.fill("#id_name", "greeter")
    page.fill("#id_prompt", "{input.prompt}")
    page.fill("#id_timeout_s", "120")
    page.select_option("#id_grader", "contains")
    keep(page, "new-harness.png", "form.harness-form")
    page.click("text=Save harness")
    page.wait_for_url(re.compile(r".*/harnesses/#h-greeter$"))
    assert "Harness greeter v1 created." in page.inner_text(".messages")


def read_the_harnesses_page(page: Any) -> None:
    section = page.locator("section[data-harness=greeter]")
    facts = {
        name: section.locator(f"[data-fact={name}]").inner_text()
        for name in ("agent", "model", "repo", "grader", "timeout", "needs")
    }
    assert facts == {
        "agent": "Claude Code worktree",
        "model": "CLI default",
        "repo": "—",
        "grader": "contains",
        "timeout": "120 s",
        "needs": "claude feature trace",
    }
    # The JSON is folded away; what runs is one click further.
    assert section.locator("details.spec-json pre").first.is_hidden()
    keep(page, "harnesses.png", "section[data-harness=greeter]")
    section.locator("details.spec-json summary").click()
    assert "--permission-mode" in section.locator("details.spec-json").inner_text()


def run_it(page: Any, url: str) -> None:
    for _ in range(60):
        page.goto(f"{url}/w/acme/runs/new?harness=greeter")
        option = page.locator("#id_runtime option", has_text="My local host — laptop · online")
        if option.count():
            break
        page.wait_for_timeout(500)
    page.select_option("#id_harness", "greeter")
    page.select_option("#id_dataset", "greetings")
    page.select_option("#id_runtime", option.get_attribute("value"))
    page.click("text=Start run")
    page.wait_for_url(re.compile(r".*/runs/\d+/$"))
    page.wait_for_function(
        "['succeeded', 'failed'].includes(document.getElementById('run-status').textContent)",
        timeout=120_000,
    )


def test_a_claude_code_harness_from_the_form_runs_and_its_trace_reads(
    member: tuple[str, str], browser: Any, tmp_path: Path
) -> None:
    token, key = member
    console = Console()
    endpoint = AnthropicEndpoint(SCRIPT)
    with agent_home() as home, endpoint.serve(), daphne(tmp_path) as server, scheduler(tmp_path):
        url = server.url
        runner = runner_cli(
            tmp_path,
            ["run", "--server", url, "--token", token, "--wait-ms", "2000"],
            PATH=f"{claude_on_path(tmp_path)}:{sealed_host(tmp_path)['PATH']}",
            HOME=home.home,
            CLAUDE_CONFIG_DIR=home.claude_config,
            ANTHROPIC_BASE_URL=endpoint.url,
            ANTHROPIC_API_KEY="sk-ant-scripted",
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
            DISABLE_AUTOUPDATER="1",
        )
        try:
            page = console.watch(browser.new_page(viewport={"width": 1280, "height": 900}))
            log_in(page, url)
            create_from_the_form(page, url)
            read_the_harnesses_page(page)
            run_it(page, url)
            run_id = int(page.url.rstrip("/").rsplit("/", 1)[1])
            assert page.inner_text("#run-status") == "succeeded", runner.output()[-3000:]

            page.goto(f"{url}/runs/{run_id}/cases/greet/")
            page.wait_for_selector("[data-timeline] li[data-seq]", timeout=10_000)
            timeline = page.inner_text("[data-timeline]")
            totals = page.inner_text("[data-trace-totals]")
            keep(page, "case-trace.png", "[data-timeline]")
            status, trace = rest(url, "GET", f"/api/runs/{run_id}/trace?key=greet", key)
        finally:
            runner.stop()
    assert status == 200
    assert "Bash" in timeline and "echo hello from the case" in timeline, timeline
    assert "tool calls" in totals
    calls = [e for e in trace["events"] if e["kind"] == "tool_call"]
    assert [(c["name"], c["data"]["input"]["command"]) for c in calls] == [
        ("Bash", "echo hello from the case")
    ]
    results = [e for e in trace["events"] if e["kind"] == "tool_result"]
    assert "hello from the case" in str(results[0]["data"])
    # The model was asked what the harness's prompt said, through the expanded argv.
    assert "Say hello in the shell." in endpoint.first_user_text(endpoint.requests()[0].body)
    assert console.errors == []
