"""Verdict tools over MCP: regrade_run, set_verdict and withdraw_verdict answer as REST does;
a viewer is refused and an outsider told the run does not exist."""

from __future__ import annotations

from typing import Any

import pytest
from bulk import ECHO, seeded_run
from django.contrib.auth import get_user_model

from accounts.services import api_key_create
from runners.models import JobAttempt, RunnerJob
from scorecards.models import CaseResult, Membership, Role
from scorecards.services import harness_create
from tests.mcpgateway.mcp_client import call, error_text, structured

pytestmark = pytest.mark.e2e


def test_a_member_sets_withdraws_and_regrades_over_mcp(
    gateway: Any, alice: Any, bob: Any, charlie: Any, workspace: Any
) -> None:
    run = seeded_run(alice, cases=3, verdict=lambda c, r: "fail" if c == 1 else "pass")
    key = api_key_create(user=bob).key

    done = structured(
        call(
            gateway.url,
            key,
            "set_verdict",
            {"run_id": run.pk, "key": "c1", "verdict": "pass", "note": "right"},
        )
    )
    assert done["verdict"] == "pass" and done["person"]["by"] == "bob"
    assert done["person"]["grader_verdict"] == "fail" and done["summary"]["pass"] == 3
    got = structured(call(gateway.url, key, "get_run", {"run_id": run.pk}))
    assert got["summary"]["pass"] == 3

    regex = harness_create(
        user=alice, workspace_slug="acme", name="bulk", spec={**ECHO, "grader": {"type": "regex"}}
    )
    regraded = structured(
        call(gateway.url, key, "regrade_run", {"run_id": run.pk, "harness_version": regex.version})
    )
    assert regraded["regraded"] == 3 and regraded["kept"] == 1
    assert not JobAttempt.objects.filter(job__run=run).exists()
    assert set(RunnerJob.objects.filter(run=run).values_list("status", flat=True)) == {"succeeded"}

    withdrawn = structured(
        call(gateway.url, key, "withdraw_verdict", {"run_id": run.pk, "key": "c1"})
    )
    assert withdrawn["person"] is None and withdrawn["verdict"] == "pass"

    dave = get_user_model().objects.create_user("dave")
    Membership.objects.create(workspace=workspace, user=dave, role=Role.VIEWER)
    for user, says in ((dave, "member"), (charlie, "not found")):
        refused = call(
            gateway.url,
            api_key_create(user=user).key,
            "set_verdict",
            {"run_id": run.pk, "key": "c0", "verdict": "fail"},
        )
        assert refused.is_error and says in error_text(refused).lower(), user
        refused = call(
            gateway.url, api_key_create(user=user).key, "regrade_run", {"run_id": run.pk}
        )
        assert refused.is_error and says in error_text(refused).lower(), user
    assert CaseResult.objects.get(run=run, case__key="c0").verdict_by is None
