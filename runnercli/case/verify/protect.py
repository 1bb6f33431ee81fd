"""Protected paths: what the agent changed under them since the start commit, then restored.

git names the candidates (`gitview`): the files whose stat data is no longer what the index
copy taken before the agent started says, those gone, and what is new (a new directory is
walked here, without following a symbolic link, where a protected path could be). Each
protected candidate is then looked at as the file system has it: a file hashed with git's
filters off (`git hash-object --no-filters`: a clean filter the agent configured changes
nothing here), a symbolic link by its target, as git stores it. A protected path is `added`
(not in the start commit, and not ignored by the start commit's own ignore rules, so
`__pycache__` under an ignored path flags no honest agent), `modified`, `deleted`, `renamed`
(deleted, and its bytes added under another protected path), `mode` (its executable bit) or
`symlink` (it, or a directory above it, is now a symbolic link). `restore` puts each back from
the start commit's objects — writing the bytes itself, never through a symbolic link or a
filter — and removes what was added. Without an index copy, every file of the start commit is
a candidate (hashed). A path a sparse checkout kept off the disk is `added` when the agent put
other bytes there, and removed.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from runnercli.case.artifacts.globs import Glob, glob_regex
from runnercli.case.repo.git import GitError
from runnercli.case.verify.gitview import GitView, parse_diff_files, parse_names
from runnercli.case.verify.restore import EXEC_MODE, FILE_MODE, LINK_MODE, remove, write
from runnercli.case.verify.snapshot import Snapshot, snapshot_index

__all__ = ["Change", "Protected", "Snapshot", "check_and_restore", "snapshot_index"]

NO_MODE = "000000"
GITLINK_MODE = "160000"


@dataclass(frozen=True)
class Change:
    path: str
    change: str
    # Where the bytes of a renamed path went.
    to: str | None = None


@dataclass(frozen=True)
class _Entry:
    mode: str
    sha: str


class Protected:
    """The protected paths of one worktree against its start commit."""

    def __init__(
        self, worktree: Path, start: str, globs: Sequence[str], index: Snapshot | None = None
    ) -> None:
        self.worktree = worktree
        self.start = start
        self.globs = [Glob.of(glob) for glob in globs]
        # One pattern for all (the globs' own translation; a path is short, and this is
        # matched against every candidate git names).
        self.pattern = re.compile("|".join(f"(?:{glob_regex(glob)})" for glob in globs))
        # The start commit's entries of the protected paths git named (the others are as
        # the start commit has them).
        self.tree: dict[str, _Entry] = {}
        # Their start blobs' bytes, by blob id.
        self.bodies: dict[str, bytes] = {}
        self.index = index
        self.absent = index.absent if index is not None else frozenset()

    def matches(self, path: str) -> bool:
        return self.pattern.fullmatch(path) is not None

    def _may_hold(self, directory: tuple[str, ...]) -> bool:
        return any(glob.may_hold(directory) for glob in self.globs)

    def check(self) -> list[Change]:
        """What the agent changed under the protected paths, by path."""
        index = self.index
        view = GitView(
            self.worktree,
            self.start,
            index.data if index is not None else None,
            index.mtime if index is not None else 0.0,
        )
        try:
            return self._check(view)
        finally:
            view.close()

    def _check(self, view: GitView) -> list[Change]:
        files_out, others_out, cached_out, ignores_out = view.run_all(
            [
                (["diff-files", "--raw", "-z", "--no-renames"], None),
                (["ls-files", "-z", "--others", "--directory", "--no-empty-directory"], None),
                (["diff-index", "--cached", "--raw", "-z", "--no-renames", self.start], None),
                (["ls-files", "-s", "-z", "--", ".gitignore", "*/.gitignore"], None),
            ]
        )
        # The copy is the start commit's index; where it is not, the start commit decides.
        at_start = {t.path: t for t in parse_diff_files(cached_out)}
        candidates = {t.path: t for t in parse_diff_files(files_out)}
        candidates.update(at_start)
        self.tree = {
            path: _Entry(t.mode, t.sha)
            for path, t in candidates.items()
            # A submodule is not a file the agent could have changed here.
            if t.mode not in (NO_MODE, GITLINK_MODE) and self.matches(path)
        }
        new = self._new(parse_names(others_out)) | {
            path for path, t in at_start.items() if t.mode == NO_MODE and self.matches(path)
        }
        files, links, linked = self._now(sorted({*self.tree, *new}))
        ignores = [
            (os.fsdecode(name), meta.split()[1].decode())
            for meta, _, name in (r.partition(b"\t") for r in ignores_out.split(b"\0") if r)
        ]
        # At once: the files hashed, and the blobs of the ignore rules and of the candidates
        # (what a restore writes back).
        hashes, blobs = self._hash_and_read(
            view,
            sorted(p for p, mode in files.items() if mode != "other"),
            [sha for _, sha in ignores] + [entry.sha for entry in self.tree.values()],
        )
        rules, starts = blobs[: len(ignores)], blobs[len(ignores) :]
        self.bodies = dict(zip([e.sha for e in self.tree.values()], starts, strict=True))
        now: dict[str, _Entry] = {
            **{path: _Entry(mode, hashes.get(path, "")) for path, mode in files.items()},
            **{path: _Entry(LINK_MODE, self._hash_link(t)) for path, t in links.items()},
        }
        changes: list[Change] = []
        gone: dict[str, str] = {}  # path → its start blob, for renames
        for path, was in sorted(self.tree.items()):
            entry = now.get(path)
            if path in self.absent and path not in linked:
                # Off the disk at the start (outside a sparse checkout): there now, it is added.
                if entry is not None and entry != was:
                    changes.append(Change(path, "added"))
            elif entry is None:
                if path in linked:
                    changes.append(Change(path, "symlink"))
                else:
                    gone[path] = was.sha
            elif entry.mode == LINK_MODE and was.mode != LINK_MODE:
                changes.append(Change(path, "symlink"))
            elif entry.sha != was.sha or entry.mode == "other":
                changes.append(Change(path, "modified"))
            elif entry.mode != was.mode:
                changes.append(Change(path, "mode"))
        added = sorted(path for path in now if path not in self.tree)
        ignored = self._ignored(view, added, list(zip([p for p, _ in ignores], rules, strict=True)))
        by_sha = {sha: path for path, sha in gone.items()}
        for path in (path for path in added if path not in ignored):
            source = by_sha.pop(now[path].sha, None)
            if source is not None:
                del gone[source]
                changes.append(Change(source, "renamed", to=path))
            else:
                changes.append(Change(path, "added"))
        changes.extend(Change(path, "deleted") for path in gone)
        return sorted(changes, key=lambda change: change.path)

    def _new(self, listed: list[str]) -> set[str]:
        """The protected paths git lists as new: a new directory (listed whole) is walked,
        without following a symbolic link, where a protected path could be."""
        new: set[str] = set()
        for name in listed:
            path = name.rstrip("/")
            if path == ".git":
                continue
            if not name.endswith("/"):
                new.update([path] if self.matches(path) else [])
                continue
            todo = [path]
            while todo:
                top = todo.pop()
                if not self._may_hold(tuple(top.split("/"))):
                    continue
                with os.scandir(self.worktree / top) as entries:
                    for entry in entries:
                        inner = f"{top}/{entry.name}"
                        if entry.is_dir(follow_symlinks=False):
                            todo.append(inner)
                        elif self.matches(inner):
                            new.add(inner)
        return new

    def _now(self, paths: list[str]) -> tuple[dict[str, str], dict[str, str], set[str]]:
        """Of `paths`: the files here now (path → mode), the symbolic links (path → target),
        and those under a directory that is a symbolic link now."""
        files: dict[str, str] = {}
        links: dict[str, str] = {}
        linked: set[str] = set()
        for path in paths:
            parts = path.split("/")
            if any(
                os.path.islink(self.worktree.joinpath(*parts[:n])) for n in range(1, len(parts))
            ):
                linked.add(path)
                continue
            full = self.worktree / path
            try:
                info = os.lstat(full)
            except (FileNotFoundError, NotADirectoryError):
                continue
            if stat.S_ISLNK(info.st_mode):
                links[path] = os.readlink(full)
            elif stat.S_ISREG(info.st_mode):
                files[path] = EXEC_MODE if info.st_mode & stat.S_IXUSR else FILE_MODE
            elif not stat.S_ISDIR(info.st_mode):
                files[path] = "other"
        return files, links, linked

    def _hash_and_read(
        self, view: GitView, paths: list[str], shas: list[str]
    ) -> tuple[dict[str, str], list[bytes]]:
        commands: list[tuple[Sequence[str], bytes | None]] = []
        if paths:
            data = "".join(f"{path}\n" for path in paths).encode()
            commands.append((["hash-object", "--no-filters", "--stdin-paths"], data))
        if shas:
            commands.append((["cat-file", "--batch"], "".join(f"{sha}\n" for sha in shas).encode()))
        outs = view.run_all(commands)
        hashed = outs.pop(0).decode().split() if paths else []
        return dict(zip(paths, hashed, strict=True)), _bodies(outs[0], shas) if shas else []

    def _hash_link(self, target: str) -> str:
        body = os.fsencode(target)
        digest = hashlib.sha256() if len(self.start) == 64 else hashlib.sha1()
        digest.update(b"blob %d\0" % len(body) + body)
        return digest.hexdigest()

    def _ignored(
        self, view: GitView, paths: list[str], ignores: list[tuple[str, bytes]]
    ) -> set[str]:
        """Which of `paths` the start commit's ignore rules (`ignores`: each `.gitignore`
        with its bytes) and the checkout's own info/exclude ignore."""
        if not paths or not ignores:
            return set()
        rules = Path(view.scratch.name, "rules")
        for path, body in ignores:
            target = rules / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(body)
        exclude = view.common / "info" / "exclude"
        data = b"".join(os.fsencode(path) + b"\0" for path in paths)
        done = subprocess.run(
            view.argv(
                ["check-ignore", "--no-index", "--stdin", "-z"],
                ["-c", f"core.excludesFile={exclude}"],
                where=rules,
            ),
            input=data,
            close_fds=False,
            capture_output=True,
            env={**view.env(), "GIT_WORK_TREE": str(rules)},
            check=False,
        )
        return {os.fsdecode(p) for p in done.stdout.split(b"\0") if p}

    def restore(self, changes: Sequence[Change]) -> None:
        """Put every changed protected path back as the start commit has it."""
        back = [c.path for c in changes if c.change != "added"]
        for change in changes:
            if change.change == "added":
                remove(self.worktree, change.path)
            elif change.to is not None:
                remove(self.worktree, change.to)
        wanted = [self.tree[path] for path in back]
        for path, entry in zip(back, wanted, strict=True):
            write(self.worktree, path, entry.mode, self.bodies[entry.sha])


def _bodies(out: bytes, names: Sequence[str]) -> list[bytes]:
    """The bytes of each object `git cat-file --batch` was asked for, in order."""
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


def check_and_restore(
    worktree: Path, start: str, globs: Sequence[str], index: Snapshot | None = None
) -> list[Change]:
    """The protected paths the agent changed, restored."""
    protected = Protected(worktree, start, globs, index)
    changes = protected.check()
    if changes:
        protected.restore(changes)
    return changes
