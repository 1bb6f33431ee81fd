"""The spool: finished results on disk, owner-only, until the server answers for them."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from runnercli.case.delivery.spool import Spool, spool_dir_for
from runnercli.protocol import CaseResult, ResultReport


def report(job_id: int, epoch: int = 1) -> ResultReport:
    result = CaseResult(status="completed", exit_code=0, output=f"out {job_id}", log_tail=["✓"])
    return ResultReport(job_id=job_id, lease_epoch=epoch, result=result)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_results_are_kept_owner_only_beside_the_config_until_dropped(tmp_path: Path) -> None:
    directory = spool_dir_for(tmp_path / "laptop.json")
    assert directory == tmp_path / "laptop.spool"
    spool = Spool(directory, "http://127.0.0.1:8000")
    first = spool.put(report(1), "run 1 case a")
    spool.put(report(2, epoch=4), "run 1 case b")
    assert mode(directory) == 0o700
    assert mode(first) == 0o600
    found, problems = Spool(directory, "http://127.0.0.1:8000/mcp").pending()
    assert problems == []
    assert [(s.report.job_id, s.report.lease_epoch, s.title) for s in found] == [
        (1, 1, "run 1 case a"),
        (2, 4, "run 1 case b"),
    ]
    assert found[0].report == report(1)
    spool.drop(report(1))
    spool.drop(report(1))  # twice is harmless
    assert [s.report.job_id for s in spool.pending()[0]] == [2]
    assert not [p for p in os.listdir(directory) if p.endswith(".tmp")]


def test_another_servers_results_and_unreadable_files_are_left_alone(tmp_path: Path) -> None:
    directory = tmp_path / "runner.spool"
    Spool(directory, "http://other.example").put(report(1), "elsewhere")
    here = Spool(directory, "http://127.0.0.1:8000")
    here.put(report(2), "here")
    broken = here.path_of(report(3))
    broken.write_text("{not json")
    found, problems = here.pending()
    assert [s.report.job_id for s in found] == [2]
    assert len(problems) == 1 and str(broken) in problems[0]
    assert broken.exists()


def test_a_result_written_before_its_send_is_kept_whole_and_synced_once_it_waits(
    tmp_path: Path,
) -> None:
    spool = Spool(tmp_path / "runner.spool", "http://127.0.0.1:8000")
    written = spool.put(report(1), "run 1 case a", durable=False)
    # Not synced yet, but whole and owner-only: a killed runner finds it on its next start.
    assert mode(written) == 0o600
    assert [s.report for s in spool.pending()[0]] == [report(1)]
    assert spool.make_durable(report(1)) is True
    spool.drop(report(1))
    # Answered meanwhile: nothing left to sync.
    assert spool.make_durable(report(1)) is False
    assert spool.pending() == ([], [])
