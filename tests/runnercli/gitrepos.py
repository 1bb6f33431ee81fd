"""Real git checkouts for the repo tests, and a byte-exact snapshot of one."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256))
PNG2 = PNG + b"\x00v2"
IDENTITY = ["-c", "user.name=Member", "-c", "user.email=member@example.com"]


def git(repo: Path, *args: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *IDENTITY, *args],
        capture_output=True,
        check=True,
        env={**os.environ, **(env or {})},
    )
    return done.stdout.decode().rstrip()


def commit_all(repo: Path, message: str) -> str:
    git(repo, "add", "--all")
    git(repo, "commit", "--quiet", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def write(root: Path, files: dict[str, str | bytes]) -> None:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)


def make_checkout(path: Path) -> dict[str, str]:
    """A checkout with two commits, then uncommitted work: modified tracked files (one
    binary), a staged change, a staged new file, a deleted tracked file, an untracked file,
    and stale stat data in its index (a touched file `git status` would refresh). Returns
    the commits' SHAs."""
    path.mkdir(parents=True)
    git(path, "init", "--quiet", "--initial-branch=main")
    write(path, {"README.md": "hello\n", "src/app.py": "print(0)\n", "logo.png": PNG})
    first = commit_all(path, "first")
    write(path, {"src/app.py": "print(1)\n", "gone.txt": "to be deleted\n", "same.txt": "x\n"})
    head = commit_all(path, "second")
    write(path, {"src/app.py": "print(2)\n", "README.md": "hello, staged\n", "logo.png": PNG2})
    write(path, {"staged-new.txt": "added, not committed\n"})
    git(path, "add", "README.md", "staged-new.txt")
    (path / "gone.txt").unlink()
    write(path, {"notes.txt": "untracked\n"})
    stale = path / "same.txt"
    os.utime(stale, (stale.stat().st_atime + 100, stale.stat().st_mtime + 100))
    return {"first": first, "head": head}


def snapshot(repo: Path) -> dict[str, object]:
    """Everything of the member's checkout a case must not change, byte for byte."""
    files = {}
    for directory, dirnames, filenames in os.walk(repo):
        if Path(directory) == repo:
            dirnames.remove(".git")
        for name in filenames:
            full = Path(directory) / name
            files[str(full.relative_to(repo))] = (
                hashlib.sha256(full.read_bytes()).hexdigest(),
                full.stat().st_mtime_ns,
            )
    return {
        "files": files,
        "index": hashlib.sha256((repo / ".git" / "index").read_bytes()).hexdigest(),
        "stash": git(repo, "stash", "list"),
        "refs": git(repo, "for-each-ref"),
        "head": git(repo, "rev-parse", "HEAD"),
        # Without optional locks `git status` does not refresh (rewrite) the index itself.
        "status": git(repo, "status", "--porcelain", env={"GIT_OPTIONAL_LOCKS": "0"}),
    }


def worktree_paths(repo: Path) -> list[str]:
    listed = git(repo, "worktree", "list", "--porcelain").splitlines()
    return [line.removeprefix("worktree ") for line in listed if line.startswith("worktree ")][1:]
