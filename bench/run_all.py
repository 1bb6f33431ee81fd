"""Run every benchmark, each in its own process and scratch database, then print one table.

PostgreSQL by default (the server named by --postgres, $DATABASE_URL or the local
default); --sqlite runs what applies to the embedded database (the throughput benchmark's
raw limit is a PostgreSQL SKIP LOCKED loop, and cross-replica needs PostgreSQL). Sized to
finish in about a quarter of an hour on a 2-core machine; --quick runs small sizes.

    .venv/bin/python bench/run_all.py [--sqlite] [--quick] [--only dispatch,queue_depth]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from report import Row, print_table

BENCH = Path(__file__).resolve().parent

# name -> (full-size arguments, quick arguments)
PLAN: dict[str, tuple[list[str], list[str]]] = {
    "dispatch": ([], ["--cases", "2000", "--repeat", "3"]),
    "queue_depth": ([], ["--levels", "1000,100000", "--claims", "50"]),
    "throughput": ([], ["--jobs", "300", "--raw-jobs", "1000"]),
    "wake_latency": ([], ["--jobs", "100", "--warmup", "5"]),
    "idle_runners": (["--n", "1000,10000"], ["--n", "500", "--window", "20", "--wake-jobs", "20"]),
    "consent": ([], ["--jobs", "300", "--entries", "100"]),
    "grading": ([], ["--results", "10", "--calls", "50", "--regrade-results", "200"]),
    "run_page": ([], ["--sizes", "100,2000", "--repeat", "3"]),
    "compare_runs": ([], ["--cases", "2000", "--repeat", "2"]),
    "search": ([], ["--cases", "2000", "--events", "20", "--repeat", "3"]),
    "runner_overhead": ([], ["--cases", "100"]),
    "request_latency": ([], ["--requests", "60", "--warmup", "10"]),
    "settle": ([], ["--rounds", "3", "--per-round", "10"]),
    "trace_screens": ([], ["--seconds", "15", "--phase-seconds", "5", "--events", "2000"]),
    "artifacts": ([], ["--blobs", "2", "--mib", "4", "--rounds", "3"]),
    "s3_blobs": ([], ["--mib", "20", "--rounds", "1"]),
    "case_files": ([], ["--n", "300", "--requests", "50"]),
    "services": ([], ["--cases", "30", "--repeat", "2"]),
    "judging": ([], ["--cases", "10"]),
    "redaction": ([], ["--repeat", "3"]),
    "verify_protect": ([], ["--repeat", "3"]),
    "agent_clis": ([], ["--runs", "3"]),
}
POSTGRES_ONLY = {"throughput"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sqlite", action="store_true", help="the embedded SQLite database")
    parser.add_argument("--postgres", metavar="URL", default=None, help="PostgreSQL server")
    parser.add_argument("--quick", action="store_true", help="small sizes (a few minutes)")
    parser.add_argument("--only", default="", help="comma-separated benchmarks to run")
    args = parser.parse_args()
    names = [n for n in args.only.split(",") if n] or list(PLAN)
    unknown = set(names) - set(PLAN)
    if unknown:
        parser.error(f"unknown benchmarks: {sorted(unknown)}; known: {list(PLAN)}")

    rows: list[Row] = []
    notes: list[str] = []
    failed: list[str] = []
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="everdict-bench-") as tmp:
        for name in names:
            if args.sqlite and name in POSTGRES_ONLY:
                notes.append(f"{name}: skipped on SQLite (its raw limit is a PostgreSQL loop)")
                continue
            full, quick = PLAN[name]
            out = Path(tmp) / f"{name}.json"
            command = [
                sys.executable,
                str(BENCH / f"{name}.py"),
                *(quick if args.quick else full),
                "--summary-json",
                str(out),
            ]
            if args.sqlite:
                command.append("--sqlite")
            elif args.postgres:
                command += ["--postgres", args.postgres]
            print(f"\n######## {name}: {' '.join(command[1:])}", flush=True)
            started = time.monotonic()
            code = subprocess.call(command)
            print(
                f"######## {name}: exit {code} after {time.monotonic() - started:.0f} s", flush=True
            )
            if code != 0 or not out.exists():
                failed.append(name)
                continue
            data = json.loads(out.read_text())
            rows += [Row(**row) for row in data["rows"]]
            notes += [f"{name}: {note}" for note in data["notes"]]

    print(f"\n==== all benchmarks ({time.monotonic() - began:.0f} s)")
    print_table(rows)
    for note in notes:
        print(f"  note: {note}")
    if failed:
        print(f"FAILED: {', '.join(failed)}")
        sys.exit(1)


if __name__ == "__main__":
    main()
