"""What a runner started, on disk, so that another process can find it: `services list`,
`stop` and `prune`, and the next `run` after a `kill -9`.

A process service is recorded as `DIR/<topology id>-<service>.json` (its pid and start token,
its process group, the runner process that started it, its port and its log file); a
container is found by its labels instead. The owner is the runner process as `pid:start`, so
a pid the system gave to another program since is not taken for a live runner.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

from runnercli.atomic import replace_file
from runnercli.case.repo.owner import Owner, start_token


def services_dir_for(config_file: Path) -> Path:
    """Where the runner of `config_file` records its process services (beside it)."""
    return config_file.with_name(f"{config_file.stem}.services")


def owner_label(owner: Owner | None = None) -> str:
    me = owner or Owner.me()
    return f"{me.pid}:{me.started or ''}"


def owner_of(label: str) -> Owner | None:
    pid, _, started = (label or "").partition(":")
    return Owner(int(pid), started or None) if pid.isdigit() else None


def owner_alive(label: str) -> bool:
    owner = owner_of(label)
    return owner is not None and owner.alive()


@dataclass(frozen=True)
class ProcessRecord:
    runner: str
    owner: str
    topology: str  # the harness digest
    topology_id: str  # this start of it
    scope: str
    service: str
    pid: int
    started: str | None
    port: int
    log: str

    def alive(self) -> bool:
        """Whether the service's process (not a later one with its pid) still runs."""
        return Owner(self.pid, self.started).alive()


class Records:
    """The process records of one runner config (a directory beside it)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def path(self, topology_id: str, service: str) -> Path:
        return self.directory / f"{topology_id}-{service}.json"

    def log_path(self, topology_id: str, service: str) -> Path:
        return self.directory / f"{topology_id}-{service}.log"

    def write(self, record: ProcessRecord) -> None:
        path = self.path(record.topology_id, record.service)
        replace_file(path, json.dumps(asdict(record)).encode())

    def forget(self, record: ProcessRecord) -> None:
        with contextlib.suppress(OSError):
            self.path(record.topology_id, record.service).unlink()
        with contextlib.suppress(OSError):
            Path(record.log).unlink()

    def all(self) -> list[ProcessRecord]:
        records = []
        for path in sorted(self.directory.glob("*.json")):
            with contextlib.suppress(OSError, ValueError, TypeError):
                records.append(ProcessRecord(**json.loads(path.read_text(encoding="utf-8"))))
        return records


def process_start(pid: int) -> str | None:
    return start_token(pid)
