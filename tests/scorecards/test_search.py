"""Search: a phrase inside one trace event of one case among 10,000 found and highlighted,
through the trigram index of each database; what was typed matched literally (`%`, `_`,
`-rf`, tsquery syntax); bad input a clear 400; an outsider finds nothing."""

from __future__ import annotations

from typing import Any

from bulk import seeded_run, traces_add
from django.db import connection
from django.test import Client

from accounts.services import api_key_create

CASES = 10_000
NEEDLE_CASE = 7345


def api(user: Any) -> Client:
    client = Client()
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {api_key_create(user=user).key}"
    return client


def event(case: int, n: int) -> dict[str, Any]:
    if case == NEEDLE_CASE:
        command = "cd /tmp && RM -RF build/ <script>"
        return {"kind": "tool_call", "name": "Bash", "input": {"command": command}}
    return {"kind": "message", "text": f"thinking about case {case}"}


def output(case: int, repeat: int) -> str:
    return {9998: "coverage 100% done", 2: "a_b and more", 3: "TypeError: x is None"}.get(
        case, f"answer {case}"
    )


def test_search_finds_one_trace_event_among_10000_cases_for_members_only(
    alice: Any, bob: Any, charlie: Any, workspace: Any
) -> None:
    run = seeded_run(alice, cases=CASES, output=output, attempts=True)
    traces_add(run, events=1, data=event)
    member = api(bob)

    found = member.get(f"/api/runs/{run.pk}/search", {"q": "rm -rf build"})
    assert found.status_code == 200, found.content
    reply = found.json()
    assert reply["method"] == "index" and reply["note"] == ""
    assert [m["case"] for m in reply["matches"]] == [f"c{NEEDLE_CASE}"]
    (hit,) = reply["matches"][0]["hits"]
    assert (hit["field"], hit["seq"], hit["kind"], hit["path"]) == (
        "trace",
        0,
        "tool_call",
        "input.command",
    )
    assert hit["snippet"] == "cd /tmp &amp;&amp; <mark>RM -RF build</mark>/ &lt;script&gt;"
    assert reply["next_page"] is None
    workspace_wide = member.get("/api/workspaces/acme/search", {"q": "RM -rf BUILD"}).json()
    assert [m["case"] for m in workspace_wide["matches"]] == [f"c{NEEDLE_CASE}"]

    # Typed text is literal: LIKE's wildcards, a leading dash, tsquery syntax.
    def cases(q: str) -> list[str]:
        answer = member.get(f"/api/runs/{run.pk}/search", {"q": q})
        assert answer.status_code == 200, answer.content
        return [m["case"] for m in answer.json()["matches"]]

    assert cases("100%") == ["c9998"]
    assert cases("a_b") == ["c2"]
    assert cases("-rf") == [f"c{NEEDLE_CASE}"]
    assert cases("typeerror: x") == ["c3"]
    assert cases("x & !y | z:*") == []
    assert cases("') OR 1=1 --") == []
    # Shorter than a trigram: a bounded scan, said so.
    short = member.get(f"/api/runs/{run.pk}/search", {"q": "%"}).json()
    assert short["method"] == "scan" and "shorter than 3 characters" in short["note"]
    assert [m["case"] for m in short["matches"]] == ["c9998"]
    # Pages: every case's trace holds "case"; two a page.
    first = member.get(f"/api/runs/{run.pk}/search", {"q": "about case", "limit": "2"}).json()
    assert [m["case"] for m in first["matches"]] == ["c0", "c1"] and first["next_page"] == 2
    second = member.get(
        f"/api/runs/{run.pk}/search", {"q": "about case", "limit": "2", "page": "2"}
    )
    assert [m["case"] for m in second.json()["matches"]] == ["c2", "c3"]

    # Bad input: a clear 400 naming the bound, never a 500.
    too_long = member.get(f"/api/runs/{run.pk}/search", {"q": "x" * 10_000})
    assert too_long.status_code == 400 and "At most 500 characters" in too_long.json()["q"][0]
    assert member.get(f"/api/runs/{run.pk}/search", {"q": "a\x00b"}).status_code == 400
    assert member.get(f"/api/runs/{run.pk}/search", {"q": " "}).status_code == 400
    assert member.get(f"/api/runs/{run.pk}/search", {"q": "x", "limit": "1000"}).status_code == 400
    assert member.get(f"/api/runs/{run.pk}/search", {"q": "x", "page": "٣"}).status_code == 400

    # An outsider: the run and the workspace do not exist for them.
    outsider = api(charlie)
    assert outsider.get(f"/api/runs/{run.pk}/search", {"q": "rm -rf"}).status_code == 404
    assert outsider.get("/api/workspaces/acme/search", {"q": "rm -rf"}).status_code == 404

    # The pages: the run's box leads to the matches, highlighted and escaped.
    browser = Client()
    browser.force_login(bob)
    assert 'id="run-search-form"' in browser.get(f"/runs/{run.pk}/").content.decode()
    page = browser.get("/w/acme/search?q=rm+-rf+build").content.decode()
    assert "<mark>RM -RF build</mark>/ &lt;script&gt;" in page and f"c{NEEDLE_CASE}" in page
    assert browser.get(f"/runs/{run.pk}/search", {"q": "y" * 600}).status_code == 400
    charlie_browser = Client()
    charlie_browser.force_login(charlie)
    assert charlie_browser.get("/w/acme/search?q=rm+-rf").status_code == 404
    assert charlie_browser.get(f"/runs/{run.pk}/search").status_code == 404
    assert connection.vendor in ("sqlite", "postgresql")
