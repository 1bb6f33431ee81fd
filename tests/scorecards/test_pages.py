"""Workspace pages: overview, catalog forms, the run form, the run page, compare, live socket."""

from __future__ import annotations

import re
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from runners import queue
from runners.models import JobStatus
from runners.presence import runner_touch
from scorecards.models import HarnessVersion, Membership, Role, Run, RunStatus, Workspace
from scorecards.services import result_submit
from tests.suites import ECHO_SPEC, completed, pair, start, suite

pytestmark = pytest.mark.django_db


def logged_in(client: Client, user: Any) -> Client:
    client.force_login(user)
    return client


def settle(runner: Any, output: str) -> None:
    """Lease the runner's next job and report `output` for it."""
    grant = queue.job_lease(runner=runner)[0]
    result_submit(
        runner=runner,
        job_id=grant.job.pk,
        lease_epoch=grant.job.lease_epoch,
        result=completed(output),
    )


@pytest.fixture
def laptop(alice: Any, workspace: Any) -> Any:
    suite(alice)
    return pair(alice, "laptop")


# ---------------------------------------------------------------- access


@pytest.mark.parametrize(
    "path",
    [
        "/w/acme/",
        "/w/acme/harnesses/",
        "/w/acme/datasets/",
        "/w/acme/runs/",
        "/w/acme/runs/new",
        "/w/acme/compare",
    ],
)
def test_an_outsider_gets_404_on_every_workspace_page(
    client: Client, charlie: Any, laptop: Any, path: str
) -> None:
    assert logged_in(client, charlie).get(path).status_code == 404


def test_an_outsider_gets_404_on_a_run_page(
    client: Client, alice: Any, charlie: Any, laptop: Any
) -> None:
    run = start(alice, laptop)
    logged_in(client, charlie)

    assert client.get(f"/runs/{run.pk}/").status_code == 404
    assert client.post(f"/runs/{run.pk}/cancel").status_code == 404
    assert Run.objects.get(pk=run.pk).status == RunStatus.QUEUED


def test_workspace_pages_need_a_login(client: Client, workspace: Any) -> None:
    reply = client.get("/w/acme/")

    assert reply.status_code == 302
    assert reply["Location"].startswith("/login/")


# ---------------------------------------------------------------- overview


def test_the_overview_lists_harnesses_datasets_and_recent_runs_with_pass_rate(
    client: Client, alice: Any, laptop: Any
) -> None:
    run = start(alice, laptop)
    settle(laptop, "hello 0")

    page = logged_in(client, alice).get("/w/acme/").content.decode()

    assert "echo" in page and "v1" in page
    assert f'href="/runs/{run.pk}/"' in page
    assert "100%" in page and "1/3" in page
    assert "laptop" in page and "alice" in page
    assert 'href="/w/acme/runs/new"' in page


# ---------------------------------------------------------------- catalog


def test_an_admin_creates_a_harness_version_from_the_page(
    client: Client, alice: Any, laptop: Any
) -> None:
    spec = '{"command": ["python", "-c", "print(1)"], "capabilities": ["python"]}'

    reply = logged_in(client, alice).post(
        "/w/acme/harnesses/", {"name": "echo", "spec": spec}, follow=True
    )

    page = reply.content.decode()
    assert reply.status_code == 200
    assert "Harness echo v2 created." in page
    assert "2 versions" in page
    assert HarnessVersion.objects.filter(name="echo", version=2).exists()


def test_a_bad_harness_spec_is_shown_on_the_form(client: Client, alice: Any, laptop: Any) -> None:
    logged_in(client, alice)

    not_json = client.post("/w/acme/harnesses/", {"name": "x", "spec": "{nope"})
    shell = client.post("/w/acme/harnesses/", {"name": "x", "spec": '{"command": "ls -l"}'})
    bad_name = client.post(
        "/w/acme/harnesses/", {"name": "no spaces", "spec": '{"command": ["a"]}'}
    )

    assert not_json.status_code == 400 and "Not valid JSON" in not_json.content.decode()
    assert shell.status_code == 400 and "must be an argv list" in shell.content.decode()
    assert bad_name.status_code == 400 and "A name is 1-100 characters" in bad_name.content.decode()
    assert not HarnessVersion.objects.filter(name="x").exists()


def test_a_member_sees_the_catalog_but_cannot_change_it(
    client: Client, bob: Any, laptop: Any
) -> None:
    logged_in(client, bob)

    page = client.get("/w/acme/harnesses/").content.decode()
    refused = client.post("/w/acme/harnesses/", {"name": "echo", "spec": '{"command": ["a"]}'})

    assert "echo" in page and "Save harness" not in page
    assert refused.status_code == 403
    assert HarnessVersion.objects.filter(name="echo").count() == 1


def test_an_admin_imports_a_dataset_from_pasted_jsonl(
    client: Client, alice: Any, workspace: Any
) -> None:
    jsonl = '{"key": "a", "input": {"x": 1}, "expected": "1"}\n\n{"key": "b", "expected": "2"}\n'

    reply = logged_in(client, alice).post(
        "/w/acme/datasets/", {"name": "small", "jsonl": jsonl}, follow=True
    )

    assert "Dataset small v1 imported: 2 cases." in reply.content.decode()


def test_an_admin_imports_a_dataset_from_a_jsonl_file(
    client: Client, alice: Any, workspace: Any
) -> None:
    upload = SimpleUploadedFile("cases.jsonl", b'{"key": "a", "expected": "1"}\n')

    reply = logged_in(client, alice).post(
        "/w/acme/datasets/", {"name": "filed", "file": upload}, follow=True
    )

    assert "Dataset filed v1 imported: 1 cases." in reply.content.decode()


def test_bad_jsonl_lines_are_named_on_the_form(client: Client, alice: Any, workspace: Any) -> None:
    jsonl = '{"key": "a"}\nnot json\n[1, 2]\n{"key": "a"}\n'
    logged_in(client, alice)

    broken = client.post("/w/acme/datasets/", {"name": "bad", "jsonl": jsonl})
    empty = client.post("/w/acme/datasets/", {"name": "bad", "jsonl": "  "})

    page = broken.content.decode()
    assert broken.status_code == 400
    assert "line 2: not valid JSON" in page and "line 3: must be a JSON object" in page
    assert (
        empty.status_code == 400 and "Paste the cases or choose a file." in empty.content.decode()
    )


# ---------------------------------------------------------------- run form


def _options(page: str, name: str) -> dict[str, str]:
    """The `<option>` tags of a select, by value."""
    select = re.search(rf'<select name="{name}".*?</select>', page, re.S)
    assert select is not None
    return {
        m.group(1): m.group(0)
        for m in re.finditer(r'<option value="([^"]*)".*?</option>', select.group(0), re.S)
    }


def test_the_run_form_lists_only_my_runners_as_my_local_host_with_their_state(
    client: Client, alice: Any, bob: Any, laptop: Any
) -> None:
    desk = pair(alice, "desk")
    runner_touch(runner=desk, status="idle")
    bobs = pair(bob, "bobs-box")

    options = _options(logged_in(client, alice).get("/w/acme/runs/new").content.decode(), "runtime")

    assert "My local host — laptop · offline" in options[f"self:{laptop.pk}"]
    assert "My local host — desk · online" in options[f"self:{desk.pk}"]
    assert "Any of my runners" in options["self:any"]
    assert f"self:{bobs.pk}" not in options
    # An online capable runner is chosen for you.
    assert "selected" in options[f"self:{desk.pk}"]


def test_runners_lacking_the_harness_capabilities_are_greyed_out(
    client: Client, alice: Any, laptop: Any
) -> None:
    suite(alice, spec={**ECHO_SPEC, "capabilities": ["claude"]}, name="smart")
    clauded = pair(alice, "clauded", capabilities=["python", "claude"])
    logged_in(client, alice)

    smart = _options(client.get("/w/acme/runs/new?harness=smart").content.decode(), "runtime")
    echo = _options(client.get("/w/acme/runs/new?harness=echo").content.decode(), "runtime")

    assert "disabled" in smart[f"self:{laptop.pk}"] and "lacks claude" in smart[f"self:{laptop.pk}"]
    assert "disabled" not in smart[f"self:{clauded.pk}"]
    assert 'data-capabilities="python"' in smart[f"self:{laptop.pk}"]
    assert "disabled" not in echo[f"self:{laptop.pk}"]


def test_submitting_the_run_form_starts_a_run_and_opens_its_page(
    client: Client, alice: Any, laptop: Any
) -> None:
    reply = logged_in(client, alice).post(
        "/w/acme/runs/new",
        {"harness": "echo", "dataset": "echo@1", "runtime": f"self:{laptop.pk}", "concurrency": 2},
    )

    run = Run.objects.get()
    assert reply.status_code == 302 and reply["Location"] == f"/runs/{run.pk}/"
    assert (run.runner, run.concurrency, run.dataset.version) == (laptop, 2, 1)


def test_the_run_form_shows_the_services_refusals(
    client: Client, alice: Any, bob: Any, laptop: Any
) -> None:
    logged_in(client, bob)
    pair(bob, "bobs")
    form = {"harness": "echo", "dataset": "echo", "concurrency": 1}

    someone_elses = client.post("/w/acme/runs/new", form | {"runtime": f"self:{laptop.pk}"})
    Workspace.objects.filter(slug="acme").update(run_quota=0)
    over_quota = client.post("/w/acme/runs/new", form | {"runtime": "self:any"})
    bad_concurrency = client.post(
        "/w/acme/runs/new", form | {"runtime": "self:any", "concurrency": 0}
    )

    assert someone_elses.status_code == 404
    assert f"Runner {laptop.pk} not found among your runners." in someone_elses.content.decode()
    assert over_quota.status_code == 429 and "run quota" in over_quota.content.decode()
    assert bad_concurrency.status_code == 400
    assert not Run.objects.exists()


def test_a_viewer_cannot_start_a_run(client: Client, bob: Any, laptop: Any) -> None:
    Membership.objects.filter(user=bob).update(role=Role.VIEWER)
    pair(bob, "bobs")
    logged_in(client, bob)

    page = client.get("/w/acme/runs/new").content.decode()
    refused = client.post(
        "/w/acme/runs/new",
        {"harness": "echo", "dataset": "echo", "runtime": "self:any", "concurrency": 1},
    )

    assert "Viewers cannot start runs" in page
    assert refused.status_code == 403
    assert not Run.objects.exists()


# ---------------------------------------------------------------- run page


def test_the_run_page_shows_the_offline_runner_event_at_once(
    client: Client, alice: Any, laptop: Any
) -> None:
    run = start(alice, laptop)

    page = logged_in(client, alice).get(f"/runs/{run.pk}/").content.decode()

    assert "Runner laptop is offline — start it with <code>" not in page  # escaped, not markup
    assert "Runner laptop is offline — start it with `python -m runnercli run`" in page
    assert 'class="warning"' in page
    assert "0/3" in page


def test_the_run_page_shows_results_with_provenance_logs_and_cost(
    client: Client, alice: Any, laptop: Any
) -> None:
    run = start(alice, laptop, concurrency=3)
    grant = queue.job_lease(runner=laptop)[0]
    queue.job_report_log(
        runner=laptop, job_id=grant.job.pk, lease_epoch=grant.job.lease_epoch, lines=["<b>hi</b>"]
    )
    result_submit(
        runner=laptop,
        job_id=grant.job.pk,
        lease_epoch=grant.job.lease_epoch,
        result=completed("hello 0"),
    )
    settle(laptop, "wrong")

    page = logged_in(client, alice).get(f"/runs/{run.pk}/").content.decode()

    assert "self-hosted · laptop · alice" in page
    assert 'class="verdict v-pass"' in page and 'class="verdict v-fail"' in page
    assert "2/3" in page and "50%" in page
    assert "&lt;b&gt;hi&lt;/b&gt;" in page
    assert "not billed to the workspace budget" in page
    assert '"socket": "/ws/runs/' in page


def test_only_the_submitter_or_an_admin_may_cancel_from_the_run_page(
    client: Client, alice: Any, bob: Any, laptop: Any
) -> None:
    run = start(alice, laptop)
    logged_in(client, bob)

    bob_sees = client.get(f"/runs/{run.pk}/").content.decode()
    bob_tries = client.post(f"/runs/{run.pk}/cancel", follow=True)
    logged_in(client, alice)
    alice_sees = client.get(f"/runs/{run.pk}/").content.decode()
    alice_cancels = client.post(f"/runs/{run.pk}/cancel", follow=True)

    assert "Cancel run" not in bob_sees
    assert "Only the run&#x27;s submitter or a workspace admin" in bob_tries.content.decode()
    assert "Cancel run" in alice_sees
    assert f"Run {run.pk} is canceled." in alice_cancels.content.decode()
    assert "Cancel run" not in alice_cancels.content.decode()
    assert not run.jobs.exclude(status=JobStatus.CANCELED).exists()


# ---------------------------------------------------------------- compare


def test_compare_shows_per_case_changes_marked_unmanaged(
    client: Client, alice: Any, laptop: Any
) -> None:
    before = start(alice, laptop, concurrency=3)
    for output in ("hello 0", "nope", "hello 2"):
        settle(laptop, output)
    after = start(alice, laptop, concurrency=3)
    for output in ("nope", "hello 1", "hello 2"):
        settle(laptop, output)

    page = logged_in(client, alice).get(f"/w/acme/compare?a={before.pk}&b={after.pk}")

    text = page.content.decode()
    assert page.status_code == 200
    assert re.search(r'data-case="c0" data-change="regressed"', text)
    assert re.search(r'data-case="c1" data-change="fixed"', text)
    assert re.search(r'data-case="c2" data-change="unchanged"', text)
    assert "1 regressed" in text and "1 fixed" in text
    assert text.count("unmanaged host</span>") == 6


def test_compare_refuses_runs_of_different_datasets_or_workspaces(
    client: Client, alice: Any, laptop: Any
) -> None:
    suite(alice, name="other")
    a = start(alice, laptop)
    b = start(alice, laptop, harness="other", dataset="other")
    logged_in(client, alice)

    different = client.get(f"/w/acme/compare?a={a.pk}&b={b.pk}")
    missing = client.get(f"/w/acme/compare?a={a.pk}&b=999999")

    assert different.status_code == 400
    assert "compare two runs of the same dataset" in different.content.decode()
    assert missing.status_code == 404


# ---------------------------------------------------------------- live socket


def _socket(client: Client, run_id: int, after: int = 0) -> WebsocketCommunicator:
    from everdict.asgi import application

    cookie = "; ".join(f"{k}={v.value}" for k, v in client.cookies.items())
    return WebsocketCommunicator(
        application,
        f"/ws/runs/{run_id}/?after={after}",
        headers=[
            (b"cookie", cookie.encode()),
            (b"origin", b"http://127.0.0.1"),
            (b"host", b"127.0.0.1"),
        ],
    )


@pytest.mark.django_db(transaction=True)
def test_the_run_socket_refuses_anonymous_visitors_and_outsiders(
    client: Client, alice: Any, charlie: Any, laptop: Any
) -> None:
    run = start(alice, laptop)

    async def connects(socket: WebsocketCommunicator) -> bool:
        connected, _ = await socket.connect()
        await socket.disconnect()
        return connected

    assert not async_to_sync(connects)(_socket(client, run.pk))
    assert not async_to_sync(connects)(_socket(logged_in(client, charlie), run.pk))
    assert async_to_sync(connects)(_socket(logged_in(client, alice), run.pk))


@pytest.mark.django_db(transaction=True)
def test_the_run_socket_pushes_new_log_lines_and_verdicts(
    client: Client, alice: Any, laptop: Any
) -> None:
    run = start(alice, laptop, concurrency=3)
    socket = _socket(logged_in(client, alice), run.pk)

    async def follow() -> list[dict[str, Any]]:
        connected, _ = await socket.connect()
        assert connected
        first = await socket.receive_json_from(timeout=5)
        grant = await _in_thread(lambda: queue.job_lease(runner=laptop)[0])
        await _in_thread(
            lambda: queue.job_report_log(
                runner=laptop,
                job_id=grant.job.pk,
                lease_epoch=grant.job.lease_epoch,
                lines=["one", "two"],
            )
        )
        messages = [first]
        while not any(m["type"] == "logs" for m in messages):
            messages.append(await socket.receive_json_from(timeout=5))
        await _in_thread(
            lambda: result_submit(
                runner=laptop,
                job_id=grant.job.pk,
                lease_epoch=grant.job.lease_epoch,
                result=completed("hello 0"),
            )
        )
        while not any(m["type"] == "results" for m in messages):
            messages.append(await socket.receive_json_from(timeout=5))
        while not (messages[-1]["type"] == "run" and messages[-1]["run"]["summary"]["pass"]):
            messages.append(await socket.receive_json_from(timeout=5))
        await socket.disconnect()
        return messages

    messages = async_to_sync(follow)()

    assert messages[0]["type"] == "run" and messages[0]["run"]["status"] == "queued"
    logs = next(m for m in messages if m["type"] == "logs")
    assert [(line["case"], line["line"]) for line in logs["lines"]] == [
        ("c0", "one"),
        ("c0", "two"),
    ]
    # Only what changed travels: the one new result, then the run's new summary.
    [results] = [m for m in messages if m["type"] == "results"]
    assert [(r["case"], r["verdict"]) for r in results["results"]] == [("c0", "pass")]
    assert results["results"][0]["provenance"]["by"] == "alice"
    assert messages[-1]["run"]["summary"]["pass"] == 1


async def _in_thread(work: Any) -> Any:
    """Run ORM work from the test's event loop (on the main thread, like the consumer's)."""
    from asgiref.sync import sync_to_async

    return await sync_to_async(work)()
