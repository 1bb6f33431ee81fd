"""The eval workspace over REST: results paged by cursor, bounded run replies, repeats, reruns,
one case whole, runs listed, compare, history; unknown body fields refused."""

from __future__ import annotations

import math
import statistics
from typing import Any
from urllib.parse import quote

import pytest
from bulk import seeded_run
from django.test import Client
from django.utils import timezone

from accounts.services import api_key_create
from runnercli.protocol import CaseResult as CaseResultWire
from runnercli.protocol import Fingerprint
from runners import queue
from runners.models import JobAttempt, RunnerJob
from scorecards.models import CaseResult, Run
from scorecards.selectors.cursors import cursor_encode
from scorecards.services import dataset_create, harness_create, result_submit, run_cancel
from tests.suites import ECHO_SPEC, completed, pair, start, suite

pytestmark = pytest.mark.django_db


def api(client: Client, user: Any) -> Client:
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {api_key_create(user=user).key}"
    return client


def settle_all(runner: Any, output_of: Any) -> None:
    """Lease and settle every job the runner can take; `output_of(job)` is what it prints."""
    while grants := queue.job_lease(runner=runner, max_jobs=10):
        for grant in grants:
            result_submit(
                runner=runner,
                job_id=grant.job.pk,
                lease_epoch=grant.job.lease_epoch,
                result=output_of(grant.job),
            )


def errored() -> CaseResultWire:
    return CaseResultWire(
        status="error", exit_code=None, output="", duration_ms=1, fingerprint=Fingerprint()
    )


@pytest.fixture
def laptop(alice: Any, workspace: Any) -> Any:
    suite(alice)
    return pair(alice, "laptop")


# ---------------------------------------------------------------- results that scale


def test_cursor_pages_stay_stable_while_results_keep_arriving(
    client: Client, alice: Any, workspace: Any
) -> None:
    run = seeded_run(alice, cases=300, verdict=lambda c, r: "fail" if c % 3 == 0 else "pass")
    late = list(CaseResult.objects.filter(run=run, seq__gt=250).order_by("seq"))
    CaseResult.objects.filter(pk__in=[r.pk for r in late]).delete()
    client = api(client, alice)

    first = client.get(f"/api/runs/{run.pk}/results?limit=100").json()
    # 50 more settle (after every result already listed) while the client pages.
    CaseResult.objects.bulk_create(late)
    seen = [r["seq"] for r in first["results"]]
    page = first
    while page["next"]:
        page = client.get(page["next"]).json()
        seen += [r["seq"] for r in page["results"]]

    assert seen == list(range(1, 301))
    assert {"case", "repeat", "seq", "verdict", "output", "reason"} <= set(first["results"][0])
    # The bare cursor MCP hands back is the same token as REST's `next`.
    assert f"cursor={quote(cursor_encode(100))}" in first["next"]

    failures = client.get(f"/api/runs/{run.pk}/results?verdict=fail,error&limit=1000").json()
    assert [r["case"] for r in failures["results"]] == [f"c{i}" for i in range(0, 300, 3)]
    assert failures["next"] is None


@pytest.mark.parametrize(
    "query",
    ["limit=0", "limit=1001", "limit=abc", "verdict=maybe", "cursor=%%%", "cursor=cD1hYmM="],
)
def test_bad_paging_input_is_a_400(client: Client, alice: Any, workspace: Any, query: str) -> None:
    run = seeded_run(alice, cases=3)
    reply = api(client, alice).get(f"/api/runs/{run.pk}/results?{query}")
    assert reply.status_code == 400, reply.content


def test_the_run_reply_of_a_10000_case_run_is_small(
    client: Client, alice: Any, workspace: Any
) -> None:
    run = seeded_run(alice, cases=10_000, output=lambda c, r: "x" * 2000)

    reply = api(client, alice).get(f"/api/runs/{run.pk}")

    body = reply.json()
    # The outputs alone are 20 MB; the reply holds 100 results cut to 1 KiB each.
    assert len(reply.content) < 200_000
    assert body["summary"]["total"] == 10_000 and body["summary"]["pass"] == 10_000
    assert len(body["results"]) == 100
    assert all(len(r["output"]) == 1024 and r["output_truncated"] for r in body["results"])
    assert body["results_next"].startswith(f"http://testserver/api/runs/{run.pk}/results?cursor=")
    assert body["next_cursor"] == cursor_encode(100)
    assert len(body["events"]) <= 50


# ---------------------------------------------------------------- repeats


def test_repeats_run_each_case_n_times_with_a_standard_error(
    client: Client, alice: Any, laptop: Any
) -> None:
    run = start(alice, laptop, repeats=3, concurrency=9)
    # c0 always passes, c1 only on its first repeat (flaky), c2 never.
    passes = {("c0", 0), ("c0", 1), ("c0", 2), ("c1", 0)}
    settle_all(
        laptop,
        lambda job: completed(
            f"hello {job.case_key[1:]}" if (job.case_key, job.repeat) in passes else "no"
        ),
    )

    body = api(client, alice).get(f"/api/runs/{run.pk}").json()

    assert sorted((r["case"], r["repeat"]) for r in body["results"]) == [
        (f"c{c}", r) for c in range(3) for r in range(3)
    ]
    fractions = [1.0, 1 / 3, 0.0]
    summary = body["summary"]
    assert (summary["total"], summary["cases"], summary["flaky"]) == (9, 3, 1)
    assert summary["pass_fraction"] == round(statistics.mean(fractions), 4)
    assert summary["stderr"] == round(statistics.stdev(fractions) / math.sqrt(3), 4)
    assert body["status"] == "succeeded" and body["repeats"] == 3
    case = api(client, alice).get(f"/api/runs/{run.pk}/cases/c1").json()
    assert (case["passes"], case["settled"], case["flaky"]) == (1, 3, True)
    assert [r["result"]["verdict"] for r in case["runs"]] == ["pass", "fail", "fail"]


def test_repeats_and_metadata_are_taken_by_the_api_and_unknown_fields_refused(
    client: Client, alice: Any, laptop: Any
) -> None:
    client = api(client, alice)
    body = {"harness": "echo", "dataset": "echo", "runtime": f"self:{laptop.pk}"}

    started = client.post(
        "/api/workspaces/acme/runs",
        body | {"repeats": 3, "metadata": {"git_sha": "abc123"}},
        content_type="application/json",
    )
    misspelt = client.post(
        "/api/workspaces/acme/runs", body | {"repeat": 3}, content_type="application/json"
    )
    too_many = client.post(
        "/api/workspaces/acme/runs", body | {"repeats": 21}, content_type="application/json"
    )
    too_big = client.post(
        "/api/workspaces/acme/runs",
        body | {"metadata": {"blob": "x" * 5000}},
        content_type="application/json",
    )

    assert started.status_code == 201, started.content
    assert started.json()["repeats"] == 3 and started.json()["summary"]["total"] == 9
    assert started.json()["metadata"] == {"git_sha": "abc123"}
    assert misspelt.status_code == 400 and "repeat" in misspelt.json()
    assert too_many.status_code == 400 and too_big.status_code == 400
    assert Run.objects.count() == 1


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/workspaces", {"slug": "x", "name": "X", "owner": "bob"}),
        ("/api/workspaces/acme/members", {"username": "bob", "role": "admin", "admin": True}),
        ("/api/workspaces/acme/harnesses", {"name": "h", "spec": ECHO_SPEC, "version": 9}),
        ("/api/workspaces/acme/datasets", {"name": "d", "cases": [], "version": 2}),
        ("/api/runners", {"label": "x", "tags": []}),
        ("/api/api-keys", {"name": "x", "scope": "all"}),
    ],
)
def test_an_unknown_field_in_any_body_is_a_400_that_changes_nothing(
    client: Client, alice: Any, workspace: Any, path: str, body: dict[str, Any]
) -> None:
    before = (Run.objects.count(), RunnerJob.objects.count())
    reply = api(client, alice).post(path, body, content_type="application/json")
    assert reply.status_code == 400, (path, reply.content)
    unknown = set(body) - {"slug", "name", "username", "role", "spec", "cases", "label"}
    assert unknown <= set(reply.json())
    assert (Run.objects.count(), RunnerJob.objects.count()) == before


# ---------------------------------------------------------------- reruns


def test_rerun_failures_runs_exactly_the_failed_cases_with_the_same_versions(
    client: Client, alice: Any, laptop: Any
) -> None:
    run = start(alice, laptop, concurrency=3)
    outputs = {"c0": completed("hello 0"), "c1": completed("wrong")}
    settle_all(
        laptop,
        lambda job: outputs.get(job.case_key) or errored(),
    )
    harness_create(
        user=alice, workspace_slug="acme", name="echo", spec=ECHO_SPEC | {"timeout_s": 9}
    )

    reply = api(client, alice).post(
        f"/api/runs/{run.pk}/rerun", {"only": "failed"}, content_type="application/json"
    )

    assert reply.status_code == 201, reply.content
    child = Run.objects.get(pk=reply.json()["id"])
    assert (child.parent_id, child.rerun_of) == (run.pk, "failed")
    assert set(child.jobs.values_list("case_key", flat=True)) == {"c1", "c2"}
    assert (child.harness_id, child.dataset_id) == (run.harness_id, run.dataset_id)
    assert reply.json()["parent"] == run.pk and reply.json()["summary"]["total"] == 2
    bad = api(client, alice).post(
        f"/api/runs/{run.pk}/rerun", {"only": "everything"}, content_type="application/json"
    )
    assert bad.status_code == 400


def test_run_unfinished_takes_the_cases_a_cancel_left_without_a_verdict(
    client: Client, alice: Any, laptop: Any
) -> None:
    run = start(alice, laptop, concurrency=1)
    grant = queue.job_lease(runner=laptop)[0]
    result_submit(
        runner=laptop, job_id=grant.job.pk, lease_epoch=grant.job.lease_epoch,
        result=completed("hello 0"),
    )  # fmt: skip
    run_cancel(user=alice, run_id=run.pk)

    reply = api(client, alice).post(
        f"/api/runs/{run.pk}/rerun", {"only": "unfinished"}, content_type="application/json"
    )
    nothing_failed = api(client, alice).post(
        f"/api/runs/{run.pk}/rerun", {"only": "failed"}, content_type="application/json"
    )

    assert reply.status_code == 201, reply.content
    child = Run.objects.get(pk=reply.json()["id"])
    assert sorted(child.jobs.values_list("case_key", flat=True)) == ["c1", "c2"]
    assert nothing_failed.status_code == 400
    assert "no failed case" in nothing_failed.json()["only"][0]


# ---------------------------------------------------------------- one case whole


def test_a_case_whole_with_any_key_its_diff_reason_attempts_and_logs(
    client: Client, alice: Any, workspace: Any
) -> None:
    odd = "a/b ?#%&\n ünï/../x"
    harness_create(user=alice, workspace_slug="acme", name="capitals", spec=ECHO_SPEC)
    dataset_create(
        user=alice,
        workspace_slug="acme",
        name="capitals",
        cases=[
            {"key": odd, "input": {"text": "Sydney"}, "expected": "Paris"},
            {"key": "..", "input": {"text": "x"}, "expected": "x"},
        ],
    )
    laptop = pair(alice)
    run = start(alice, laptop, harness="capitals", dataset="capitals", concurrency=2)
    grants = queue.job_lease(runner=laptop, max_jobs=2)
    for grant in grants:
        queue.job_report_log(
            runner=laptop, job_id=grant.job.pk, lease_epoch=grant.job.lease_epoch,
            lines=[f"working on {grant.job.case_key!r}"],
        )  # fmt: skip
        text = "Sydney" if grant.job.case_key == odd else "x"
        result_submit(
            runner=laptop, job_id=grant.job.pk, lease_epoch=grant.job.lease_epoch,
            result=completed(text, stderr_tail="thinking…"),
        )  # fmt: skip
    client = api(client, alice)

    case = client.get(f"/api/runs/{run.pk}/cases/{quote(odd, safe='')}").json()
    dots = client.get(f"/api/runs/{run.pk}/cases?key=..")
    missing = client.get(f"/api/runs/{run.pk}/cases/nope")

    assert case["case"] == odd and case["expected"] == "Paris"
    [repeat] = case["runs"]
    result = repeat["result"]
    assert result["reason"] == "expected `Paris`, got `Sydney`"
    assert result["diff"] == [{"op": "-", "text": "Paris"}, {"op": "+", "text": "Sydney"}]
    assert result["stderr_tail"] == "thinking…" and result["fingerprint"]["os"] == "linux"
    assert [a["status"] for a in repeat["attempts"]] == ["succeeded"]
    assert [line["line"] for line in case["logs"]] == [f"working on {odd!r}"]
    assert dots.status_code == 200 and dots.json()["case"] == ".."
    assert missing.status_code == 404
    page = client.get(f"/runs/{run.pk}/cases/{quote(odd, safe='')}/")
    assert page.status_code == 302  # pages need a session, not a key
    client.force_login(alice)
    page = client.get(f"/runs/{run.pk}/cases/{quote(odd, safe='')}/")
    assert page.status_code == 200
    assert "expected `Paris`, got `Sydney`" in page.content.decode()


# ---------------------------------------------------------------- runs, compare, history


def test_runs_are_listed_newest_first_filtered_and_paged(
    client: Client, alice: Any, laptop: Any
) -> None:
    suite(alice, name="other")
    runs = [start(alice, laptop).pk, start(alice, laptop, harness="other", dataset="other").pk]
    runs.append(start(alice, laptop).pk)
    client = api(client, alice)

    every = client.get("/api/workspaces/acme/runs?limit=2").json()
    rest = client.get(every["next"]).json()
    echo = client.get("/api/workspaces/acme/runs?harness=echo").json()
    bad = client.get("/api/workspaces/acme/runs?status=sleeping")

    assert [r["id"] for r in every["results"] + rest["results"]] == runs[::-1]
    assert [r["id"] for r in echo["results"]] == [runs[2], runs[0]]
    assert bad.status_code == 400


def test_compare_puts_regressions_first_against_the_previous_run(
    client: Client, alice: Any, laptop: Any
) -> None:
    before = start(alice, laptop, concurrency=3)
    settle_all(laptop, lambda job: completed("hello 0" if job.case_key == "c0" else "no"))
    after = start(alice, laptop, concurrency=3)
    settle_all(laptop, lambda job: completed("hello 1" if job.case_key == "c1" else "no"))

    body = api(client, alice).get(f"/api/runs/{after.pk}/compare").json()

    assert body["a"]["id"] == before.pk and body["b"]["id"] == after.pk
    assert [r["case"] for r in body["regressions"]] == ["c0"]
    assert [r["case"] for r in body["fixes"]] == ["c1"]
    assert body["unchanged"] == ["c2"]


def test_the_history_has_a_point_per_run_labelled_by_git_sha(
    client: Client, alice: Any, laptop: Any
) -> None:
    for sha in ("aaaaaaa111", "bbbbbbb222", None):
        start(alice, laptop, metadata={"git_sha": sha} if sha else None)
    client.force_login(alice)

    page = client.get("/w/acme/harnesses/echo/")

    assert page.status_code == 200
    text = page.content.decode()
    assert "aaaaaaa" in text and "bbbbbbb" in text
    assert text.count('<tr data-run="') == 3
    assert client.get("/w/acme/harnesses/nope/").status_code == 404


def test_a_late_result_kept_as_a_shadow_shows_what_it_would_have_scored(
    client: Client, alice: Any, laptop: Any
) -> None:
    run = start(alice, laptop, concurrency=1)
    grant = queue.job_lease(runner=laptop)[0]
    result_submit(
        runner=laptop, job_id=grant.job.pk, lease_epoch=grant.job.lease_epoch,
        result=completed("wrong"),
    )  # fmt: skip
    # As the fence keeps a refused late result on its attempt (never counted).
    JobAttempt.objects.filter(pk=grant.attempt.pk).update(
        shadow_result=completed("hello 0").model_dump(mode="json"),
        shadow_at=timezone.now(),
        shadow_reason="superseded by attempt 2",
        resumes=1,
        gap_ms=4200,
    )

    case = api(client, alice).get(f"/api/runs/{run.pk}/cases/c0").json()

    [attempt] = case["runs"][0]["attempts"]
    assert attempt["shadow"]["would"] == "pass"
    assert attempt["shadow"]["reason"] == "superseded by attempt 2"
    assert (attempt["resumes"], attempt["gap_ms"]) == (1, 4200)
    assert case["runs"][0]["result"]["verdict"] == "fail"  # the shadow is never counted
