"""Running digests of uploads in progress, kept by the process that staged their chunks.

A blob is committed only when its bytes hash to its digest. Hashing each chunk when it is
staged, rather than reading every staged chunk back on commit, spares a pass over the blob
and lets a bad upload be refused before anything is written under the blob's key. A digest
so far is kept under the names of exactly the chunks it covers: a commit uses it only when
the upload's staged chunks are those (chunks staged by another replica, a restart, an upload
discarded and begun again: the commit reads the staging back and hashes it as before).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

# Uploads in progress whose digest a process keeps; the oldest are forgotten first (their
# commit reads the staging back).
MAX_RUNNING = 1024

_lock = threading.Lock()
_running: OrderedDict[tuple[int, str], tuple[tuple[str, ...], Any]] = OrderedDict()


def running_take(workspace_id: int, sha256: str, names: Sequence[str]) -> Any | None:
    """The digest so far of exactly the staged chunks `names`, taken out (a new one for no
    chunk); None when this process does not hold it."""
    with _lock:
        entry = _running.pop((workspace_id, sha256), None)
    if not names:
        return hashlib.sha256()
    if entry is None or entry[0] != tuple(names):
        return None
    return entry[1]


def running_copy(workspace_id: int, sha256: str, names: Sequence[str]) -> Any | None:
    """A copy of the digest so far of exactly the staged chunks `names`, left in place (a new
    one for no chunk); None when this process does not hold it."""
    if not names:
        return hashlib.sha256()
    with _lock:
        entry = _running.get((workspace_id, sha256))
        if entry is None or entry[0] != tuple(names):
            return None
        return entry[1].copy()


def running_keep(workspace_id: int, sha256: str, names: Sequence[str], digest: Any) -> None:
    """Keep `digest` as that of exactly the staged chunks `names`."""
    with _lock:
        _running[(workspace_id, sha256)] = (tuple(names), digest)
        _running.move_to_end((workspace_id, sha256))
        while len(_running) > MAX_RUNNING:
            _running.popitem(last=False)


def running_forget(workspace_id: int, sha256: str) -> None:
    with _lock:
        _running.pop((workspace_id, sha256), None)
