"""Protocol 3's runner features: a job that uses a feature is leased only to a runner that
declared it, dispatch says which runner to update, and the idle timeout names the runner
that could not run it; a runner of protocol 2 keeps serving the harnesses that use none."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import time_machine
from django.utils import timezone

from core.errors import Invalid
from runners import queue
from runners.models import Runner
from runners.services import runner_hello
from scorecards.models import CaseResult as CaseResultRow
from scorecards.services import harness_create, scheduler_expire_one_idle_run
from tests.suites import ECHO_SPEC, pair, start, suite

pytestmark = pytest.mark.django_db

REPO_SPEC = {**ECHO_SPEC, "repo": {"name": "acme/app", "ref": "head"}}
ARTIFACTS_SPEC = {**ECHO_SPEC, "artifacts": ["out/*.json"]}


@pytest.fixture
def laptop(alice: Any, workspace: Any) -> Any:
    suite(alice)
    suite(alice, spec=ARTIFACTS_SPEC, name="files")
    return pair(alice)


def lease(runner: Runner, protocol: int, features: list[str]) -> list[Any]:
    return queue.job_lease(runner=runner, features=(protocol, features), max_jobs=10)


def test_a_protocol_2_runner_is_never_leased_a_job_that_needs_a_feature(
    alice: Any, laptop: Any
) -> None:
    runner_hello(runner=laptop, protocol=3, capabilities=[], features=["artifacts"])
    files = start(alice, laptop, harness="files", dataset="files", concurrency=3)
    plain = start(alice, laptop, concurrency=3)
    # The machine went back to a runner of protocol 2, which has no features.
    old = queue.job_lease(runner=laptop, features=(2, []), max_jobs=10)
    assert {g.job.run_id for g in old} == {plain.pk}
    assert set(files.jobs.values_list("status", flat=True)) == {"queued"}
    new = lease(laptop, 3, ["artifacts"])
    assert {g.job.run_id for g in new} == {files.pk}
    assert all(g.case_job.harness.spec.artifacts == ["out/*.json"] for g in new)
    laptop.refresh_from_db()
    assert (laptop.protocol, laptop.features) == (3, ["artifacts"])


def test_dispatch_to_runners_without_the_feature_says_which_runner_to_update(
    alice: Any, laptop: Any
) -> None:
    runner_hello(runner=laptop, protocol=2, capabilities=[])
    with pytest.raises(Invalid, match="update the runner on laptop: it cannot run artifacts"):
        start(alice, laptop, harness="files", dataset="files")
    with pytest.raises(Invalid, match="update the runner on laptop: it cannot run artifacts"):
        start(alice, None, harness="files", dataset="files")
    runner_hello(runner=laptop, protocol=3, capabilities=[], features=["artifacts"])
    assert start(alice, laptop, harness="files", dataset="files").jobs.count() == 3


def test_a_repo_harness_needs_the_repo_mapped_and_says_how(alice: Any, laptop: Any) -> None:
    suite(alice, spec=REPO_SPEC, name="app")
    runner_hello(runner=laptop, protocol=3, capabilities=[], features=["repo"])
    with pytest.raises(Invalid) as refused:
        start(alice, laptop, harness="app", dataset="app")
    assert "python -m runnercli repo add acme/app PATH" in str(refused.value.detail)
    with pytest.raises(Invalid, match="repo add acme/app PATH"):
        start(alice, None, harness="app", dataset="app")
    laptop.update_capabilities(["python", "repo:acme/app"])
    run = start(alice, laptop, harness="app", dataset="app")
    job = run.jobs.first()
    assert job.required_capabilities == ["repo:acme/app"]
    assert job.needs_features == ["repo"]


def test_a_repo_at_the_runs_commit_needs_the_commit_in_the_metadata(
    alice: Any, laptop: Any
) -> None:
    suite(alice, spec={**ECHO_SPEC, "repo": {"name": "acme/app", "ref": "run"}}, name="at")
    runner_hello(runner=laptop, protocol=3, capabilities=["repo:acme/app"], features=["repo"])
    with pytest.raises(Invalid, match="git_sha"):
        start(alice, laptop, harness="at", dataset="at")
    with pytest.raises(Invalid, match="git_sha"):
        start(alice, laptop, harness="at", dataset="at", metadata={"git_sha": "not a sha"})
    run = start(alice, laptop, harness="at", dataset="at", metadata={"git_sha": "abc1234"})
    grant = lease(laptop, 3, ["repo"])[0]
    assert grant.job.run_id == run.pk
    assert grant.case_job.git_sha == "abc1234"


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ({**ECHO_SPEC, "artifacts": ["../secrets/*"]}, "goes up with '..'"),
        ({**ECHO_SPEC, "artifacts": ["/etc/*"]}, "is absolute"),
        ({**ECHO_SPEC, "artifacts": ["out/[ab"]}, "without its ']'"),
        ({**ECHO_SPEC, "repo": {"name": "Acme/App"}}, "must be lower case"),
        ({**ECHO_SPEC, "repo": {"name": "acme"}}, "exactly one '/'"),
        ({**ECHO_SPEC, "repo": {"name": "acme/app", "ref": "main"}}, "ref"),
        ({**ECHO_SPEC, "output": "yaml"}, "output"),
    ],
)
def test_a_malformed_protocol_3_key_is_refused_when_the_harness_is_stored(
    alice: Any, workspace: Any, spec: dict[str, Any], says: str
) -> None:
    with pytest.raises(Invalid) as refused:
        harness_create(user=alice, workspace_slug="acme", name="bad", spec=spec)
    assert says in str(refused.value.detail)


def test_a_runner_lacking_a_feature_does_not_protect_the_queue_and_is_named(
    alice: Any, laptop: Any
) -> None:
    runner_hello(runner=laptop, protocol=3, capabilities=[], features=["artifacts"])
    now = timezone.now()
    with time_machine.travel(now, tick=False):
        run = start(alice, laptop, harness="files", dataset="files")
    # The runner comes back updated in name only: it polls on, without the feature.
    later = now + timedelta(seconds=310)
    with time_machine.travel(later, tick=False):
        assert lease(laptop, 3, []) == []
        assert scheduler_expire_one_idle_run()
    errors = list(CaseResultRow.objects.filter(run=run).values_list("error", flat=True))
    assert errors and "cannot run artifacts: update the runner" in errors[0]
