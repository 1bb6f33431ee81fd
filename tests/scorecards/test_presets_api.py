"""A harness written as an agent preset, through the REST API: the version stores the
expansion, the reply carries what the author wrote beside it, a bad preset is a 400 with its
reason, and what a runner is sent is the expansion alone."""

from __future__ import annotations

from typing import Any

import pytest

from runnercli.protocol import FEATURES, harness_digest
from runnercli.protocol.agents import CLAUDE_CODE
from runnercli.protocol.presets import expand
from runners import queue
from runners.services import runner_hello
from scorecards.models import HarnessVersion
from tests.scorecards.test_catalog_api import HARNESSES, Api
from tests.suites import pair, start, suite

SOURCE: dict[str, Any] = {
    "agent": {"cli": "claude-code", "prompt": "{input.prompt}", "model": "claude-sonnet-4-5"},
    "repo": {"name": "acme/app"},
    "timeout_s": 900,
    "limits": {"max_turns": 20},
    "grader": {"type": "contains"},
}


@pytest.fixture
def as_alice(alice: Any, workspace: Any) -> Api:
    return Api(alice)


def test_the_version_is_the_expansion_and_the_reply_carries_the_source(as_alice: Api) -> None:
    created = as_alice.post(HARNESSES, {"name": "fixer", "spec": SOURCE})
    assert created.status_code == 201, created.content
    reply = created.json()
    assert reply["source"] == SOURCE
    assert reply["spec"] == expand(SOURCE).model_dump(mode="json")
    assert reply["spec"]["command"][:2] == ["claude", "-p"]
    assert reply["spec"]["command"][-4:] == ["--max-turns", "20", "--", "{input.prompt}"]
    assert reply["spec"]["retry_on"]["output_regex"] == CLAUDE_CODE.plan_limit_regex
    stored = HarnessVersion.objects.get(name="fixer")
    assert (stored.spec, stored.source) == (reply["spec"], SOURCE)
    assert stored.capabilities == ["claude", "repo:acme/app"]
    assert sorted(stored.features) == ["limits", "repo", "trace"]

    listed = as_alice.get(HARNESSES).json()
    assert [(h["name"], h["source"]) for h in listed] == [("fixer", SOURCE)]


def test_a_plain_spec_has_no_source(as_alice: Api) -> None:
    spec = {"command": ["python", "run.py"]}
    reply = as_alice.post(HARNESSES, {"name": "plain", "spec": spec}).json()
    assert reply["source"] is None


def test_a_runner_is_sent_the_expansion_and_never_the_source(alice: Any, workspace: Any) -> None:
    suite(alice, spec=SOURCE, name="fixer")
    laptop = pair(alice, capabilities=["claude", "repo:acme/app"])
    runner_hello(
        runner=laptop, protocol=4, capabilities=laptop.capabilities, features=list(FEATURES)
    )
    start(alice, laptop, harness="fixer", dataset="fixer")
    grants = queue.job_lease(runner=laptop, features=(4, list(FEATURES)), max_jobs=10)
    assert grants
    stored = HarnessVersion.objects.get(name="fixer")
    for grant in grants:
        sent = grant.case_job.model_dump(mode="json")
        assert sent["harness"]["spec"] == stored.spec
        assert sent["harness"]["digest"] == harness_digest(expand(SOURCE))
        assert "agent" not in str(sent) and "claude-sonnet-4-5" in str(sent)


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ({"agent": {"cli": "aider"}}, "agent.cli: Input should be 'claude-code' or 'codex'"),
        ({"agent": "claude"}, "agent: Input should be a valid dictionary"),
        (
            {"agent": {"cli": "codex"}, "command": ["codex"]},
            "command: the agent preset writes it; leave command out",
        ),
        ({"agent": {"cli": "codex", "model": "-m"}}, "agent.model: a model name is letters"),
        (
            {"agent": {"cli": "codex"}, "limits": {"max_cost_usd": 1}},
            "limits.max_cost_usd cannot be enforced on codex-jsonl",
        ),
    ],
)
def test_a_bad_preset_is_a_400_with_its_reason_and_nothing_is_stored(
    as_alice: Api, spec: dict[str, Any], reason: str
) -> None:
    refused = as_alice.post(HARNESSES, {"name": "bad", "spec": spec})
    assert refused.status_code == 400
    assert any(reason in message for message in refused.json()["spec"]), refused.json()
    assert not HarnessVersion.objects.exists()
