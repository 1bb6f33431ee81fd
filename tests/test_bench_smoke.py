"""The benchmarks run: a tiny pass of each script, so they cannot rot (those that drive
chromium or a Docker daemon are marked so: CI requires them).

Each script creates, migrates and drops a scratch database of its own, of the same kind
as the test run's (PostgreSQL when DATABASE_URL names it, else a SQLite file).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

ROOT = Path(__file__).resolve().parent.parent

# Each benchmark runs on a scratch database of the test run's engine: both passes run them.
pytestmark = pytest.mark.engine


def bench(script: str, args: list[str], tmp_path: Path) -> dict[str, Any]:
    suffix = os.environ.get("EVERDICT_TEST_DB_SUFFIX", "")
    summary = tmp_path / f"{script}.json"
    command = [
        sys.executable,
        str(ROOT / "bench" / f"{script}.py"),
        *args,
        "--db-name",
        f"everdict_bench_smoke{suffix}_{script}",
        "--summary-json",
        str(summary),
    ]
    database = settings.DATABASES["default"]
    if database["ENGINE"].endswith("postgresql"):
        host = database.get("HOST") or "127.0.0.1"
        port = database.get("PORT") or 5432
        user = database.get("USER") or "postgres"
        password = f":{database['PASSWORD']}" if database.get("PASSWORD") else ""
        command += ["--postgres", f"postgres://{user}{password}@{host}:{port}/postgres"]
    else:
        command.append("--sqlite")
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    done = subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return {"stdout": done.stdout, **json.loads(summary.read_text())}


@pytest.mark.timeout(120)
def test_the_queue_depth_benchmark_measures_claims_and_shows_the_plan(tmp_path: Path) -> None:
    result = bench(
        "queue_depth", ["--levels", "50,500", "--claims", "5", "--owners", "5"], tmp_path
    )
    figures = [row["figure"] for row in result["rows"]]
    assert figures == [
        "job_lease p50 @ 50",
        "claim SQL p50 @ 50",
        "job_lease p50 @ 500",
        "claim SQL p50 @ 500",
    ]
    # The plan is printed for every depth, and the claim reads the partial claim index.
    assert result["stdout"].count("plan of the claim statement") == 2
    assert "runnerjob_claim" in result["stdout"]


@pytest.mark.timeout(120)
def test_the_dispatch_benchmark_times_run_start_beside_a_raw_write(tmp_path: Path) -> None:
    result = bench("dispatch", ["--cases", "200", "--repeat", "2"], tmp_path)
    (row,) = result["rows"]
    assert row["figure"] == "run_start, 200 cases (median)"
    assert row["value"].endswith(" s")
    assert "raw" in row["baseline"]
    assert row["met"] is True


@pytest.mark.timeout(120)
def test_the_grading_benchmark_grades_a_pathological_pattern_beside_backtracking(
    tmp_path: Path,
) -> None:
    args = ["--results", "3", "--calls", "10", "--regrade-results", "40"]
    result = bench("grading", args, tmp_path)
    figures = [row["figure"] for row in result["rows"]]
    assert figures == [
        "regex ^(a+)+$ vs 34 a's + '!'",
        "regex .*error.*timeout over 1 MiB",
        "regrade of 40 stored results (regex grader)",
        "another member's API call p50 / p99 while graded",
    ]
    assert "backtracking re" in result["rows"][0]["baseline"]
    regrade = result["rows"][2]
    assert regrade["value"].endswith(" s") and "in memory" in regrade["baseline"]
    assert regrade["target"] == "<= 0.2 s"


def test_the_run_page_benchmark_sets_a_small_run_beside_a_large_one(tmp_path: Path) -> None:
    result = bench("run_page", ["--sizes", "20,400", "--repeat", "2"], tmp_path)
    figures = [row["figure"] for row in result["rows"]]
    assert figures[:3] == [
        "run page GET, 400 cases (beside 20)",
        "GET /api/runs/<id>, 400 cases (beside 20)",
        "WebSocket update, 1 new result, 400 cases (beside 20)",
    ]
    # The live update carries the new result, not the run: its size does not grow.
    assert result["rows"][2]["met"] is True
    assert "whole run" in result["rows"][4]["baseline"]


@pytest.mark.timeout(120)
def test_the_runner_overhead_benchmark_runs_the_real_cli_beside_bare_spawns(
    tmp_path: Path,
) -> None:
    result = bench("runner_overhead", ["--cases", "40"], tmp_path)
    row, unused = result["rows"]
    assert row["figure"] == "runner CLI, 40 echo cases, 8 at once"
    assert row["value"].endswith(" cases/s")
    assert "bare asyncio spawns" in row["baseline"]
    assert row["ratio"].endswith("%")
    # The costliest stage the case does not use, beside a bare spawn's time in its slot.
    assert unused["figure"] == "the costliest stage an echo case does not use, wall a case"
    assert unused["value"].split()[0] in ("agent-config", "artifacts", "files", "screens", "trace")
    assert unused["value"].endswith(" ms")
    assert unused["baseline"].startswith("a bare spawn in its slot ")
    assert unused["ratio"].endswith("%") and unused["target"] == "<= 5%"
    # Calls and CPU per case are counted on the server and on the runner.
    note, ceiling, occupancy, threads = result["notes"]
    assert "MCP calls per case" in note
    assert "runner" in note and "server" in note
    # Each stage's time per case, clocked by the runner.
    assert "wall ms per case by stage: " in note
    assert all(f" {stage} " in note for stage in ("files", "trace", "screens", "execute"))
    # How busy the machine was, and the most its cores allow at what a case costs in all.
    assert "busy on its" in ceiling and "cores fully used allow at most" in ceiling
    # How long a case held its slot, and how many of the 8 slots ran a case on average.
    held = re.search(r"held its slot ([\d.]+) ms: on average ([\d.]+) of the 8 slots", occupancy)
    assert held is not None, occupancy
    assert float(held[1]) > 0 and 0 < float(held[2]) <= 8
    # How the runner's and the server's main threads spent the run (Linux's scheduler
    # statistics): on a core, waiting for one, idle. Differences over the run, not the
    # threads' totals since they started: on a core and waiting together at most the run,
    # within the counters' tick; the runner's thread, which runs every case, on a core.
    spent = re.findall(
        r"the (runner|server)'s main thread ran (\d+)% of the run and waited for a core"
        r" (\d+)% more \(idle (\d+)%\)",
        threads,
    )
    assert [name for name, *_ in spent] == ["runner", "server"], threads
    assert all(int(ran) + int(waited) <= 110 for _, ran, waited, _ in spent), threads
    assert int(spent[0][1]) > 0, threads


@pytest.mark.timeout(120)
def test_the_request_latency_benchmark_sets_api_calls_beside_healthz(tmp_path: Path) -> None:
    result = bench("request_latency", ["--requests", "20", "--warmup", "3"], tmp_path)
    figures = [row["figure"] for row in result["rows"]]
    assert figures == [
        "GET /api/runners (2 rows) p50 / p90 / p99",
        "POST /api/workspaces/<slug>/runs (1 case) p50 / p90 / p99",
    ]
    assert all(row["baseline"].startswith("GET /healthz ") for row in result["rows"])
    # Each figure is told with its SQL statements, counted in process.
    assert sum("SQL statements" in note for note in result["notes"]) == 2


def test_the_settle_benchmark_sets_converting_once_beside_psycopgs_own(tmp_path: Path) -> None:
    result = bench("settle", ["--rounds", "2", "--per-round", "3", "--warmup", "2"], tmp_path)
    if settings.DATABASES["default"]["ENGINE"].endswith("postgresql"):
        [row] = result["rows"]
        assert row["figure"] == "a result settled in a batch of 8 p50 / p90"
        assert row["baseline"].startswith("each statement converted by psycopg ")
    else:
        assert result["rows"] == []
        assert result["notes"] == ["PostgreSQL only: SQLite's statements are not converted"]


def test_the_idle_runners_benchmark_parks_runners_in_the_window_hello_offers(
    tmp_path: Path,
) -> None:
    args = ["--n", "40", "--window", "3", "--base-window", "2", "--settle", "1"]
    # On SQLite a job dispatched by the benchmark's own process wakes the server's parked
    # polls through its periodic re-check alone: shortened here.
    args += ["--wake-jobs", "3", "--client-procs", "2", "--recheck-s", "0.2"]
    args += ["--hello-calls", "30"]
    result = bench("idle_runners", args, tmp_path)
    figures = [row["figure"] for row in result["rows"]]
    assert figures[:2] == [
        "RSS, 40 idle (projected 10,000)",
        "server CPU, 40 idle (projected 10,000)",
    ]
    assert figures[-1] == "wake p50 / p99, 40 idle"
    assert "long-poll window 55 s (offered in hello); 40 long-polls parked" in result["stdout"]
    assert "client errors none" in result["stdout"]


@pytest.mark.browser
@pytest.mark.timeout(120)
def test_the_trace_screens_benchmark_sets_frames_and_events_beside_a_hello(
    tmp_path: Path,
) -> None:
    args = ["--cases", "2", "--seconds", "2", "--phase-seconds", "1", "--hellos", "10"]
    args += ["--events", "300", "--page-repeat", "1"]
    result = bench("trace_screens", args, tmp_path)
    figures = [row["figure"] for row in result["rows"]]
    assert figures[:3] == [
        "server CPU per frame",
        "server CPU per event",
        "2 cases, 1 frame/s + 10 events/s each: server CPU",
    ]
    assert all(row["baseline"].startswith("hello ") for row in result["rows"][:2])
    assert all(row["value"].endswith(" ms") for row in result["rows"][:2])
    # Every call under the load was taken.
    calls = [note for note in result["notes"] if "under the load" in note]
    assert len(calls) == 2 and all(", 0 failed" in note for note in calls), calls
    # The case page is measured in Debian's chromium (the test is marked `browser`).
    [page] = [row for row in result["rows"] if row["figure"].startswith("case page")]
    assert page["figure"] == "case page of a 300-event trace: first timeline row"
    assert "KiB" in page["value"] and page["baseline"].startswith("10-event trace")


@pytest.mark.timeout(120)
def test_the_artifacts_benchmark_uploads_beside_a_plain_put(tmp_path: Path) -> None:
    args = ["--blobs", "2", "--mib", "0.25", "--rounds", "2", "--rss-mib", "1"]
    result = bench("artifacts", args, tmp_path)
    row, rss = result["rows"]
    assert row["figure"] == "artifact upload, 2 x 0.25 MiB (median of 2)"
    assert row["value"].endswith(" MiB/s")
    assert row["baseline"].startswith("plain HTTP PUT ")
    assert row["ratio"].endswith("%") and row["target"] == ">= 80%"
    assert rss["figure"].startswith("server RSS while receiving a 1 MiB artifact")
    assert rss["ratio"].endswith(" chunks") and rss["target"] == "<= 2 chunks"
    stored, took, inline, cpu, chunks = result["notes"]
    assert stored.startswith("the plain PUT keeps nothing: with the same bytes also written")
    assert took.startswith("the 1 MiB artifact took ")
    assert inline.startswith("without raw_upload (put_blob, 1 MiB base64 chunks): ")
    assert cpu.startswith("CPU per MiB uploaded by PUT: server ")
    # A quarter MiB is one chunk; sent again, the held blobs cost no chunk at all.
    assert chunks.startswith("1.0 chunks per blob") and chunks.endswith("0 chunks sent")


@pytest.mark.docker
@pytest.mark.timeout(120)
def test_the_services_benchmark_times_a_warm_topology_beside_no_services(tmp_path: Path) -> None:
    result = bench("services", ["--cases", "5", "--repeat", "1"], tmp_path)
    warm, burst, cold = result["rows"]
    assert warm["figure"] == "case start with a warm container topology, added (median of 5)"
    assert warm["value"].endswith(" ms") and warm["target"] == "<= 50 ms"
    assert burst["figure"] == "3 topologies at once, one start at a time: first to last start"
    assert burst["value"].endswith(" s") and "with 3 starts at once" in burst["baseline"]
    assert cold["figure"] == "topology cold start to ready (median of 1)"
    assert "plain docker run" in cold["baseline"]
    assert result["notes"] == []


@pytest.mark.timeout(120)
def test_the_judging_benchmark_times_a_judged_verdict_beside_a_contains_case(
    tmp_path: Path,
) -> None:
    result = bench("judging", ["--cases", "4"], tmp_path)
    (row,) = result["rows"]
    assert row["figure"].startswith("completion → judged verdict, idle runner, trivial judge")
    assert row["value"].endswith(" ms median")
    assert "a contains case, lease → verdict" in row["baseline"]
    assert row["ratio"].endswith("x")


def test_the_redaction_benchmark_sets_the_redactor_beside_pythons_re(tmp_path: Path) -> None:
    result = bench("redaction", ["--mib", "0.25", "--repeat", "1"], tmp_path)
    [row] = result["rows"]
    assert row["figure"] == "0.25 MiB, 5 patterns: text, bytes, clean"
    assert row["value"].endswith(" ms") and row["baseline"].endswith(" with Python's re.sub")
    assert row["target"] == "<= 1 s"


def test_the_protected_paths_benchmark_sets_the_check_beside_git_status(tmp_path: Path) -> None:
    result = bench("verify_protect", ["--files", "300", "--repeat", "1"], tmp_path)
    [row] = result["rows"]
    assert row["figure"] == "300 protected files: check + restore of 4 changes"
    assert row["value"].endswith(" ms") and row["baseline"].endswith(" ms for git status")
    assert row["target"] == "<= 2x git status"


@pytest.mark.timeout(180)
def test_the_case_files_benchmark_times_file_requests_beside_a_hello(tmp_path: Path) -> None:
    result = bench("case_files", ["--n", "10", "--requests", "5", "--client-procs", "1"], tmp_path)
    [row] = result["rows"]
    assert row["figure"] == "file request p50 / p99, 10 idle"
    assert row["baseline"].startswith("hello p50 ")
    assert "11 long-polls parked" in result["notes"][0]
    assert "client errors none" in result["notes"][0]


@pytest.mark.agent_clis
@pytest.mark.once
@pytest.mark.timeout(120)
def test_the_agent_clis_benchmark_times_worktree_beside_bypass(tmp_path: Path) -> None:
    result = bench("agent_clis", ["--runs", "1"], tmp_path)
    claude, codex = result["rows"]
    assert claude["figure"].startswith("Claude Code 2.1.197, one command, worktree")
    assert codex["figure"].startswith("Codex 0.169.0, one command, worktree")
    for row in (claude, codex):
        assert row["value"].endswith(" ms")
        assert row["baseline"].endswith(" ms: the same case with bypass")
        assert row["target"] == "<= +1000 ms"


@pytest.mark.once
@pytest.mark.timeout(120)
def test_the_compare_benchmark_compares_two_runs_beside_a_get(tmp_path: Path) -> None:
    result = bench("compare_runs", ["--cases", "100", "--repeats", "3", "--repeat", "1"], tmp_path)
    figures = [row["figure"] for row in result["rows"]]
    assert figures == [
        "GET compare, 100 cases x 3, intervals cold",
        "the same, the runs' intervals cached",
    ]
    assert all("GET /api/runs/<id>" in row["baseline"] for row in result["rows"])
    assert "(paired permutation, 100 pairs)" in result["stdout"]


@pytest.mark.once
@pytest.mark.timeout(120)
def test_the_search_benchmark_searches_traces_beside_a_get_and_prices_the_index(
    tmp_path: Path,
) -> None:
    args = ["--cases", "50", "--events", "4", "--repeat", "1", "--inserted", "200"]
    result = bench("search", args, tmp_path)
    figures = [row["figure"] for row in result["rows"]]
    assert figures == [
        "GET run search, 50 cases x 4 trace events, p50",
        "GET workspace search, the same, p50",
        "storing trace events with the search index, 200 in bulk",
    ]
    assert "sudo <mark>rm -rf /srv/cache</mark>" in result["stdout"]
    assert result["rows"][2]["baseline"].startswith("without the index ")
