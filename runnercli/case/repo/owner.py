"""Which runner process made a case's worktree, and whether it is still alive.

Before a worktree is added, its case directory gets a small owner file naming this process
(its pid and, on Linux, its start time, so a pid reused by another program later does not
keep a leftover forever). A runner stopped with `kill -9` cannot remove its worktrees; the
next one finds them registered under the case-directory prefix with an owner that is gone.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

OWNER_FILE = ".everdict-worktree-owner"


@dataclass(frozen=True)
class Owner:
    pid: int
    started: str | None

    @classmethod
    def me(cls) -> Owner:
        return cls(os.getpid(), start_token(os.getpid()))

    def alive(self) -> bool:
        """Whether the process that wrote this is still running (not a zombie, not a later
        process that happens to have its pid)."""
        if self.pid <= 0:
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        if _state(self.pid) == "Z":
            return False
        now = start_token(self.pid)
        return self.started is None or now is None or now == self.started


def start_token(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux), else None."""
    fields = _stat_fields(pid)
    return fields[19] if fields and len(fields) > 19 else None


def _state(pid: int) -> str | None:
    fields = _stat_fields(pid)
    return fields[0] if fields else None


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state first), or None."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    # The command name is in parentheses and may itself hold spaces or parentheses.
    return raw[raw.rfind(")") + 2 :].split()


def owner_write(case_dir: Path) -> Path:
    """Record this process as the owner of the worktrees made in `case_dir`."""
    me = Owner.me()
    path = case_dir / OWNER_FILE
    path.write_text(json.dumps({"pid": me.pid, "started": me.started}), encoding="utf-8")
    return path


def owner_read(case_dir: Path) -> Owner | None:
    """The owner recorded in `case_dir`, or None when there is no readable owner file."""
    try:
        data = json.loads((case_dir / OWNER_FILE).read_text(encoding="utf-8"))
        pid, started = data["pid"], data.get("started")
    except (OSError, ValueError, TypeError, KeyError):
        return None
    if not isinstance(pid, int) or not (started is None or isinstance(started, str)):
        return None
    return Owner(pid, started)


def owner_forget(case_dir: Path) -> None:
    with contextlib.suppress(OSError):
        (case_dir / OWNER_FILE).unlink()
