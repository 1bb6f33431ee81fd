"""Reply shapes of a running case's files: a listing, and a file read through MCP."""

from __future__ import annotations

import base64
from typing import Literal
from urllib.parse import urlencode

from pydantic import Field

from core.replies import Reply
from scorecards.blobs.responses import is_text
from scorecards.files.services import FsAnswer


def files_url(run_id: int, key: str, path: str) -> str:
    """Where a running case's file is read: `/api/runs/<id>/files?key=K&path=P`."""
    return f"/api/runs/{run_id}/files?{urlencode({'key': key, 'path': path})}"


class CaseFileEntry(Reply):
    path: str = Field(description="Relative to the case's working directory.")
    size: int
    kind: Literal["file", "dir", "symlink", "other"]
    mtime: float = Field(description="Seconds since the epoch.")


class CaseFiles(Reply):
    """A directory of a running case's working directory, as its runner sees it now."""

    run_id: int
    key: str
    path: str
    entries: list[CaseFileEntry]

    @classmethod
    def of(cls, answer: FsAnswer) -> CaseFiles:
        entries = [CaseFileEntry(**entry) for entry in answer.entries or []]
        return cls(run_id=answer.run_id, key=answer.key, path=answer.path, entries=entries)


class CaseFileContent(Reply):
    """A file of a running case: text as text, anything else as base64, bounded."""

    run_id: int
    key: str
    path: str
    size: int
    media_type: str
    url: str = Field(description="Where it is read whole (`GET`, the same authorization).")
    encoding: Literal["text", "base64"]
    content: str
    truncated: bool = Field(description="Only the first bytes are here: read the rest at url.")

    @classmethod
    def read(cls, answer: FsAnswer, head: bytes, truncated: bool) -> CaseFileContent:
        assert answer.blob is not None
        text = _text(head) if is_text(answer.media_type) else None
        encoding: Literal["text", "base64"] = "text" if text is not None else "base64"
        return cls(
            run_id=answer.run_id,
            key=answer.key,
            path=answer.path,
            size=answer.blob.size,
            media_type=answer.media_type,
            url=files_url(answer.run_id, answer.key, answer.path),
            encoding=encoding,
            content=text if text is not None else base64.b64encode(head).decode(),
            truncated=truncated,
        )


def _text(head: bytes) -> str | None:
    try:
        return head.decode()
    except UnicodeDecodeError:
        return None
