"""A database created before the identity app moved (and before every later schema change)
upgrades with `migrate` alone, and keeps its users, keys, runners and runs."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

# The migration state every database had before `accounts/` took over the API keys.
BEFORE = [("everdict", "0001_initial"), ("runners", "0002_initial"), ("scorecards", "0001_initial")]


def _migrate(targets: list[tuple[str, str]]) -> Any:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


def _latest() -> list[tuple[str, str]]:
    executor = MigrationExecutor(connection)
    return executor.loader.graph.leaf_nodes()


def _seed(old: Any) -> dict[str, int]:
    """Rows written through the models as they were at `BEFORE`."""
    user = old.get_model("auth", "User").objects.create(username="old-alice", password="x")
    key = old.get_model("everdict", "ApiKey").objects.create(
        user=user, name="ci", prefix="evk_abcdefgh", key_hash="a" * 64
    )
    workspace = old.get_model("scorecards", "Workspace").objects.create(slug="old", name="Old")
    old.get_model("scorecards", "Membership").objects.create(
        workspace=workspace, user=user, role="owner"
    )
    runner = old.get_model("runners", "Runner").objects.create(
        owner=user, label="old laptop", token_hash="b" * 64, token_prefix="rnr_abcdefgh"
    )
    harness = old.get_model("scorecards", "HarnessVersion").objects.create(
        workspace=workspace, name="h", version=1, spec={"command": ["true"]}, created_by=user
    )
    dataset = old.get_model("scorecards", "DatasetVersion").objects.create(
        workspace=workspace, name="d", version=1, created_by=user, case_count=1
    )
    case = old.get_model("scorecards", "Case").objects.create(
        dataset=dataset, position=0, key="c0", input={}, expected="ok"
    )
    run = old.get_model("scorecards", "Run").objects.create(
        workspace=workspace,
        harness=harness,
        dataset=dataset,
        runtime=f"self:{runner.pk}",
        runner=runner,
        submitted_by=user,
        status="succeeded",
    )
    old.get_model("scorecards", "CaseResult").objects.create(
        run=run, case=case, runner=runner, verdict="pass", score=1.0, status="completed"
    )
    return {"user": user.pk, "key": key.pk, "runner": runner.pk, "run": run.pk}


def test_migrate_moves_api_keys_from_everdict_to_accounts_keeping_users_runners_and_runs() -> None:
    latest = _latest()
    try:
        ids = _seed(_migrate(BEFORE))
        _migrate(latest)
    finally:
        _migrate(latest)  # whatever happened, the next test finds the current schema

    from accounts.models import ApiKey
    from runners.models import Runner
    from scorecards.models import CaseResult, Run

    key = ApiKey.objects.select_related("user").get(pk=ids["key"])
    assert (key.user.username, key.name, key.prefix) == ("old-alice", "ci", "evk_abcdefgh")
    assert Runner.objects.get(pk=ids["runner"]).label == "old laptop"
    run = Run.objects.get(pk=ids["run"])
    assert (run.status, run.submitted_by_id, run.runner_id) == (
        "succeeded",
        ids["user"],
        ids["runner"],
    )
    result = CaseResult.objects.get(run=run)
    assert (result.verdict, result.repeat) == ("pass", 0)
    assert result.seq == result.pk  # settled before settlement order was recorded: row order
