"""Files replaced whole or not at all.

Every file the runner keeps (its config and token, consent answers, the spooled results and
their blobs, kept traces, the laptop's state, service records, login units) is written the
same way: to a new file of its own beside the target, created with its final mode so that a
token is never readable by others even briefly, then renamed over the target. A crash leaves
the old file or the new one, never half of either.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

# Numbers this process's writes (their temporary files' names): two writes of one target,
# from two threads or two processes, never share a temporary file.
_WRITES = itertools.count()
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)


def replace_file(
    path: Path,
    data: bytes,
    *,
    mode: int = 0o600,
    durable: bool = False,
    directory_mode: int = 0o700,
) -> None:
    """Replace `path` with `data` atomically, the file `mode` (0600 unless told).

    When `durable`, the content and then the rename are synced to the disk (a power cut, not
    only a crash, keeps the file). Its directory is made with `directory_mode` when missing.
    Raises OSError; nothing is left behind but the old file when it does.
    """
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{next(_WRITES)}.tmp")
    try:
        fd = os.open(temporary, _CREATE, mode)
    except FileNotFoundError:
        path.parent.mkdir(mode=directory_mode, parents=True, exist_ok=True)
        os.chmod(path.parent, directory_mode)
        fd = os.open(temporary, _CREATE, mode)
    try:
        try:
            if mode & ~0o600:
                os.fchmod(fd, mode)  # wider than the umask may have let it be made
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    if durable:
        sync_directory(path.parent)


def sync_directory(directory: Path) -> None:
    """Make the names in `directory` durable (a rename or an unlink survives a power cut)."""
    if os.name != "posix":
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
