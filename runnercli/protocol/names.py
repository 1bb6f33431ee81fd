"""The names both sides check the same way: repo names, `artifacts` globs, paths in a case.

The server applies these rules when a harness is stored and when a page asks for a file;
the runner applies them again, since a server can lie.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

MAX_REPO_NAME_CHARS = 100
# `OWNER/NAME`, lower case: the name a harness's `repo.name` uses and the runner maps.
REPO_NAME_RE = re.compile(r"[a-z0-9][a-z0-9._-]*/[a-z0-9][a-z0-9._-]*")
REPO_NAME_FORM = "OWNER/NAME (lower case letters, digits, '.', '_' and '-')"
REPO_CAPABILITY_PREFIX = "repo:"

MAX_GLOBS = 32
MAX_GLOB_CHARS = 200
MAX_CASE_PATH_CHARS = 1024
_DRIVE_RE = re.compile(r"^[A-Za-z]:")


class RepoNameError(ValueError):
    """A repo name outside the grammar; the message says what is wrong with it."""


class GlobError(ValueError):
    """An `artifacts` glob that is malformed or could reach outside the case directory."""


class CasePathError(ValueError):
    """A path asked of a case that could reach outside its directory."""


def check_repo_name(name: str) -> str:
    """Return `name` if it is a valid repo name; raise RepoNameError saying why not."""
    problem = _repo_name_problem(name)
    if problem:
        raise RepoNameError(f"repo name {name!r} {problem}; expected {REPO_NAME_FORM}")
    return name


def _repo_name_problem(name: str) -> str | None:
    if not name:
        return "is empty"
    if len(name) > MAX_REPO_NAME_CHARS:
        return f"is longer than {MAX_REPO_NAME_CHARS} characters"
    if any(char.isspace() for char in name):
        return "contains white space"
    if name != name.lower():
        return "must be lower case"
    if ".." in name:
        return "may not contain '..'"
    if name.count("/") != 1:
        return "must have exactly one '/'"
    if not REPO_NAME_RE.fullmatch(name):
        return "has a part that is empty, starts with '.', '_' or '-', or holds other characters"
    return None


def repo_capability(name: str) -> str:
    """The capability a runner that maps `name` has, and a harness using it needs."""
    return REPO_CAPABILITY_PREFIX + name


def check_globs(globs: Sequence[str], what: str = "artifacts") -> list[str]:
    """Return `globs` if every one is acceptable; raise GlobError naming the first that is not
    (`what` is the key they are under: `artifacts`, `protect`)."""
    if isinstance(globs, str) or not isinstance(globs, Sequence):
        raise GlobError(f"{what} must be a list of globs")
    if len(globs) > MAX_GLOBS:
        raise GlobError(f"{what} may list at most {MAX_GLOBS} globs, not {len(globs)}")
    for glob in globs:
        problem = _glob_problem(glob)
        if problem:
            raise GlobError(f"{what} glob {glob!r} {problem}")
    return list(globs)


def _glob_problem(glob: object) -> str | None:
    if not isinstance(glob, str) or not glob:
        return "is not a non-empty string"
    if len(glob) > MAX_GLOB_CHARS:
        return f"is longer than {MAX_GLOB_CHARS} characters"
    if problem := _escape_problem(glob, "globs"):
        return problem
    parts = glob.split("/")
    if "" in parts:
        return "has an empty component ('//' or a trailing '/'): use DIR/** for a directory"
    if any(_class_unclosed(part) for part in parts):
        return "has a '[' without its ']'"
    return None


def _escape_problem(path: str, what: str = "paths") -> str | None:
    """Why `path` could reach outside the case's directory, or None."""
    if "\x00" in path:
        return "contains NUL"
    if path.startswith("/") or _DRIVE_RE.match(path):
        return f"is absolute: {what} are relative to the case's directory"
    if "\\" in path:
        return "contains '\\': separate directories with '/'"
    if ".." in path.split("/"):
        return f"goes up with '..': {what} stay inside the case's directory"
    return None


def _class_unclosed(part: str) -> bool:
    start = part.find("[")
    while start != -1:
        end = part.find("]", start + 2)
        if end == -1:
            return True
        start = part.find("[", end + 1)
    return False


def check_case_path(path: str) -> str:
    """Return a file path asked of a case (`""` or `.` is its directory), normalised
    (`./a//b/` → `a/b`); raise CasePathError for one that could escape it."""
    if len(path) > MAX_CASE_PATH_CHARS:
        raise CasePathError(f"path is longer than {MAX_CASE_PATH_CHARS} characters")
    if problem := _escape_problem(path):
        raise CasePathError(f"path {path!r} {problem}")
    return "/".join(part for part in path.split("/") if part not in ("", "."))
