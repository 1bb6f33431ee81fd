"""Finished cases' results kept on disk until the server acknowledges them.

A case may be ten minutes of a member's paid subscription: its result is written here before
it is sent, and removed only when the server has answered for it (accepted, or refused for
good — the server then keeps it as a late result). A runner killed or crashed in between
finds it on its next start and sends it then, before it leases anything.

The spool is a directory beside the runner's config file (`runner.json` → `runner.spool/`),
mode 0700, one file per result, mode 0600, each written to a temporary name and renamed, so a
crash leaves a whole file or none. Files name the server they belong to: a runner pointed at
another server leaves them for the one that leased the jobs.

Durable once it has to wait: a result is written (which a killed runner keeps) and sent at
once; it is synced to the disk (which a power cut keeps) as soon as it must wait for the
server — its send failed, the runner is leaving without an answer, or it is kept for a new
lease. A result answered within its first send costs no sync: most of them, at hundreds of
cases a second, where two syncs per result held every file operation of the runner behind
the disk's journal. (A power cut between a case's end and the server's first answer, tens
of milliseconds, loses that result; its lease then lapses and the case runs again.)
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pydantic import ValidationError

from runnercli.atomic import replace_file, sync_directory
from runnercli.case.artifacts.shelf import Shelf
from runnercli.config import mcp_url
from runnercli.protocol import ResultReport

SUFFIX = ".json"


class SpoolError(Exception):
    """The spool cannot be read or written."""


@dataclass(frozen=True)
class Spooled:
    """One result waiting in the spool, with what to call it in the runner's output."""

    report: ResultReport
    title: str
    path: Path


def spool_dir_for(config_file: Path) -> Path:
    """The spool directory of the runner whose config file is `config_file`."""
    return config_file.with_name(f"{config_file.stem}.spool")


class Spool:
    """The results of one runner for one server, on disk until acknowledged."""

    def __init__(self, directory: Path, server: str) -> None:
        self.directory = directory
        self.server = mcp_url(server)
        self._prefix = hashlib.sha256(self.server.encode()).hexdigest()[:12]
        # The artifacts the results name, kept beside them until they are delivered.
        self.blobs = Shelf(directory / "blobs", named=self.named_blobs)

    def path_of(self, report: ResultReport) -> Path:
        return self.directory / f"{self._prefix}-{report.job_id}-{report.lease_epoch}{SUFFIX}"

    def put(self, report: ResultReport, title: str, *, durable: bool = True) -> Path:
        """Write the result (0600, atomically) before it is sent; synced to the disk too
        when `durable`."""
        # The report's JSON as pydantic writes it, in a record written by the C encoder:
        # a result is spooled for every case, at hundreds of cases a second.
        head = json.dumps(
            {"server": self.server, "title": title, "spooled_at": datetime.now(UTC).isoformat()}
        )
        data = f'{head[:-1]}, "report": {report.model_dump_json()}}}'.encode()
        target = self.path_of(report)
        try:
            replace_file(target, data, durable=durable)
        except OSError as exc:
            raise SpoolError(f"cannot write {target}: {exc.strerror or exc}") from exc
        return target

    def make_durable(self, report: ResultReport) -> bool:
        """Sync a result written by `put` to the disk (its content, then its name); False
        when it is no longer there (answered meanwhile)."""
        target = self.path_of(report)
        try:
            fd = os.open(target, os.O_RDONLY)
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise SpoolError(f"cannot sync {target}: {exc.strerror or exc}") from exc
        try:
            os.fsync(fd)
            sync_directory(self.directory)
        except OSError as exc:
            raise SpoolError(f"cannot sync {target}: {exc.strerror or exc}") from exc
        finally:
            os.close(fd)
        return True

    def drop(self, report: ResultReport) -> None:
        """Forget the result: the server answered for it."""
        with contextlib.suppress(FileNotFoundError):
            self.path_of(report).unlink()

    def named_blobs(self) -> set[str]:
        """The digests of the artifacts every result waiting here names (for any server: a
        blob is kept while any of them may still need it)."""
        named: set[str] = set()
        if not self.directory.is_dir():
            return named
        for path in self.directory.glob(f"*{SUFFIX}"):
            try:
                record = json.loads(path.read_text(encoding="utf-8"))
                artifacts = record["report"]["result"].get("artifacts") or []
                named.update(str(artifact["sha256"]) for artifact in artifacts)
            except (OSError, ValueError, KeyError, TypeError, AttributeError):
                continue
        return named

    def pending(self) -> tuple[list[Spooled], list[str]]:
        """The results waiting for this server, oldest first, and the files that could not
        be read (left where they are, for the member to look at)."""
        if not self.directory.is_dir():
            return [], []
        found: list[tuple[float, Spooled]] = []
        problems: list[str] = []
        for path in self.directory.glob(f"{self._prefix}-*{SUFFIX}"):
            try:
                record = json.loads(path.read_text(encoding="utf-8"))
                if record.get("server") != self.server:
                    continue
                report = ResultReport.model_validate(record["report"])
                title = str(record.get("title") or f"job {report.job_id}")
                found.append((path.stat().st_mtime, Spooled(report, title, path)))
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
                problems.append(f"{path}: {_why(exc)}")
        found.sort(key=lambda item: item[0])
        return [spooled for _, spooled in found], problems


def _why(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return f"not a result ({exc.error_count()} errors)"
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    return str(exc) or type(exc).__name__
