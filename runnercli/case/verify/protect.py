"""Protected paths: what the agent changed under them since the start commit, then restored.

The start commit's tree (`git ls-tree`) is compared with the worktree as the file system has
it (walked without following a symbolic link). Files are hashed with git's filters off (`git
hash-object --no-filters`: a clean filter the agent configured changes nothing here), a
symbolic link by its target, as git stores it; a file whose stat data is still what the
worktree's index said before the agent started (`statcache`), and whose entry there is the
start commit's, is not read again. A protected path is `added` (not in the start
commit, and not ignored by the start commit's own ignore rules, so `__pycache__` under an
ignored path flags no honest agent), `modified`, `deleted`, `renamed` (deleted, and its bytes
added under another protected path), `mode` (its executable bit) or `symlink` (it, or a
directory above it, is now a symbolic link). `restore` puts each back from the start commit's
objects — writing the bytes itself, never through a symbolic link or a filter — and removes
what was added.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from runnercli.case.artifacts.globs import Glob, glob_regex
from runnercli.case.repo.git import GitError, git_argv, git_env
from runnercli.case.verify.statcache import Cached, index_path, read_index, unchanged

LINK_MODE = "120000"
EXEC_MODE = "100755"
FILE_MODE = "100644"


@dataclass(frozen=True)
class Change:
    path: str
    change: str
    # Where the bytes of a renamed path went.
    to: str | None = None


@dataclass(frozen=True)
class Snapshot:
    """The worktree's index as it was before the agent started, and when it was written."""

    data: bytes
    mtime: float


@dataclass(frozen=True)
class _Entry:
    mode: str
    sha: str


def _git(worktree: Path, *args: str, data: bytes | None = None) -> bytes:
    done = subprocess.run(
        git_argv(worktree, *args),
        input=data if data is not None else b"",
        capture_output=True,
        env=git_env(),
        check=False,
    )
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GitError(f"git {args[0]} failed: {said[-1] if said else done.returncode}")
    return done.stdout


class Protected:
    """The protected paths of one worktree against its start commit."""

    def __init__(
        self, worktree: Path, start: str, globs: Sequence[str], index: Snapshot | None = None
    ) -> None:
        self.worktree = worktree
        self.start = start
        self.globs = [Glob.of(glob) for glob in globs]
        # One pattern for all (the globs' own translation; a path is short, and this is
        # matched against every file of the repo).
        self.pattern = re.compile("|".join(f"(?:{glob_regex(glob)})" for glob in globs))
        self.tree: dict[str, _Entry] = {}
        self.ignores: list[str] = []
        self.object_format = "sha1"
        self.index = index
        self.infos: dict[str, os.stat_result] = {}

    def matches(self, path: str) -> bool:
        return self.pattern.fullmatch(path) is not None

    def _may_hold(self, directory: tuple[str, ...]) -> bool:
        return any(glob.may_hold(directory) for glob in self.globs)

    def _read_tree(self) -> None:
        listing = _git(self.worktree, "ls-tree", "-r", "-z", "--full-tree", self.start)
        for record in listing.split(b"\0"):
            if not record:
                continue
            meta, _, name = record.partition(b"\t")
            mode, kind, sha = meta.decode().split()
            path = name.decode("utf-8", "surrogateescape")
            if kind != "blob":
                continue  # a submodule is not a file the agent could have changed here
            if path == ".gitignore" or path.endswith("/.gitignore"):
                self.ignores.append(path)
            if self.matches(path):
                self.tree[path] = _Entry(mode, sha)
        self.object_format = (
            _git(self.worktree, "rev-parse", "--show-object-format").decode().strip() or "sha1"
        )

    def _walk(self) -> tuple[dict[str, str], dict[str, str], set[str]]:
        """The protected files here now (path → mode) and symbolic links (path → target),
        and every directory that is a symbolic link now."""
        files: dict[str, str] = {}
        links: dict[str, str] = {}
        linked_dirs: set[str] = set()
        todo: list[tuple[str, tuple[str, ...]]] = [(str(self.worktree), ())]
        while todo:
            top, parts = todo.pop()
            prefix = "/".join(parts) + "/" if parts else ""
            with os.scandir(top) as entries:
                for entry in entries:
                    name = entry.name
                    if name == ".git" and not parts:
                        continue
                    path = prefix + name
                    if entry.is_symlink():
                        if entry.is_dir():
                            linked_dirs.add(path)
                        if self.matches(path):
                            links[path] = os.readlink(entry.path)
                    elif entry.is_dir(follow_symlinks=False):
                        if self._may_hold((*parts, name)):
                            todo.append((entry.path, (*parts, name)))
                    elif self.matches(path):
                        info = entry.stat(follow_symlinks=False)
                        if stat.S_ISREG(info.st_mode):
                            files[path] = EXEC_MODE if info.st_mode & stat.S_IXUSR else FILE_MODE
                            self.infos[path] = info
                        else:
                            files[path] = "other"
        return files, links, linked_dirs

    def _known(self) -> dict[str, str]:
        """The files still as git wrote them before the agent started (by the index copy
        taken then), with the start commit's blob for each."""
        if self.index is None:
            return {}
        cached: dict[str, Cached] = read_index(
            self.index.data, 32 if self.object_format == "sha256" else 20
        )
        known = {}
        for path, info in self.infos.items():
            entry, was = cached.get(path), self.tree.get(path)
            if entry is None or was is None or entry.sha != was.sha:
                continue
            if unchanged(entry, info, self.index.mtime):
                known[path] = was.sha
        return known

    def _hash_files(self, paths: list[str]) -> dict[str, str]:
        if not paths:
            return {}
        data = "".join(f"{path}\n" for path in paths).encode()
        out = _git(self.worktree, "hash-object", "--no-filters", "--stdin-paths", data=data)
        return dict(zip(paths, out.decode().split(), strict=True))

    def _hash_link(self, target: str) -> str:
        body = os.fsencode(target)
        digest = hashlib.sha256() if self.object_format == "sha256" else hashlib.sha1()
        digest.update(b"blob %d\0" % len(body) + body)
        return digest.hexdigest()

    def _ignored(self, paths: list[str]) -> set[str]:
        """Which of `paths` the start commit's ignore rules (and the checkout's own
        info/exclude) ignore."""
        if not paths or not self.ignores:
            return set()
        with tempfile.TemporaryDirectory(prefix="everdict-ignore-") as scratch:
            _git(Path(scratch), "init", "-q")
            blobs = self._blobs([f"{self.start}:{path}" for path in self.ignores])
            for path, body in zip(self.ignores, blobs, strict=True):
                target = Path(scratch, path)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(body)
            exclude = _git(self.worktree, "rev-parse", "--git-common-dir").decode().strip()
            source = Path(exclude if os.path.isabs(exclude) else self.worktree / exclude)
            with contextlib.suppress(OSError):
                shutil.copyfile(source / "info" / "exclude", Path(scratch, ".git/info/exclude"))
            data = b"".join(os.fsencode(path) + b"\0" for path in paths)
            done = subprocess.run(
                git_argv(scratch, "check-ignore", "--no-index", "--stdin", "-z"),
                input=data,
                capture_output=True,
                env=git_env(),
                check=False,
            )
            return {os.fsdecode(p) for p in done.stdout.split(b"\0") if p}

    def _blobs(self, names: Iterable[str]) -> list[bytes]:
        """The bytes of each object named (`<rev>:<path>` or a blob's id)."""
        names = list(names)
        if not names:
            return []
        asked = "".join(f"{name}\n" for name in names).encode()
        out = _git(self.worktree, "cat-file", "--batch", data=asked)
        bodies, at = [], 0
        for name in names:
            end = out.index(b"\n", at)
            header = out[at:end].split()
            if len(header) != 3:
                raise GitError(f"git cat-file: no object {name}")
            size = int(header[2])
            bodies.append(out[end + 1 : end + 1 + size])
            at = end + 1 + size + 1
        return bodies

    def check(self) -> list[Change]:
        """What the agent changed under the protected paths, by path."""
        self._read_tree()
        files, links, linked_dirs = self._walk()
        hashes = self._known()
        hashes.update(
            self._hash_files(
                sorted(p for p, mode in files.items() if mode != "other" and p not in hashes)
            )
        )
        now: dict[str, _Entry] = {
            **{path: _Entry(mode, hashes.get(path, "")) for path, mode in files.items()},
            **{path: _Entry(LINK_MODE, self._hash_link(t)) for path, t in links.items()},
        }
        changes: list[Change] = []
        gone: dict[str, str] = {}  # path → its start blob, for renames
        for path, was in sorted(self.tree.items()):
            entry = now.get(path)
            if entry is None:
                if _under(path, linked_dirs):
                    changes.append(Change(path, "symlink"))
                else:
                    gone[path] = was.sha
            elif entry.mode == LINK_MODE and was.mode != LINK_MODE:
                changes.append(Change(path, "symlink"))
            elif entry.sha != was.sha or entry.mode == "other":
                changes.append(Change(path, "modified"))
            elif entry.mode != was.mode:
                changes.append(Change(path, "mode"))
        new = sorted(path for path in now if path not in self.tree)
        new = [path for path in new if path not in self._ignored(new)]
        by_sha = {sha: path for path, sha in gone.items()}
        for path in new:
            source = by_sha.pop(now[path].sha, None)
            if source is not None:
                del gone[source]
                changes.append(Change(source, "renamed", to=path))
            else:
                changes.append(Change(path, "added"))
        changes.extend(Change(path, "deleted") for path in gone)
        return sorted(changes, key=lambda change: change.path)

    def restore(self, changes: Sequence[Change]) -> None:
        """Put every changed protected path back as the start commit has it."""
        back = [c.path for c in changes if c.change != "added"]
        for change in changes:
            if change.change == "added":
                self._remove(change.path)
            elif change.to is not None:
                self._remove(change.to)
        wanted = [self.tree[path] for path in back]
        for path, entry, body in zip(back, wanted, self._blobs(e.sha for e in wanted), strict=True):
            self._write(path, entry.mode, body)

    def _real_parent(self, path: str) -> Path:
        """The directory `path` goes in, made of real directories (a symbolic link or a
        file standing where one of them should be is removed)."""
        here = self.worktree
        for part in path.split("/")[:-1]:
            here = here / part
            if here.is_symlink() or (here.exists() and not here.is_dir()):
                here.unlink()
            if not here.exists():
                here.mkdir()
        return here

    def _remove(self, path: str) -> None:
        target = self.worktree / path
        for parent in list(reversed(Path(path).parents))[1:]:
            if (self.worktree / parent).is_symlink():
                return  # under a symbolic link: the link itself is dealt with
        if target.is_symlink() or target.is_file():
            target.unlink()
        elif target.is_dir():
            shutil.rmtree(target)

    def _write(self, path: str, mode: str, body: bytes) -> None:
        target = self._real_parent(path) / path.rsplit("/", 1)[-1]
        if target.is_symlink() or target.is_file():
            target.unlink()
        elif target.is_dir():
            shutil.rmtree(target)
        if mode == LINK_MODE:
            os.symlink(os.fsdecode(body), target)
            return
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "wb") as handle:
            handle.write(body)
        os.chmod(target, 0o755 if mode == EXEC_MODE else 0o644)


def _under(path: str, directories: set[str]) -> bool:
    parts = path.split("/")
    return any("/".join(parts[:n]) in directories for n in range(1, len(parts)))


def check_and_restore(
    worktree: Path, start: str, globs: Sequence[str], index: Snapshot | None = None
) -> list[Change]:
    """The protected paths the agent changed, restored."""
    protected = Protected(worktree, start, globs, index)
    changes = protected.check()
    if changes:
        protected.restore(changes)
    return changes


def snapshot_index(worktree: Path) -> Snapshot | None:
    """A copy of the worktree's index as it is now (before the agent starts)."""
    path = index_path(worktree)
    if path is None:
        return None
    try:
        mtime = path.stat().st_mtime
        return Snapshot(path.read_bytes(), mtime)
    except OSError:
        return None
