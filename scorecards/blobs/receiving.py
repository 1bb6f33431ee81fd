"""A raw upload's chunk as it arrives: written to a file while it is hashed.

On a store on the local disk the file is made in the staging root, beside the store, so that
the chunk is then moved into place (a staged chunk's key, or the blob's) rather than copied.
The file is written with a write-behind every `WRITE_BEHIND` bytes (the kernel is asked to
start writing what came before and drop it from the page cache, `posix_fadvise(DONTNEED)`),
and once more at its end, so that many uploads at once do not pile up dirty pages until the
kernel throttles every writer of the disk. It is not synced: an `fdatasync` per chunk made
uploads slower under load (52 % of a plain `PUT` beside 62 % without, back to back), and the
store's files were never synced before either. On any other store it is an anonymous
temporary file the store reads from.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import tempfile
from typing import IO, Any

from scorecards.blobs.store import STAGING_ROOT, blob_storage

# Bytes after which what was written is handed to the kernel to write and forget.
WRITE_BEHIND = 1 << 20
# Names of the files a chunk is received into, in the staging root (swept by the gc when left).
RECEIVING_PREFIX = "put-"


def local_staging_root() -> str | None:
    """The staging root's directory when the blob store is on the local disk, else None."""
    try:
        return str(blob_storage().path(STAGING_ROOT))
    except NotImplementedError:
        return None


class Received:
    """A chunk being received: its bytes so far in a file, and `digest` (when given) carried
    over them."""

    def __init__(self, digest: Any | None) -> None:
        self.digest = digest
        self.size = 0
        root = local_staging_root()
        self.path: str | None = None
        if root is not None:
            os.makedirs(root, exist_ok=True)
            self.path = os.path.join(root, f"{RECEIVING_PREFIX}{secrets.token_hex(8)}")
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            self._file: IO[bytes] | None = None
        else:
            self._file = tempfile.TemporaryFile()  # noqa: SIM115 (closed by close())
            self._fd = self._file.fileno()
        self._flushed = 0
        self._closed = False

    def write_pieces(self, pieces: list[bytes]) -> None:
        """Append `pieces` in order, joined a `WRITE_BEHIND` at a time to be hashed and
        written (a body's 8 KiB messages as the server hands them over). The list is emptied
        as they are written, so that their memory goes as soon as it may."""
        while pieces:
            count = size = 0
            while count < len(pieces) and size < WRITE_BEHIND:
                size += len(pieces[count])
                count += 1
            piece = pieces[0] if count == 1 else b"".join(pieces[:count])
            del pieces[:count]
            self.write(piece)

    def write(self, piece: bytes) -> None:
        """Append `piece` (hashed first when a digest is carried)."""
        if self.digest is not None:
            self.digest.update(piece)
        view = memoryview(piece)
        while view:
            view = view[os.write(self._fd, view) :]
        self.size += len(piece)
        if self.path is not None and self.size - self._flushed >= WRITE_BEHIND:
            self._behind(self._flushed, self.size - self._flushed)
            self._flushed = self.size

    def _behind(self, start: int, length: int) -> None:
        with contextlib.suppress(OSError, AttributeError):
            os.posix_fadvise(self._fd, start, length, os.POSIX_FADV_DONTNEED)

    def done(self) -> None:
        """Every byte is in: on the local disk, what is left handed to the kernel to write."""
        if self.path is not None:
            self._behind(0, 0)

    def open(self) -> IO[bytes]:
        """The bytes received, from the first, open for reading (the caller closes it)."""
        if self.path is not None:
            return open(self.path, "rb")
        copy = os.fdopen(os.dup(self._fd), "rb")
        copy.seek(0)
        return copy

    def hexdigest(self) -> str:
        return str(self.digest.hexdigest()) if self.digest is not None else ""

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Close the file and remove it, unless it was moved into the store (once: closing
        again does nothing, as the descriptor's number may be another file's by then)."""
        if self._closed:
            return
        self._closed = True
        if self._file is not None:
            self._file.close()
        else:
            with contextlib.suppress(OSError):
                os.close(self._fd)
        if self.path is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
