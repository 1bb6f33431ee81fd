"""Artifacts of results: a result naming a blob its workspace lacks is refused with the reason
and nothing stored; an accepted one lists its artifacts on the case, each downloaded by any
member of the run's workspace with safe headers, and by nobody else."""

from __future__ import annotations

import hashlib
from typing import Any
from urllib.parse import quote

import pytest
from django.test import Client

from accounts.services import api_key_create
from runnercli.protocol import ArtifactRef, CaseResult, names_missing_artifact
from runners import queue
from runners.models import JobStatus, RunnerJob
from scorecards.blobs.models import Artifact
from scorecards.blobs.services import blob_store
from scorecards.models import CaseResult as CaseResultRow
from scorecards.models import Membership, Role
from scorecards.services import result_submit, results_submit
from tests.suites import completed, pair, start, suite

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("blob_dir")]

REPORT = b"<html><script>alert(1)</script>report</html>"
NOTES = b"notes: all good\n"
PNG = b"\x89PNG\r\n\x1a\nnot really"


def ref(path: str, data: bytes, media_type: str) -> ArtifactRef:
    return ArtifactRef(
        path=path, sha256=hashlib.sha256(data).hexdigest(), size=len(data), media_type=media_type
    )


def with_artifacts(*refs: ArtifactRef) -> CaseResult:
    return completed("hello 0").model_copy(update={"artifacts": list(refs)})


@pytest.fixture
def leased(alice: Any, workspace: Any) -> tuple[Any, Any]:
    suite(alice, cases=1)
    runner = pair(alice)
    start(alice, runner)
    [grant] = queue.job_lease(runner=runner)
    return runner, grant.job


def submit(runner: Any, job: Any, result: CaseResult) -> Any:
    return result_submit(runner=runner, job_id=job.pk, lease_epoch=job.lease_epoch, result=result)


def api(client: Client, user: Any) -> Client:
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {api_key_create(user=user).key}"
    return client


def test_a_result_naming_a_blob_not_uploaded_is_refused_saying_which_and_nothing_is_stored(
    leased: tuple[Any, Any], workspace: Any
) -> None:
    runner, job = leased
    blob_store(workspace=workspace, data=NOTES)
    missing = ref("out/report.html", REPORT, "text/html")
    ack = submit(runner, job, with_artifacts(ref("notes.txt", NOTES, "text/plain"), missing))
    assert not ack.accepted
    assert ack.reason == (f"artifact out/report.html (sha256 {missing.sha256}) was not uploaded")
    assert names_missing_artifact(ack.reason)
    assert not CaseResultRow.objects.exists() and not Artifact.objects.exists()
    # Nothing settled: the job is still the runner's, and once the blob is there it is taken.
    assert RunnerJob.objects.get(pk=job.pk).status == JobStatus.LEASED
    blob_store(workspace=workspace, data=REPORT)
    again = submit(runner, job, with_artifacts(ref("notes.txt", NOTES, "text/plain"), missing))
    assert again.accepted, again.reason
    assert sorted(Artifact.objects.values_list("path", "size", "media_type")) == [
        ("notes.txt", len(NOTES), "text/plain"),
        ("out/report.html", len(REPORT), "text/html"),
    ]


def test_a_blob_of_another_workspace_cannot_be_named(leased: tuple[Any, Any], alice: Any) -> None:
    from scorecards.services import workspace_create

    runner, job = leased
    other = workspace_create(user=alice, slug="other", name="Other")
    blob_store(workspace=other, data=REPORT)
    ack = submit(runner, job, with_artifacts(ref("report.html", REPORT, "text/html")))
    assert not ack.accepted and names_missing_artifact(ack.reason)
    assert not CaseResultRow.objects.exists()


def test_a_size_that_is_not_the_blobs_is_refused(leased: tuple[Any, Any], workspace: Any) -> None:
    runner, job = leased
    blob_store(workspace=workspace, data=NOTES)
    lying = ref("notes.txt", NOTES, "text/plain").model_copy(update={"size": 3})
    ack = submit(runner, job, with_artifacts(lying))
    assert not ack.accepted and "says 3 bytes" in ack.reason
    assert not names_missing_artifact(ack.reason)


def test_one_refused_result_of_a_batch_leaves_the_others_accepted(
    alice: Any, workspace: Any
) -> None:
    from runnercli.protocol import ResultReport

    suite(alice, cases=2)
    runner = pair(alice)
    start(alice, runner, concurrency=2)
    grants = queue.job_lease(runner=runner, max_jobs=2)
    reports = [
        ResultReport(
            job_id=grants[0].job.pk,
            lease_epoch=grants[0].job.lease_epoch,
            result=with_artifacts(ref("r.html", REPORT, "text/html")),
        ),
        ResultReport(
            job_id=grants[1].job.pk,
            lease_epoch=grants[1].job.lease_epoch,
            result=completed("hello 1"),
        ),
    ]
    acks = results_submit(runner=runner, reports=reports)
    assert [a.accepted for a in acks] == [False, True]
    assert names_missing_artifact(acks[0].reason)
    assert list(CaseResultRow.objects.values_list("case__key", flat=True)) == ["c1"]


@pytest.fixture
def settled(leased: tuple[Any, Any], workspace: Any, charlie: Any) -> Any:
    runner, job = leased
    for data, media in ((REPORT, "text/html"), (NOTES, "text/plain"), (PNG, "image/png")):
        blob_store(workspace=workspace, data=data, media_type=media)
    result = with_artifacts(
        ref("out/report.html", REPORT, "text/html"),
        ref("notes.txt", NOTES, "text/plain"),
        ref("shot.png", PNG, "image/png"),
    )
    assert submit(runner, job, result).accepted
    return job.run_id


def test_the_case_lists_its_artifacts_with_their_download_urls(
    client: Client, alice: Any, settled: int
) -> None:
    case = api(client, alice).get(f"/api/runs/{settled}/cases/c0").json()
    [repeat] = case["runs"]
    listed = repeat["result"]["artifacts"]
    assert [a["path"] for a in listed] == ["notes.txt", "out/report.html", "shot.png"]
    notes = listed[0]
    assert notes == {
        "path": "notes.txt",
        "sha256": hashlib.sha256(NOTES).hexdigest(),
        "size": len(NOTES),
        "media_type": "text/plain",
        "url": f"/api/runs/{settled}/artifacts?key=c0&path=notes.txt",
    }
    assert client.get(notes["url"]).status_code == 200


def body(response: Any) -> bytes:
    return b"".join(response.streaming_content)


def test_html_is_downloaded_never_shown_and_text_and_images_are_shown_inline(
    client: Client, bob: Any, settled: int
) -> None:
    client = api(client, bob)
    html = client.get(f"/api/runs/{settled}/artifacts?key=c0&path=out/report.html")
    assert html.status_code == 200
    assert body(html) == REPORT
    assert html["Content-Type"] == "text/html"
    assert html["Content-Disposition"] == 'attachment; filename="report.html"'
    assert html["X-Content-Type-Options"] == "nosniff"
    assert html["Content-Security-Policy"] == "sandbox"
    assert html["Content-Length"] == str(len(REPORT))
    for path, data, media in (("notes.txt", NOTES, "text/plain"), ("shot.png", PNG, "image/png")):
        shown = client.get(f"/api/runs/{settled}/artifacts?key=c0&path={path}")
        assert body(shown) == data
        assert shown["Content-Type"] == media
        assert shown["Content-Disposition"].startswith("inline")


def test_a_viewer_reads_artifacts_and_an_outsider_is_told_they_do_not_exist(
    client: Client, charlie: Any, workspace: Any, settled: int
) -> None:
    url = f"/api/runs/{settled}/artifacts?key=c0&path=notes.txt"
    assert api(client, charlie).get(url).status_code == 404
    Membership.objects.create(workspace=workspace, user=charlie, role=Role.VIEWER)
    assert body(client.get(url)) == NOTES


@pytest.mark.parametrize(
    "path", ["../notes.txt", "out/../../x", "/etc/passwd", "C:/x", "C:notes", "a\x00b", ""]
)
def test_a_path_that_could_escape_is_a_400(
    client: Client, alice: Any, settled: int, path: str
) -> None:
    reply = api(client, alice).get(f"/api/runs/{settled}/artifacts?key=c0&path={quote(path)}")
    assert reply.status_code == 400, reply.content
    assert "path" in reply.json()


def test_an_unknown_artifact_or_case_is_a_404(client: Client, alice: Any, settled: int) -> None:
    client = api(client, alice)
    assert client.get(f"/api/runs/{settled}/artifacts?key=c0&path=nope.txt").status_code == 404
    assert client.get(f"/api/runs/{settled}/artifacts?key=c9&path=notes.txt").status_code == 404


def test_a_run_of_repeats_needs_the_repeat(client: Client, alice: Any, workspace: Any) -> None:
    suite(alice, cases=1)
    runner = pair(alice)
    run = start(alice, runner, repeats=2, concurrency=2)
    blob_store(workspace=workspace, data=NOTES)
    for grant in queue.job_lease(runner=runner, max_jobs=2):
        data = NOTES if grant.job.repeat == 1 else b""
        blob_store(workspace=workspace, data=data)
        assert submit(runner, grant.job, with_artifacts(ref("n.txt", data, "text/plain"))).accepted
    client = api(client, alice)
    url = f"/api/runs/{run.pk}/artifacts?key=c0&path=n.txt"
    assert "repeat" in client.get(url).json()
    assert body(client.get(url + "&repeat=1")) == NOTES
    assert body(client.get(url + "&repeat=0")) == b""
    assert client.get(url + "&repeat=2").status_code == 400


def test_the_case_page_links_each_artifact(client: Client, bob: Any, settled: int) -> None:
    client.force_login(bob)
    page = client.get(f"/runs/{settled}/cases/c0/").content.decode()
    assert 'data-testid="artifacts"' in page
    assert f'href="/api/runs/{settled}/artifacts?key=c0&amp;path=out%2Freport.html"' in page
    assert "shot.png" in page and "image/png" in page


def test_the_workspace_page_shows_the_storage_it_uses(
    client: Client, alice: Any, workspace: Any, settled: int
) -> None:
    client.force_login(alice)
    page = client.get("/w/acme/").content.decode()
    size = len(REPORT) + len(NOTES) + len(PNG)
    assert "django.core.files.storage.filesystem.FileSystemStorage" in page
    assert f"3 blobs · {size}\xa0bytes" in page
