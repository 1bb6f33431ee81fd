"""The member's trust store: which harnesses this machine may run, per server.

`trust.json` lives beside the runner's config (0600, replaced atomically, like the config).
For each server URL it keeps the entries the member allowed — `NAME` or `NAME@VERSION` (any
workspace), `WORKSPACE/NAME` (every version) or `WORKSPACE/NAME@VERSION` — and the digest
each harness version had the first time it ran here (trust on first use). A version is
immutable on the server, so the same version arriving with another digest means the server
lies, and it is refused.

The store is read afresh for every decision, so an `allow` typed in another terminal counts
for the next case at once; a write happens under a lock file, so two runners sharing the
store never lose each other's entries.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from runnercli.config import ConfigError, write_private
from runnercli.protocol import CaseJob

try:
    import fcntl
except ImportError:  # Windows: one runner per store, no lock needed
    fcntl = None  # type: ignore[assignment]

ENTRY_RE = re.compile(
    r"(?:(?P<workspace>[A-Za-z0-9_-]{1,50})/)?"
    r"(?P<name>[A-Za-z0-9][A-Za-z0-9._-]{0,99})"
    r"(?:@v?(?P<version>[1-9][0-9]{0,8}))?"
)
ENTRY_FORMS = "NAME, NAME@VERSION, WORKSPACE/NAME or WORKSPACE/NAME@VERSION"


class TrustError(Exception):
    """The trust store cannot be read or written, or an entry is malformed."""


def server_key(server: str) -> str:
    """The URL a server's entries are kept under: scheme and host lowercased, no `/mcp`."""
    parts = urlsplit(server.strip())
    path = parts.path.rstrip("/").removesuffix("/mcp").rstrip("/")
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}{path}"


@dataclass(frozen=True)
class HarnessId:
    """One version of one workspace's harness: what a job asks to run."""

    workspace: str
    name: str
    version: int

    @classmethod
    def of(cls, job: CaseJob) -> HarnessId:
        return cls(job.workspace, job.harness.name, job.harness.version)

    def __str__(self) -> str:
        return f"{self.workspace}/{self.name}@{self.version}"

    @property
    def valid(self) -> bool:
        """Whether it reads back as an entry (the server's own naming rules)."""
        return ENTRY_RE.fullmatch(str(self)) is not None


@dataclass(frozen=True)
class Entry:
    """What the member allowed: a name, maybe a workspace, maybe a version."""

    workspace: str | None
    name: str
    version: int | None

    @classmethod
    def parse(cls, text: str) -> Entry:
        match = ENTRY_RE.fullmatch(text.strip())
        if match is None:
            raise TrustError(f"{text!r} is not {ENTRY_FORMS}")
        version = match["version"]
        return cls(match["workspace"], match["name"], int(version) if version else None)

    @classmethod
    def exact(cls, harness: HarnessId) -> Entry:
        return cls(harness.workspace, harness.name, harness.version)

    def __str__(self) -> str:
        text = f"{self.workspace}/{self.name}" if self.workspace else self.name
        return f"{text}@{self.version}" if self.version is not None else text

    def covers(self, harness: HarnessId) -> bool:
        return (
            self.name == harness.name
            and self.workspace in (None, harness.workspace)
            and self.version in (None, harness.version)
        )

    def covers_pin(self, pinned: str) -> bool:
        """Whether a pin (`WORKSPACE/NAME@VERSION`) is one this entry allowed."""
        try:
            harness = Entry.parse(pinned)
        except TrustError:
            return False
        if harness.workspace is None or harness.version is None:
            return False
        return self.covers(HarnessId(harness.workspace, harness.name, harness.version))


def parse_entries(texts: list[str] | tuple[str, ...]) -> list[Entry]:
    return [Entry.parse(text) for text in texts]


class ServerTrust(BaseModel):
    """One server's entries and pinned digests (`WORKSPACE/NAME@VERSION` → SHA-256)."""

    model_config = ConfigDict(extra="ignore")

    allow: list[str] = Field(default_factory=list)
    pins: dict[str, str] = Field(default_factory=dict)

    def entries(self) -> list[Entry]:
        return parse_entries(self.allow)


class TrustFile(BaseModel):
    model_config = ConfigDict(extra="ignore")

    version: int = 1
    servers: dict[str, ServerTrust] = Field(default_factory=dict)


class TrustStore:
    """One server's part of `trust.json`."""

    def __init__(self, path: Path, server: str) -> None:
        self.path = path
        self.server = server_key(server)
        # The file as last read, with what identifies that version of it on disk.
        self._cached: tuple[tuple[int, int, int], TrustFile] | None = None

    def read(self) -> ServerTrust:
        """This server's entries and pins as the file holds them now (read only)."""
        return self._load().servers.get(self.server, ServerTrust())

    def read_all(self) -> dict[str, ServerTrust]:
        return self._load().servers

    def add(self, entry: Entry) -> bool:
        """Allow `entry`; False when it was allowed already."""
        with self._editing() as trust:
            if str(entry) in trust.allow:
                return False
            trust.allow.append(str(entry))
            return True

    def remove(self, entry: Entry) -> tuple[bool, list[str]]:
        """Forget `entry` and the digests pinned under it: (whether it was there, pins dropped)."""
        with self._editing() as trust:
            present = str(entry) in trust.allow
            trust.allow = [text for text in trust.allow if text != str(entry)]
            dropped = sorted(pin for pin in trust.pins if entry.covers_pin(pin))
            for pin in dropped:
                del trust.pins[pin]
            return present, dropped

    def pin(self, harness: HarnessId, digest: str) -> str:
        """Pin `harness` to `digest` unless it is pinned already; return the pinned digest."""
        with self._editing() as trust:
            return trust.pins.setdefault(str(harness), digest)

    def _load(self) -> TrustFile:
        """The file as it is now, not to be changed by the caller: parsed again only when it
        changed on disk (every write replaces it, so a new inode or mtime says so)."""
        try:
            info = self.path.stat()
            version = (info.st_ino, info.st_mtime_ns, info.st_size)
            if self._cached is not None and self._cached[0] == version:
                return self._cached[1]
            raw = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return TrustFile()
        except OSError as exc:
            raise TrustError(f"cannot read {self.path}: {exc.strerror}") from exc
        try:
            loaded = TrustFile.model_validate(json.loads(raw))
            for trust in loaded.servers.values():
                trust.entries()
        except (ValueError, ValidationError, TrustError) as exc:
            raise TrustError(f"{self.path} is not a valid trust store: {exc}") from exc
        self._cached = (version, loaded)
        return loaded

    @contextlib.contextmanager
    def _editing(self) -> Iterator[ServerTrust]:
        with self._locked():
            loaded = self._load().model_copy(deep=True)
            trust = loaded.servers.setdefault(self.server, ServerTrust())
            yield trust
            payload = json.dumps(loaded.model_dump(), indent=2, sort_keys=True) + "\n"
            try:
                write_private(self.path, payload)
            except ConfigError as exc:
                raise TrustError(str(exc)) from exc

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        if fcntl is None:
            yield
            return
        lock_path = self.path.with_name(f".{self.path.name}.lock")
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise TrustError(f"cannot lock {lock_path}: {exc.strerror}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)
