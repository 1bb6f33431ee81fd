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


# The migration state before the features of a case's world left the scorecards app for apps
# of their own (blobs, traces, files, judging).
BEFORE_FEATURES = [
    ("everdict", "0001_initial"),
    ("runners", "0007_runner_paused_reason"),
    ("scorecards", "0007_fs_requests"),
]
MOVED = {
    "blobs": ["blob", "blobupload", "artifact"],
    "traces": ["casetrace", "traceevent", "casescreens", "screenframe"],
    "files": ["casefsrequest"],
    "judging": ["judgement"],
}


def _seed_features(old: Any) -> dict[str, int]:
    """One row of each model that moves, written through the models as they were then."""
    ids = _seed(old)
    model = old.get_model
    run = model("scorecards", "Run").objects.get(pk=ids["run"])
    result = model("scorecards", "CaseResult").objects.get(run=run)
    batch = model("runners", "JobBatch").objects.create(payload={})
    job = model("runners", "RunnerJob").objects.create(
        owner_id=ids["user"], run=run, seq=0, case_key="c0", batch=batch, payload={}
    )
    attempt = model("runners", "JobAttempt").objects.create(job=job, epoch=1)
    blob = model("scorecards", "Blob").objects.create(
        workspace=run.workspace, sha256="c" * 64, size=3, key="blobs/1/cc/c"
    )
    ids |= {
        "blob": blob.pk,
        "blobupload": model("scorecards", "BlobUpload")
        .objects.create(workspace=run.workspace, sha256="d" * 64, received=5)
        .pk,
        "artifact": model("scorecards", "Artifact")
        .objects.create(result=result, path="out/report.json", blob=blob, size=3, media_type="x")
        .pk,
        "casetrace": model("scorecards", "CaseTrace")
        .objects.create(attempt=attempt, job=job, run=run, last_seq=0, kept=1)
        .pk,
        "traceevent": model("scorecards", "TraceEvent")
        .objects.create(attempt=attempt, seq=0, ts=1, kind="message", name="hello")
        .pk,
        "casescreens": model("scorecards", "CaseScreens")
        .objects.create(attempt=attempt, job=job, run=run, received=1)
        .pk,
        "screenframe": model("scorecards", "ScreenFrame")
        .objects.create(attempt=attempt, n=0, taken_at=2, blob=blob, media_type="image/png", size=3)
        .pk,
        "casefsrequest": model("scorecards", "CaseFsRequest")
        .objects.create(job=job, lease_epoch=1, op="read", path="notes.txt", blob=blob)
        .pk,
        "judgement": model("scorecards", "Judgement")
        .objects.create(result=result, vote=0, job=job, state="readable", passed=True)
        .pk,
    }
    return ids


def _content_types() -> dict[tuple[str, str], int]:
    from django.contrib.contenttypes.models import ContentType

    ContentType.objects.clear_cache()
    return {(ct.app_label, ct.model): ct.pk for ct in ContentType.objects.all()}


def test_migrate_moves_the_case_worlds_models_to_their_apps_keeping_rows_and_content_types() -> (
    None
):
    latest = _latest()
    try:
        old = _migrate(BEFORE_FEATURES)
        ids = _seed_features(old)
        # The content types of the models then, which permissions and log entries point at.
        from django.contrib.contenttypes.models import ContentType

        for models in MOVED.values():
            for name in models:
                ContentType.objects.get_or_create(app_label="scorecards", model=name)
        before = _content_types()
        _migrate(latest)
        after = _content_types()
    finally:
        _migrate(latest)  # whatever happened, the next test finds the current schema

    from scorecards.blobs.models import Artifact, Blob, BlobUpload
    from scorecards.files.models import CaseFsRequest
    from scorecards.judging.models import Judgement
    from scorecards.traces.models import CaseScreens, CaseTrace, ScreenFrame, TraceEvent

    artifact = Artifact.objects.select_related("blob", "result").get(pk=ids["artifact"])
    assert (artifact.path, artifact.blob_id, artifact.result.run_id) == (
        "out/report.json",
        ids["blob"],
        ids["run"],
    )
    assert Blob.objects.get(pk=ids["blob"]).sha256 == "c" * 64
    assert BlobUpload.objects.get(pk=ids["blobupload"]).received == 5
    assert CaseTrace.objects.get(pk=ids["casetrace"]).kept == 1
    assert TraceEvent.objects.get(pk=ids["traceevent"]).name == "hello"
    assert CaseScreens.objects.get(pk=ids["casescreens"]).received == 1
    assert ScreenFrame.objects.get(pk=ids["screenframe"]).blob_id == ids["blob"]
    assert CaseFsRequest.objects.get(pk=ids["casefsrequest"]).path == "notes.txt"
    judgement = Judgement.objects.get(pk=ids["judgement"])
    assert (judgement.state, judgement.passed, judgement.result.run_id) == (
        "readable",
        True,
        ids["run"],
    )
    for app, models in MOVED.items():
        for name in models:
            # The same row, renamed: its permissions and log entries still point at it.
            assert after[(app, name)] == before[("scorecards", name)]
            assert ("scorecards", name) not in after
