"""Protected paths on the member's machine: the check against the start commit and the
restore, on a repo of 10,000 files, beside `git status` on the same repo in the same run.

The repo: 10,000 small files in 100 directories, every one of them protected (`**`, the worst
case: every file hashed with git's filters off), one commit. Each round a file is modified,
one added, one deleted and one's mode changed; the check finds those four and restores them,
git naming the candidates against the index copy taken before the agent (as the runner does).
Baseline: `git status --porcelain` on the same repo with the same changes (git's own stat
cache helping it). Target: within 2x of `git status`.

    .venv/bin/python bench/verify_protect.py [--files 10000] [--repeat 5]

It uses no database: `--sqlite` / `--postgres` (as `run_all.py` passes them) are accepted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from databases import ROOT, add_database_arguments
from report import Summary, finish

sys.path.insert(0, str(ROOT))

from runnercli.case.verify.protect import check_and_restore, snapshot_index

TARGET_RATIO = 2.0
GIT = ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.com"]


def make_repo(path: Path, files: int) -> str:
    path.mkdir()
    subprocess.run([*GIT, "-C", str(path), "init", "-q"], check=True)
    for n in range(files):
        target = path / f"d{n % 100:02d}" / f"f{n}.py"
        target.parent.mkdir(exist_ok=True)
        target.write_text(f"value = {n}\n" * 20)
    (path / ".gitignore").write_text("__pycache__/\n")
    subprocess.run([*GIT, "-C", str(path), "add", "-A"], check=True)
    subprocess.run([*GIT, "-C", str(path), "commit", "-qm", "start"], check=True)
    done = subprocess.run(
        ["git", "-C", str(path), "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    )
    return done.stdout.strip()


def tamper(path: Path) -> None:
    (path / "d01" / "f1.py").write_text("changed\n")
    (path / "d02" / "new.py").write_text("added\n")
    (path / "d03" / "f3.py").unlink()
    os.chmod(path / "d04" / "f4.py", 0o755)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=10_000, help="files in the repo (10000)")
    parser.add_argument("--repeat", type=int, default=5, help="rounds (5)")
    add_database_arguments(parser)
    args = parser.parse_args()
    summary = Summary("protected paths: check and restore beside git status")
    with tempfile.TemporaryDirectory(prefix="everdict-bench-protect-") as scratch:
        repo = Path(scratch) / "repo"
        start = make_repo(repo, args.files)
        time.sleep(1.1)  # past git's racy window, as a worktree is by the time an agent ends
        index = snapshot_index(repo)
        ours, theirs = [], []
        for _ in range(args.repeat):  # interleaved: drift of the machine hits both alike
            tamper(repo)
            began = time.perf_counter()
            subprocess.run(
                ["git", "-C", str(repo), "status", "--porcelain"], check=True, capture_output=True
            )
            theirs.append(time.perf_counter() - began)
            began = time.perf_counter()
            changes = check_and_restore(repo, start, ["**"], index)
            ours.append(time.perf_counter() - began)
            assert len(changes) == 4, changes
            status = subprocess.run(
                ["git", "-C", str(repo), "status", "--porcelain"], capture_output=True, text=True
            )
            assert status.stdout == "", status.stdout
    value, baseline = statistics.median(ours), statistics.median(theirs)
    ratio = value / baseline if baseline else float("inf")
    summary.add(
        benchmark="verify_protect",
        figure=f"{args.files:,} protected files: check + restore of 4 changes",
        value=f"{value * 1000:.0f} ms",
        baseline=f"{baseline * 1000:.0f} ms for git status",
        ratio=f"{ratio:.2f}x",
        target=f"<= {TARGET_RATIO:g}x git status",
        met=ratio <= TARGET_RATIO,
    )
    finish(summary, args)


if __name__ == "__main__":
    main()
