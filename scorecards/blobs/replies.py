"""Reply shapes of artifacts: listed with their case's result, and read through MCP."""

from __future__ import annotations

import base64
from typing import Literal

from pydantic import Field

from core.replies import Reply
from scorecards.blobs.models import Artifact
from scorecards.blobs.responses import is_text
from scorecards.blobs.selectors import artifact_url
from scorecards.models import CaseResult, Run


class ArtifactItem(Reply):
    """A file the case left, kept as a blob of the run's workspace."""

    path: str
    sha256: str
    size: int
    media_type: str
    url: str = Field(description="Where it is downloaded (`GET`, the same authorization).")

    @classmethod
    def of(cls, artifact: Artifact, run: Run, key: str, repeat: int) -> ArtifactItem:
        return cls(
            path=artifact.path,
            sha256=artifact.blob.sha256,
            size=artifact.size,
            media_type=artifact.media_type,
            url=artifact_url(run.pk, key, artifact.path, repeat, run.repeats),
        )

    @classmethod
    def list_of(cls, row: CaseResult, run: Run, key: str) -> list[ArtifactItem]:
        """The artifacts of a result (prefetched with their blobs), by path."""
        return [cls.of(a, run, key, row.repeat) for a in row.artifacts.all()]


class ArtifactContent(ArtifactItem):
    """An artifact with its content: text as text, anything else as base64, bounded."""

    encoding: Literal["text", "base64"]
    content: str
    truncated: bool = Field(description="Only the first bytes are here: download the rest.")

    @classmethod
    def read(
        cls, artifact: Artifact, run: Run, key: str, repeat: int, head: bytes, truncated: bool
    ) -> ArtifactContent:
        item = ArtifactItem.of(artifact, run, key, repeat).model_dump()
        text = _text(head, truncated) if is_text(artifact.media_type) else None
        if text is not None:
            return cls(**item, encoding="text", content=text, truncated=truncated)
        content = base64.b64encode(head).decode()
        return cls(**item, encoding="base64", content=content, truncated=truncated)


def _text(head: bytes, truncated: bool) -> str | None:
    """The bytes as UTF-8 text (a character cut by the bound dropped), or None."""
    try:
        return head.decode()
    except UnicodeDecodeError as exc:
        if truncated and exc.start >= len(head) - 3:
            return head[: exc.start].decode()
        return None
