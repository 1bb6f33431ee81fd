from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from accounts.services import api_key_create
from runners.models import JobAttempt, JobBatch, JobLogLine, RunnerJob
from runners.services import runner_pair
from scorecards.models import Case, CaseResult, DatasetVersion, HarnessVersion, Run, RunEvent

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator(client: Client) -> Client:
    client.force_login(get_user_model().objects.create_superuser("op", password="op-pw"))
    return client


@pytest.fixture
def one_of_everything(alice: Any, workspace: Any) -> dict[str, Any]:
    issued = api_key_create(user=alice, name="ci")
    paired = runner_pair(owner=alice, label="laptop", capabilities=["claude"])
    harness = HarnessVersion.objects.create(
        workspace=workspace, name="h", version=1, spec={"command": ["echo"]}, created_by=alice
    )
    dataset = DatasetVersion.objects.create(workspace=workspace, name="d", version=1, case_count=1)
    case = Case.objects.create(dataset=dataset, position=0, key="c1", input={"q": 1}, expected="x")
    run = Run.objects.create(
        workspace=workspace,
        harness=harness,
        dataset=dataset,
        runtime="self:any",
        submitted_by=alice,
    )
    RunEvent.objects.create(run=run, message="started")
    batch = JobBatch.objects.create(payload={})
    job = RunnerJob.objects.create(
        owner=alice, run=run, seq=0, case_key="c1", batch=batch, payload={}
    )
    attempt = JobAttempt.objects.create(job=job, epoch=1, runner=paired.runner)
    JobLogLine.objects.create(job=job, run=run, epoch=1, line="hello")
    result = CaseResult.objects.create(
        run=run, case=case, verdict="pass", score=1.0, status="completed"
    )
    return {
        "apikey": (issued.api_key, issued.key),
        "runner": (paired.runner, paired.token),
        "harnessversion": harness,
        "datasetversion": dataset,
        "run": run,
        "runnerjob": job,
        "jobattempt": attempt,
        "caseresult": result,
        "workspace": workspace,
    }


@pytest.mark.parametrize(
    "model",
    [
        "everdict/apikey",
        "runners/runner",
        "runners/runnerjob",
        "runners/jobattempt",
        "runners/joblogline",
        "scorecards/workspace",
        "scorecards/harnessversion",
        "scorecards/datasetversion",
        "scorecards/run",
        "scorecards/caseresult",
    ],
)
def test_every_admin_list_renders(
    operator: Client, one_of_everything: dict[str, Any], model: str
) -> None:
    assert operator.get(f"/admin/{model}/").status_code == 200


@pytest.mark.parametrize(
    "model",
    [
        "everdict/apikey",
        "runners/runner",
        "runners/runnerjob",
        "runners/jobattempt",
        "scorecards/workspace",
        "scorecards/harnessversion",
        "scorecards/datasetversion",
        "scorecards/run",
        "scorecards/caseresult",
    ],
)
def test_every_admin_page_renders_without_secrets(
    operator: Client, one_of_everything: dict[str, Any], model: str
) -> None:
    obj = one_of_everything[model.split("/")[1]]
    obj = obj[0] if isinstance(obj, tuple) else obj

    page = operator.get(f"/admin/{model}/{obj.pk}/change/")

    assert page.status_code == 200
    for row, secret in (one_of_everything["apikey"], one_of_everything["runner"]):
        assert secret not in page.content.decode()
        digest = getattr(row, "key_hash", None) or row.token_hash
        assert digest not in page.content.decode()


def test_operators_cannot_mint_keys_or_runners_in_the_admin(operator: Client) -> None:
    assert operator.get("/admin/everdict/apikey/add/").status_code == 403
    assert operator.get("/admin/runners/runner/add/").status_code == 403
