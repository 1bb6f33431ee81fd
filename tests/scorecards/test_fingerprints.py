"""Where a run's cases ran: its distinct fingerprints, and what differs between two runs."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from runnercli.protocol import CaseResult, Fingerprint
from runners import queue
from scorecards.selectors.compare import run_compare
from scorecards.selectors.fingerprints import (
    FingerprintChange,
    fingerprint_changes,
    run_fingerprints,
)
from scorecards.services import result_submit
from tests.suites import pair, start, suite

pytestmark = pytest.mark.django_db

MACHINE = {
    "runnercli_version": "0.1.0",
    "os": "linux",
    "os_version": "6.1.0",
    "arch": "x86_64",
    "python": "3.11.7",
    "harness_digest": "ab" * 32,
}


def run_with(user: Any, runner: Any, fingerprints: list[dict[str, Any]]) -> Any:
    """A run of the echo suite whose cases report these fingerprints, in order."""
    run = start(user, runner, concurrency=len(fingerprints))
    for fingerprint in fingerprints:
        grant = queue.job_lease(runner=runner)[0]
        result_submit(
            runner=runner,
            job_id=grant.job.pk,
            lease_epoch=grant.job.lease_epoch,
            result=CaseResult(
                status="completed",
                exit_code=0,
                output=grant.job.payload["case"]["input"]["text"],
                fingerprint=Fingerprint.model_validate(fingerprint),
            ),
        )
    return run


def test_compare_names_each_fingerprint_fact_that_differs(alice: Any, workspace: Any) -> None:
    suite(alice, cases=3)
    laptop = pair(alice, "laptop")
    old = {**MACHINE, "tools": {"claude": "2.0.14", "git": "2.39.2"}}
    new = {**MACHINE, "python": "3.12.1", "tools": {"claude": "2.1.0", "git": "2.39.2"}}
    a = run_with(alice, laptop, [old, old, old])
    b = run_with(alice, laptop, [new, new, old])
    changes = fingerprint_changes(run_compare(user=alice, workspace_slug="acme", a=a.pk, b=b.pk))
    assert changes == [
        FingerprintChange("Python", "3.11.7", "3.12.1", cases=2, of=3),
        FingerprintChange("claude", "2.0.14", "2.1.0", cases=2, of=3),
    ]
    assert str(changes[1]) == "claude 2.0.14 → 2.1.0 on 2 of 3 cases"

    client = Client()
    client.force_login(alice)
    html = client.get(f"/w/acme/compare?a={a.pk}&b={b.pk}").content.decode()
    assert "What changed where they ran" in html
    assert '2.0.14</span> → <span class="mono">2.1.0</span> on 2 of 3 cases' in html


def test_a_tool_that_appears_or_goes_is_a_difference(alice: Any, workspace: Any) -> None:
    suite(alice, cases=1)
    laptop = pair(alice)
    a = run_with(alice, laptop, [MACHINE])
    b = run_with(alice, laptop, [{**MACHINE, "tools": {"node": "20.11.0"}}])
    comparison = run_compare(user=alice, workspace_slug="acme", a=a.pk, b=b.pk)
    assert [str(c) for c in fingerprint_changes(comparison)] == [
        "node (none) → 20.11.0 on 1 of 1 cases"
    ]


def test_the_same_fingerprints_mean_no_change(alice: Any, workspace: Any) -> None:
    suite(alice, cases=2)
    laptop = pair(alice)
    a = run_with(alice, laptop, [MACHINE, MACHINE])
    b = run_with(alice, laptop, [MACHINE, MACHINE])
    comparison = run_compare(user=alice, workspace_slug="acme", a=a.pk, b=b.pk)
    assert fingerprint_changes(comparison) == []
    client = Client()
    client.force_login(alice)
    html = client.get(f"/w/acme/compare?a={a.pk}&b={b.pk}").content.decode()
    assert "Same runner, machine and tool versions in both runs" in html


def test_the_run_page_shows_the_runs_distinct_fingerprints(alice: Any, workspace: Any) -> None:
    suite(alice, cases=3)
    laptop = pair(alice, "laptop")
    with_claude = {**MACHINE, "tools": {"claude": "2.1.0"}}
    run = run_with(alice, laptop, [with_claude, MACHINE, with_claude])
    groups = run_fingerprints(run)
    assert [(g.results, g.facts.get("claude"), g.runners) for g in groups] == [
        (2, "2.1.0", ["laptop"]),
        (1, None, ["laptop"]),
    ]
    assert groups[0].facts["harness"] == "ab" * 6
    client = Client()
    client.force_login(alice)
    html = client.get(f"/runs/{run.pk}/").content.decode()
    assert "Where it ran" in html
    assert groups[0].tools == {"claude": "2.1.0"} and "claude" not in groups[0].machine
    # Tools as name/version chips, apart from the machine's facts.
    chip = '<span class="tag tool-chip" data-tool="claude">claude <span class="mono">2.1.0</span>'
    assert chip in html
    assert '<span class="muted">claude</span>' not in html

    result = run.results.filter(fingerprint__has_key="tools").order_by("seq").first()
    assert result is not None
    page = client.get(f"/runs/{run.pk}/cases/{result.case.key}/").content.decode()
    assert chip in page
    assert "tools: {" not in page and "{&#x27;claude&#x27;" not in page


def test_compare_names_an_agent_configuration_that_differs(alice: Any, workspace: Any) -> None:
    suite(alice, cases=2)
    laptop = pair(alice)
    member = {**MACHINE, "agent_config": "member", "tools": {"claude": "2.1.197"}}
    clean = {**member, "agent_config": "clean"}
    a = run_with(alice, laptop, [member, member])
    b = run_with(alice, laptop, [clean, member])
    comparison = run_compare(user=alice, workspace_slug="acme", a=a.pk, b=b.pk)
    assert [str(c) for c in fingerprint_changes(comparison)] == [
        "agent config member → clean on 1 of 2 cases"
    ]


def test_compare_names_what_differs_of_an_agents_own_configuration(
    alice: Any, workspace: Any
) -> None:
    suite(alice, cases=3)
    laptop = pair(alice)
    bare = {"settings": "", "instructions": "", "hooks": "", "plugins": "", "mcp_servers": ""}
    mine = {**bare, "settings": "1a2b3c4d5e6f7a8b", "instructions": "99aa88bb77cc66dd"}
    hooked = {**mine, "settings": "0f0f0f0f0f0f0f0f", "hooks": "5555666677778888"}
    a = run_with(alice, laptop, [{**MACHINE, "agent_settings": {"claude": mine}}] * 3)
    b = run_with(
        alice,
        laptop,
        [
            {**MACHINE, "agent_settings": {"claude": hooked}},
            {**MACHINE, "agent_settings": {"claude": hooked}},
            {**MACHINE, "agent_settings": {"claude": mine}},
        ],
    )
    comparison = run_compare(user=alice, workspace_slug="acme", a=a.pk, b=b.pk)
    assert [str(c) for c in fingerprint_changes(comparison)] == [
        "claude settings differ on 2 of 3 cases: hooks added, settings changed"
    ]
    groups = run_fingerprints(b)
    assert groups[0].machine["claude settings"].startswith("hooks 55556666, instructions")
    assert groups[0].tools == {}
