"""Updates that say how: whether the server knows a newer runner, and the exact command that
installs it the way this one was installed (pipx, uv, pip, or an editable checkout).

The runner never updates itself: it says so, and the member runs the command.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlsplit

PACKAGE = "everdict"

_VERSION = re.compile(
    r"^v?(?P<release>\d+(?:\.\d+)*)"
    r"(?:[-_.]?(?P<pre>a|alpha|b|beta|c|rc|pre|preview)[-_.]?(?P<pre_n>\d*))?"
    r"(?:[-_.]?post[-_.]?(?P<post>\d*))?"
    r"(?:[-_.]?dev[-_.]?(?P<dev>\d*))?(?:\+.*)?$",
    re.IGNORECASE,
)
_PRE_RANK = {"a": 0, "alpha": 0, "b": 1, "beta": 1, "c": 2, "rc": 2, "pre": 2, "preview": 2}


def installed_version() -> str:
    try:
        return metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:
        return "0+unknown"


_Key = tuple[tuple[int, ...], tuple[int, int], int, tuple[int, int]]


def _simple_key(version: str) -> _Key | None:
    """A sort key for the common PEP 440 forms, for when `packaging` is not installed."""
    match = _VERSION.match(version.strip())
    if match is None:
        return None
    release = [int(part) for part in match["release"].split(".")]
    while len(release) > 1 and release[-1] == 0:
        release.pop()
    dev = (0, int(match["dev"] or 0)) if match["dev"] is not None else (1, 0)
    if match["pre"]:
        pre: tuple[int, int] = (_PRE_RANK[match["pre"].lower()], int(match["pre_n"] or 0))
    else:
        # A bare dev release comes before every pre-release of the same version.
        pre = (-1, 0) if match["dev"] is not None and match["post"] is None else (3, 0)
    post = int(match["post"] or 0) if match["post"] is not None else -1
    return (tuple(release), pre, post, dev)


def is_newer(latest: str, current: str) -> bool | None:
    """Whether `latest` is a later version than `current`; None if either cannot be read."""
    try:
        from packaging.version import InvalidVersion, Version
    except ImportError:
        pass
    else:
        try:
            return Version(latest) > Version(current)
        except InvalidVersion:
            return None
    a, b = _simple_key(latest), _simple_key(current)
    if a is None or b is None:
        return None
    return a > b


def _direct_url(dists: Iterable[metadata.Distribution]) -> dict[str, object]:
    for dist in dists:
        text = dist.read_text("direct_url.json")
        if text:
            try:
                found = json.loads(text)
            except ValueError:
                continue
            if isinstance(found, dict):
                return found
    return {}


def _editable_checkout(dists: Iterable[metadata.Distribution]) -> Path | None:
    """The source directory of an editable install (`pip install -e`), if this is one."""
    direct = _direct_url(dists)
    info = direct.get("dir_info")
    if not isinstance(info, dict) or not info.get("editable"):
        return None
    url = urlsplit(str(direct.get("url", "")))
    return Path(unquote(url.path)) if url.scheme == "file" else None


def _pipx_homes(env: Mapping[str, str], home: Path) -> list[Path]:
    homes = [Path(env["PIPX_HOME"])] if env.get("PIPX_HOME") else []
    return [*homes, home / ".local" / "pipx", home / ".local" / "share" / "pipx"]


def _is_pipx(prefix: Path, env: Mapping[str, str], home: Path) -> bool:
    if (prefix / "pipx_metadata.json").exists():
        return True
    return any(prefix.is_relative_to(base / "venvs") for base in _pipx_homes(env, home))


def update_command(
    *,
    prefix: str | None = None,
    executable: str | None = None,
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
    dists: Iterable[metadata.Distribution] | None = None,
) -> str:
    """The command that updates this runner the way it was installed."""
    env = os.environ if env is None else env
    venv = Path(prefix or sys.prefix)
    if dists is None:
        dists = metadata.distributions(name=PACKAGE)
    if (checkout := _editable_checkout(dists)) is not None:
        return f"cd {shlex.quote(str(checkout))} && git pull && make install"
    if _is_pipx(venv, env, home or Path.home()):
        return f"pipx upgrade {PACKAGE}"
    if (venv / "uv-receipt.toml").exists():
        return f"uv tool upgrade {PACKAGE}"
    python = shlex.quote(executable or sys.executable)
    return f"{python} -m pip install --upgrade {PACKAGE}"


@dataclass(frozen=True)
class UpdateAdvice:
    """What `doctor` and the status line say of updates."""

    current: str
    latest: str
    newer: bool
    command: str

    def line(self) -> str:
        if not self.newer:
            return f"everdict {self.current} is the newest the server knows"
        return f"everdict {self.latest} is available (this is {self.current}): {self.command}"


def update_advice(
    latest: str | None, *, current: str | None = None, command: str | None = None
) -> UpdateAdvice | None:
    """Compare the server's `latest_runner_version` with this runner; None if unknown."""
    if not latest:
        return None
    current = current or installed_version()
    newer = is_newer(latest, current)
    if newer is None:
        return None
    return UpdateAdvice(current, latest, newer, command or update_command())


UPGRADE_MESSAGE = (
    "the server needs a newer runner (this one speaks protocol {protocol}) — upgrade it with "
    "`{command}`, then start it again"
)


def upgrade_message(protocol: int) -> str:
    """What a runner told to update says: the command that updates it as it was installed."""
    return UPGRADE_MESSAGE.format(protocol=protocol, command=update_command())
