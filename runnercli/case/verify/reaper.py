"""Every process the agent left behind, killed once it has ended.

The harness runs in a process group of its own, killed when its leader ends; a process that
left the group (`setsid`, a double fork) outlives it. On Linux the runner makes itself the
child subreaper (`prctl(PR_SET_CHILD_SUBREAPER)`), so such orphans stay its descendants
instead of going to init; they are found among its descendants by the marker the harness's
environment carries (`EVERDICT_CASE_MARK`, inherited by whatever it starts) or by the agent's
process group or session, and killed, round after round until none is left, before the
worktree is read. Services are not the harness's children: they carry no marker and are
left alone. A process that both cleared its environment and left the session cannot be told
apart from another case's, and is left; elsewhere than Linux, only the group is killed.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

MARK_ENV = "EVERDICT_CASE_MARK"
PR_SET_CHILD_SUBREAPER = 36
_ROUNDS = 20
_PROC = Path("/proc")


def become_subreaper() -> bool:
    """Make this process the child subreaper (Linux); return whether it is."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    pgrp: int
    session: int
    zombie: bool


def _stat(pid: int) -> Proc | None:
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # The command name is in parentheses and may hold anything: read after its last ')'.
    fields = text[text.rfind(")") + 2 :].split()
    try:
        return Proc(pid, int(fields[1]), int(fields[2]), int(fields[3]), fields[0] in "ZX")
    except (IndexError, ValueError):
        return None


def descendants(root: int) -> list[Proc]:
    """The processes below `root` (by their parents, as /proc has them now)."""
    children: dict[int, list[Proc]] = {}
    for entry in _PROC.iterdir() if _PROC.is_dir() else ():
        if entry.name.isdigit() and (proc := _stat(int(entry.name))) is not None:
            children.setdefault(proc.ppid, []).append(proc)
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child.pid)
    return found


def _marked(pid: int, mark: bytes) -> bool:
    try:
        environ = (_PROC / str(pid) / "environ").read_bytes()
    except OSError:
        return False
    return mark in environ.split(b"\0")


def reap_case(mark: str, group: int | None) -> int:
    """Kill every descendant of this process that the case started (its marker in its
    environment, or in the agent's group or session); return how many were killed."""
    if not _PROC.is_dir():
        return 0
    me, needle = os.getpid(), f"{MARK_ENV}={mark}".encode()
    killed: set[int] = set()
    for _ in range(_ROUNDS):
        found = []
        for proc in descendants(me):
            ours = proc.pid in killed or (group is not None and group in (proc.pgrp, proc.session))
            if ours or _marked(proc.pid, needle):
                found.append(proc)
        alive = [proc for proc in found if not proc.zombie]
        for proc in alive:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(proc.pid, signal.SIGKILL)
            killed.add(proc.pid)
        # An orphan given to this process is its child now: reaped, no zombie left.
        for proc in found:
            if proc.ppid == me:
                _reap(proc.pid)
        if not alive:
            break
        time.sleep(0.01)
    return len(killed)


# Zombie children of this process by pid, and when each was first seen one.
_ZOMBIES: dict[int, float] = {}
# Longer than the event loop takes to collect a child it started (it waits on each one).
STALE_ZOMBIE_S = 5.0


def reap_stale_zombies(now: float | None = None) -> int:
    """Reap this process's zombie children that nobody collected for STALE_ZOMBIE_S: as the
    subreaper, orphans of any case come here when they end, and the event loop only waits
    for the children it started itself (which it collects at once). Return how many."""
    if not _PROC.is_dir():
        return 0
    now = time.monotonic() if now is None else now
    me, reaped = os.getpid(), 0
    zombies = {p.pid for p in descendants(me) if p.ppid == me and p.zombie}
    for pid in list(_ZOMBIES):
        if pid not in zombies:
            del _ZOMBIES[pid]
    for pid in zombies:
        first = _ZOMBIES.setdefault(pid, now)
        if now - first >= STALE_ZOMBIE_S:
            _reap(pid)
            del _ZOMBIES[pid]
            reaped += 1
    return reaped


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)
