"""The `Artifacts` stage: the files a case leaves, uploaded before its result names them.

Once the result is built, it collects the harness's `artifacts` globs under the case's
working directory (`globs.collect`: confined to it, symlinks not followed, within
`hello.limits`) and adds whatever other stages put in `case.artifacts` (the repo's
diff). Each file is read once, redacted when it is text and the member set `redact`
patterns, hashed, and kept on the shelf (beside the spooled result) until the result is
delivered; then uploaded (`upload`: only what the workspace lacks, resumed where the server
stands) and named in `result.artifacts`. A file refused (over a limit, unreadable,
refused by the server) is left out, saying why in the case's log; one the server could not be
reached for is still named, and sent again when the result is.
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass
from pathlib import Path

from runnercli.case.artifacts.calls import have_blobs
from runnercli.case.artifacts.globs import collect
from runnercli.case.artifacts.shelf import Shelf, Source
from runnercli.case.artifacts.upload import Blob, Uploaded, UploadRefused, by_put, upload_many
from runnercli.case.confine import ConfineError, read_file
from runnercli.case.pipeline import Artifact, CaseContext, Given, Stage
from runnercli.client import RunnerClient, ServerUnavailable, ToolCallError
from runnercli.protocol import ArtifactRef, BlobHoldings, JobFence, Limits
from runnercli.text.redact import Redactor


@dataclass(frozen=True)
class Found:
    """A file to send: the path the result shows, and where it is read from (a path under
    a root it must stay inside)."""

    path: str
    root: Path
    relative: str
    media_type: str


@dataclass(frozen=True)
class Prepared:
    """An artifact read, redacted and hashed: what the result names, where its bytes are."""

    ref: ArtifactRef
    source: Source


class Artifacts(Stage):
    """Collect, keep and upload the case's artifacts; name them in its result."""

    name = "artifacts"
    needs = frozenset({Given.RESULT})

    def __init__(
        self,
        client: RunnerClient,
        shelf: Shelf,
        *,
        redactor: Redactor | None = None,
        abort: asyncio.Event | None = None,
    ) -> None:
        self.client = client
        self.shelf = shelf
        self.redactor = redactor
        self.abort = abort

    async def finish(self, case: CaseContext) -> None:
        result = case.result
        if result is None or result.status == "canceled":
            return
        if not case.job.harness.spec.artifacts and not case.artifacts:
            return  # nothing to look for: no thread hop for a case that keeps no artifact
        files = await asyncio.to_thread(self._files, case)
        if not files:
            return
        prepared = await asyncio.to_thread(self._prepare, case, files)
        refs = await self._upload(case, prepared)
        if refs:
            case.result = result.model_copy(update={"artifacts": refs})

    # ---- what the case left

    def _files(self, case: CaseContext) -> list[Found]:
        """The harness's globs matched under the working directory, then the other stages'
        artifacts; one per path."""
        files: list[Found] = []
        globs = case.job.harness.spec.artifacts or []
        root = case.workdir
        if globs:
            limits = self.client.limits
            found = collect(root, globs, limits.max_artifact_bytes, limits.max_case_artifact_bytes)
            for skipped in found.skipped:
                case.note(f"⚠ artifact {skipped.path} left out: {skipped.reason}")
            for glob in found.unmatched:
                case.note(f"artifacts: {glob!r} matched no file")
            if found.scan_cut:
                case.note("⚠ artifacts: too many files to look through; some were not seen")
            files += [Found(a.path, Path(root), a.path, a.media_type) for a in found.artifacts]
        seen = {found.path for found in files}
        files += [_other(a) for a in case.artifacts if a.path not in seen]
        return files

    def _prepare(self, case: CaseContext, files: list[Found]) -> list[Prepared]:
        """Read, redact, hash and keep each file, within the limits per file and per case."""
        limits, total, prepared = self.client.limits, 0, []
        for artifact in files:
            try:
                data = self._read(artifact, limits)
            except (ConfineError, OSError) as exc:
                case.note(f"⚠ artifact {artifact.path} left out: {exc}")
                continue
            if self.redactor:
                data = self.redactor.bytes_if_text(data, artifact.media_type)
            if problem := _over(len(data), total, limits):
                case.note(f"⚠ artifact {artifact.path} left out: {problem}")
                continue
            total += len(data)
            sha256 = hashlib.sha256(data).hexdigest()
            ref = ArtifactRef(
                path=artifact.path, sha256=sha256, size=len(data), media_type=artifact.media_type
            )
            source = self.shelf.keep(case.job.job_id, sha256, data)
            prepared.append(Prepared(ref, source))
        return prepared

    @staticmethod
    def _read(found: Found, limits: Limits) -> bytes:
        # Read through the confinement again: the tree may have changed since it was walked.
        return read_file(found.root, found.relative, limits.max_artifact_bytes)

    # ---- to the server

    async def _upload(self, case: CaseContext, prepared: list[Prepared]) -> list[ArtifactRef]:
        fence = JobFence(job_id=case.job.job_id, lease_epoch=case.lease.lease_epoch)
        # A blob going by `PUT` learns what the server holds of it from its grant.
        asked = [p.ref.sha256 for p in prepared if not by_put(self.client, p.ref.size)]
        holdings = await self._holdings(fence, asked) if asked else None
        blobs = [Blob(p.source, p.ref.sha256, p.ref.size) for p in prepared]
        outcomes = await upload_many(self.client, fence, blobs, holdings=holdings, abort=self.abort)
        refs: list[ArtifactRef] = []
        for item, outcome in zip(prepared, outcomes, strict=True):
            ref = item.ref
            if isinstance(outcome, UploadRefused | ToolCallError):
                case.note(f"⚠ artifact {ref.path} left out: the server refused it: {outcome}")
                continue
            if isinstance(outcome, Uploaded):
                case.note(_uploaded(ref, outcome.chunks, outcome.sent_bytes))
            else:
                case.note(
                    f"⚠ artifact {ref.path} not uploaded yet ({outcome}): sent with the result"
                )
            refs.append(ref)
        return refs

    async def _holdings(self, fence: JobFence, sha256s: list[str]) -> BlobHoldings | None:
        """What the workspace lacks of these, asked once for all (None: each upload asks)."""
        try:
            return await have_blobs(self.client, fence, sha256s)
        except (ServerUnavailable, ToolCallError):
            return None


def _other(artifact: Artifact) -> Found:
    """An artifact another stage made (the repo's diff): read where that stage put it."""
    source = artifact.source
    return Found(artifact.path, source.parent, source.name, artifact.media_type)


def _over(size: int, total: int, limits: Limits) -> str | None:
    if size > limits.max_artifact_bytes:
        return f"{size} bytes, over the limit of {limits.max_artifact_bytes} bytes per file"
    if total + size > limits.max_case_artifact_bytes:
        return (
            f"{size} bytes, past the case's limit of {limits.max_case_artifact_bytes} bytes in all"
        )
    return None


def _uploaded(ref: ArtifactRef, chunks: int, sent: int) -> str:
    if chunks == 0:
        return f"artifact {ref.path}: {ref.size} bytes, held by the server already"
    return f"artifact {ref.path}: {ref.size} bytes, {sent} sent in {chunks} chunk(s)"
