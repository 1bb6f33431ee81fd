"""The "New harness" form (Claude Code, Codex, any command; the JSON as an advanced view) and
the Harnesses page's readable summary of each version, its JSON folded."""

from __future__ import annotations

import json
import re
from html import unescape
from typing import Any

import pytest
from django.test import Client

from runnercli.protocol.presets import expand
from scorecards.models import HarnessVersion
from scorecards.services import harness_create

pytestmark = pytest.mark.django_db

FIELDS = {
    "name": "fixer",
    "kind": "claude-code",
    "prompt": "Fix the bug: {input.prompt}",
    "model": "claude-sonnet-4-5",
    "permissions": "worktree",
    "repo": "acme/app",
    "ref": "working",
    "artifacts": "out/*.json\n\nreport.html\n",
    "timeout_s": "900",
    "grader": "contains",
    "field": "",
}


@pytest.fixture
def admin(client: Client, alice: Any, workspace: Any) -> Client:
    client.force_login(alice)
    return client


def facts(page: str, harness: str) -> dict[str, str]:
    """The summary of a harness's latest version as the page shows it, fact by fact."""
    section = page[page.index(f'data-harness="{harness}"') :]
    section = section[: section.index("</dl>")]
    found = re.findall(r'data-fact="(\w+)">(.*?)</dd>', section, re.S)
    return {name: " ".join(unescape(re.sub("<[^>]+>", " ", text)).split()) for name, text in found}


def test_the_claude_code_fields_make_a_preset_and_the_page_reads_it(admin: Client) -> None:
    created = admin.post("/w/acme/harnesses/", FIELDS, follow=True)
    assert created.status_code == 200
    stored = HarnessVersion.objects.get(name="fixer")
    assert stored.source == {
        "agent": {
            "cli": "claude-code",
            "prompt": "Fix the bug: {input.prompt}",
            "model": "claude-sonnet-4-5",
            "permissions": "worktree",
        },
        "repo": {"name": "acme/app", "ref": "working"},
        "artifacts": ["out/*.json", "report.html"],
        "timeout_s": 900,
        "grader": {"type": "contains"},
    }
    assert stored.spec == expand(stored.source).model_dump(mode="json")
    page = created.content.decode()
    assert facts(page, "fixer") == {
        "agent": "Claude Code worktree",
        "model": "claude-sonnet-4-5",
        "repo": "acme/app at working",
        "grader": "contains",
        "timeout": "900 s",
        "artifacts": "out/*.json, report.html",
        "needs": "claude repo:acme/app feature artifacts feature repo feature trace",
    }
    # The JSON is there, folded: what was written and what runs.
    folded = page[page.index('<details class="spec-json">') :]
    assert "As written:" in folded and "--permission-mode" in folded


def test_codex_with_bypass_is_marked_on_the_page(admin: Client) -> None:
    fields = {**FIELDS, "kind": "codex", "model": "", "permissions": "bypass", "repo": ""}
    admin.post("/w/acme/harnesses/", fields)
    stored = HarnessVersion.objects.get(name="fixer")
    assert stored.spec["command"][:2] == ["codex", "exec"]
    assert "--dangerously-bypass-approvals-and-sandbox" in stored.spec["command"]
    page = admin.get("/w/acme/harnesses/").content.decode()
    assert facts(page, "fixer")["agent"] == "Codex bypass"
    assert facts(page, "fixer")["model"] == "CLI default"
    assert '<span class="badge bypass">bypass</span>' in page


def test_any_command_is_split_into_arguments_and_never_given_a_shell(admin: Client) -> None:
    fields = {
        **FIELDS,
        "kind": "command",
        "command": "python solve.py --q '{input.prompt}' \"two words\"",
        "output": "json",
        "grader": "json_equals",
        "field": "result",
        "repo": "",
        "artifacts": "",
    }
    admin.post("/w/acme/harnesses/", fields)
    stored = HarnessVersion.objects.get(name="fixer")
    assert stored.source is None
    assert stored.spec["command"] == ["python", "solve.py", "--q", "{input.prompt}", "two words"]
    assert (stored.spec["output"], stored.spec["grader"]) == (
        "json",
        {"type": "json_equals", "field": "result"},
    )
    shown = facts(admin.get("/w/acme/harnesses/").content.decode(), "fixer")
    assert shown["agent"] == "command"
    assert shown["command"] == "python solve.py --q '{input.prompt}' 'two words'"
    assert shown["grader"] == "json_equals of result"


def test_show_as_json_opens_the_advanced_view_with_what_the_fields_say(admin: Client) -> None:
    page = admin.post("/w/acme/harnesses/", {**FIELDS, "show_json": "1"})
    assert page.status_code == 200
    assert not HarnessVersion.objects.exists()
    text = page.content.decode()
    assert re.search(r'<input[^>]*value="json"[^>]*checked', text)
    written = re.search(r'<textarea name="spec"[^>]*>(.*?)</textarea>', text, re.S)
    assert written is not None
    assert json.loads(unescape(written.group(1)))["agent"]["model"] == "claude-sonnet-4-5"


def test_a_bad_preset_from_the_fields_is_a_400_with_its_reason(admin: Client) -> None:
    refused = admin.post("/w/acme/harnesses/", {**FIELDS, "model": "--yolo"})
    assert refused.status_code == 400
    assert "agent.model: a model name is letters" in unescape(refused.content.decode())
    unsplittable = admin.post("/w/acme/harnesses/", {**FIELDS, "kind": "command", "command": "'"})
    assert "cannot be split into arguments" in unsplittable.content.decode()
    assert not HarnessVersion.objects.exists()


def test_a_plain_spec_reads_as_its_command_and_older_versions_as_one_line(
    admin: Client, alice: Any
) -> None:
    spec = {"command": ["claude", "-p", "{input.q}"], "grader": {"type": "exact"}}
    harness_create(user=alice, workspace_slug="acme", name="raw", spec=spec)
    harness_create(
        user=alice,
        workspace_slug="acme",
        name="raw",
        spec={"agent": {"cli": "codex"}, "limits": {"max_turns": 5}, "timeout_s": 60},
    )
    page = admin.get("/w/acme/harnesses/").content.decode()
    assert facts(page, "raw")["timeout"] == "60 s · at most 5 turns"
    assert "command · exact · 600 s" in page  # v1, in the list of all versions
