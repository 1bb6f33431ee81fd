"""Reading a case's trace and screens: the REST API in pages by seq, the filmstrip and its
frames, the live frame and the running cases of a run, and MCP's `get_case_trace` — for
members of the run's workspace (viewers included), and nobody else."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import pytest
from django.core.cache import cache
from django.test import Client

from accounts.services import api_key_create
from runners import queue
from runners.services import runner_hello
from scorecards.models import Membership, Role
from scorecards.services import dataset_create, harness_create, result_submit
from scorecards.traces.screens import screen_report
from scorecards.traces.services import trace_report
from tests.runnercli.images import png
from tests.suites import ECHO_SPEC, completed, pair, start
from tests.traces.test_trace_services import event, events

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("blob_dir")]

KEY = "dir/case 1?"


@pytest.fixture
def traced(alice: Any, workspace: Any) -> dict[str, Any]:
    """A case (its key with a slash, a space and a question mark) with a trace of 450 events,
    two frames, still running."""
    cache.clear()
    harness_create(user=alice, workspace_slug="acme", name="echo", spec=ECHO_SPEC)
    dataset_create(
        user=alice,
        workspace_slug="acme",
        name="echo",
        cases=[{"key": KEY, "input": {"text": "hi"}, "expected": "hi"}],
    )
    laptop = pair(alice, "laptop")
    run = start(alice, None)
    (grant,) = queue.job_lease(runner=laptop)
    fence = {"runner": laptop, "job_id": grant.job.pk, "lease_epoch": grant.job.lease_epoch}
    for first in range(0, 450, 150):
        trace_report(**fence, events=events(first, first + 149))
    call = event(450, "tool_call", "Bash", id="t1", input={"command": "npm test"})
    trace_report(**fence, events=[call])
    for n in range(2):
        screen_report(**fence, media_type="image/png", data=png(rgb=(n, 0, 0)), taken_at=n)
    return {"run": run, "fence": fence}


def api(client: Client, user: Any) -> Client:
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {api_key_create(user=user).key}"
    return client


def test_the_trace_is_read_in_pages_by_seq(client: Client, alice: Any, traced: Any) -> None:
    run_id, key = traced["run"].pk, quote(KEY)
    api(client, alice)
    first = client.get(f"/api/runs/{run_id}/trace?key={key}").json()
    assert [e["seq"] for e in first["events"]] == list(range(200))
    assert first["next_after_seq"] == 199
    assert (first["kept"], first["dropped"], first["last_seq"], first["running"]) == (
        451,
        0,
        450,
        True,
    )
    assert first["step"]["label"] == "Bash `npm test`" and first["step"]["open"] is True
    assert first["step"]["text"].startswith("Bash `npm test` · ")
    assert first["totals"]["tool_calls"] == 1
    assert first["events"][0]["data"] == {"text": "step 0"}
    rest = client.get(f"/api/runs/{run_id}/trace?key={key}&after_seq=199&limit=1000").json()
    assert [e["seq"] for e in rest["events"]] == list(range(200, 451))
    assert rest["next_after_seq"] is None
    assert client.get(f"/api/runs/{run_id}/trace?key={key}&limit=0").status_code == 400
    assert client.get(f"/api/runs/{run_id}/trace?key={key}&after_seq=x").status_code == 400
    assert client.get(f"/api/runs/{run_id}/trace?key=nope").status_code == 404


def test_the_filmstrip_its_frames_and_the_live_one(client: Client, alice: Any, traced: Any) -> None:
    run_id, key = traced["run"].pk, quote(KEY)
    api(client, alice)
    screens = client.get(f"/api/runs/{run_id}/screens?key={key}").json()
    assert [f["n"] for f in screens["frames"]] == [0, 1]
    assert screens["frames"][0]["trace_seq"] == 450
    assert screens["live"]["n"] == 1
    frame = client.get(screens["frames"][0]["url"])
    assert frame.status_code == 200 and frame["Content-Type"] == "image/png"
    assert frame.content == png(rgb=(0, 0, 0))
    live = client.get(screens["live"]["url"])
    assert live.content == png(rgb=(1, 0, 0)) and live["Cache-Control"] == "no-store"
    assert client.get(f"/api/runs/{run_id}/screens/7?key={key}").status_code == 404
    running = client.get(f"/api/runs/{run_id}/running").json()["cases"]
    assert [(c["case"], c["step"]["label"], c["frame"]["n"]) for c in running] == [
        (KEY, "Bash `npm test`", 1)
    ]
    # Once the case is over: no live frame, no running case; the filmstrip stays.
    assert result_submit(**traced["fence"], result=completed("hi")).accepted
    assert client.get(f"/api/runs/{run_id}/screens?key={key}").json()["live"] is None
    assert client.get(f"/api/runs/{run_id}/screens/live?key={key}").status_code == 404
    assert client.get(f"/api/runs/{run_id}/running").json() == {"cases": []}
    assert client.get(screens["frames"][1]["url"]).status_code == 200


def test_a_viewer_reads_it_and_an_outsider_is_told_nothing_exists(
    client: Client, charlie: Any, workspace: Any, traced: Any
) -> None:
    run_id, key = traced["run"].pk, quote(KEY)
    urls = [
        f"/api/runs/{run_id}/trace?key={key}",
        f"/api/runs/{run_id}/screens?key={key}",
        f"/api/runs/{run_id}/screens/0?key={key}",
        f"/api/runs/{run_id}/screens/live?key={key}",
        f"/api/runs/{run_id}/running",
    ]
    api(client, charlie)
    assert [client.get(url).status_code for url in urls] == [404] * 5
    Membership.objects.create(workspace=workspace, user=charlie, role=Role.VIEWER)
    assert [client.get(url).status_code for url in urls] == [200] * 5


def test_events_the_parser_did_not_know_are_counted_and_named_with_its_version(
    client: Client, alice: Any, workspace: Any
) -> None:
    spec = {
        "command": ["claude", "-p", "{input.text}", "--output-format", "stream-json", "--verbose"],
        "output": "claude-stream-json",
        "capabilities": ["claude"],
        "grader": {"type": "contains"},
    }
    harness_create(user=alice, workspace_slug="acme", name="echo", spec=spec)
    cases = [{"key": "c1", "input": {"text": "hi"}, "expected": "hi"}]
    dataset_create(user=alice, workspace_slug="acme", name="echo", cases=cases)
    laptop = pair(alice, "laptop", ["claude"])
    runner_hello(runner=laptop, protocol=4, capabilities=["claude"], features=["trace"])
    run = start(alice, None)
    (grant,) = queue.job_lease(runner=laptop)
    fence = {"runner": laptop, "job_id": grant.job.pk, "lease_epoch": grant.job.lease_epoch}
    unknown = [event(n, "raw", "hook_progress", event={"type": "hook_progress"}) for n in (1, 2, 4)]
    said = [event(0, text="hi"), event(3, text="hi again")]
    trace_report(**fence, events=sorted([*said, *unknown], key=lambda e: e.seq))
    api(client, alice)
    url = f"/api/runs/{run.pk}/trace?key=c1"
    running = client.get(url).json()
    # Before the result, the parser is known by its output; its version comes with the result.
    assert (running["totals"]["raw"], running["parser"]) == (3, "claude")
    result = completed("hi")
    result.fingerprint.tools = {"claude": "2.1.197"}
    result_submit(**fence, result=result)
    done = client.get(url).json()
    assert (done["totals"]["raw"], done["parser"]) == (3, "claude 2.1.197")

    client.force_login(alice)
    page = client.get(f"/runs/{run.pk}/cases/c1/").content.decode()
    assert "3 events this parser does not know (claude 2.1.197)" in page
