"""Process services: a program on the member's machine (the repo's dev server, a small web
app), in a process group of its own, its output kept as the service's log.

It gets its port as `{port}` in its argv and `PORT` in its environment, never the runner's
secrets. Stopping it ends its whole group: SIGTERM, then SIGKILL after STOP_GRACE_S.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

from runnercli.case.input import CASE_ENV, CASE_FILE_ENV
from runnercli.case.services.errors import ServiceError
from runnercli.case.services.records import ProcessRecord, Records, process_start
from runnercli.config import CONFIG_ENV, TOKEN_ENV
from runnercli.tasks import within

STOP_GRACE_S = 5.0
TAIL_BYTES = 64 * 1024
KILL = getattr(signal, "SIGKILL", signal.SIGTERM)
_SECRETS = (TOKEN_ENV, CONFIG_ENV, CASE_ENV, CASE_FILE_ENV)


def service_env(spec_env: Mapping[str, str], port: int) -> dict[str, str]:
    """The runner's environment minus its secrets, the service's own, and `PORT`."""
    env = {k: v for k, v in os.environ.items() if k not in _SECRETS}
    env.update(spec_env)
    env["PORT"] = str(port)
    return env


def signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def read_tail(path: Path, lines: int, offset: int = 0) -> list[str]:
    """The last `lines` lines of the file from `offset` on (at most TAIL_BYTES of it)."""
    try:
        with path.open("rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            start = max(offset, size - TAIL_BYTES)
            handle.seek(start)
            data = handle.read()
    except OSError:
        return []
    text = data.decode("utf-8", errors="replace").splitlines()
    if start > offset and text:
        text = text[1:]  # a line cut by the byte window
    return text[-lines:] if lines else []


class ProcessService:
    """One process service of a topology, started and stopped by it."""

    kind = "process"

    def __init__(
        self,
        record: ProcessRecord,
        argv: list[str],
        env: dict[str, str],
        cwd: Path,
        records: Records,
    ) -> None:
        self.name = record.service
        self.record = record
        self.argv = argv
        self.env = env
        self.cwd = cwd
        self.records = records
        self.log = Path(record.log)
        self.proc: asyncio.subprocess.Process | None = None

    @property
    def port(self) -> int:
        return self.record.port

    def ports(self) -> dict[int, int]:
        return {}

    async def start(self) -> None:
        self.log.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with self.log.open("ab") as sink:
            try:
                self.proc = await asyncio.create_subprocess_exec(
                    *self.argv,
                    stdin=subprocess.DEVNULL,
                    stdout=sink,
                    stderr=subprocess.STDOUT,
                    cwd=str(self.cwd),
                    env=self.env,
                    start_new_session=True,
                )
            except OSError as exc:
                raise ServiceError(
                    self.name,
                    f"service {self.name} cannot start {self.argv[0]}: {exc.strerror or exc}",
                ) from exc
        pid = self.proc.pid
        self.record = ProcessRecord(
            **{**self.record.__dict__, "pid": pid, "started": process_start(pid)}
        )
        self.records.write(self.record)

    async def ended(self) -> str | None:
        if self.proc is None:
            return "was not started"
        code = self.proc.returncode
        return None if code is None else f"exited with status {code}"

    def mark(self) -> float:
        """Where its log stands now, to read what it says from then on."""
        try:
            return float(self.log.stat().st_size)
        except OSError:
            return 0.0

    async def log_lines(self, tail: int, since: float | None = None) -> list[str]:
        return await asyncio.to_thread(read_tail, self.log, tail, int(since or 0))

    async def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """End its whole process group: SIGTERM, SIGKILL after `grace_s`; forget it."""
        proc = self.proc
        if proc is not None:
            signal_group(proc.pid, signal.SIGTERM)
            with contextlib.suppress(TimeoutError):
                await within(proc.wait(), grace_s)
            signal_group(proc.pid, KILL)
            with contextlib.suppress(TimeoutError):
                await within(proc.wait(), grace_s)
        self.records.forget(self.record)


def end_leftover(record: ProcessRecord, grace_s: float = STOP_GRACE_S) -> bool:
    """End the process group of a recorded service whose runner is gone (called from
    another process than the one that started it); return whether it was still running."""
    running = record.alive()
    if running:
        signal_group(record.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while record.alive() and time.monotonic() < deadline:
            time.sleep(0.05)
    # Whatever else its group still holds goes too (its leader may be gone already).
    if running or record.started is None:
        signal_group(record.pid, KILL)
    return running
