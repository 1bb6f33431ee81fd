"""The runner's config file: where it is, what it holds, and writing it so only its owner reads it.

The file holds a bearer token, so it is created with mode 0600 from the start (never written
world-readable and chmod-ed after) and replaced atomically, so a crash cannot leave half a file.
"""

from __future__ import annotations

import ipaddress
import json
import os
import platform
import shutil
import sys
from importlib import metadata
from pathlib import Path
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from runnercli.atomic import replace_file
from runnercli.protocol import is_capability

CONFIG_ENV = "EVERDICT_RUNNER_CONFIG"
SERVER_ENV = "EVERDICT_SERVER"
TOKEN_ENV = "EVERDICT_RUNNER_TOKEN"

# Programs whose presence on PATH a harness may require (`"capabilities": ["claude"]`).
DETECTABLE_PROGRAMS = ("claude", "codex", "docker", "git")
# Capabilities any of several programs gives: a browser by its distributions' names.
DETECTABLE_ANY = {"chromium": ("chromium", "chromium-browser")}


class ConfigError(Exception):
    """The config file exists but cannot be read or written."""


class RunnerConfig(BaseModel):
    """What `pair` stores and `run` reads back. A key it does not know is kept as it is, so
    rewriting the file (`pair`) never erases what a later release, or the member, put there."""

    model_config = ConfigDict(extra="allow")

    server: str | None = None
    token: str | None = None
    runner_id: int | None = None
    label: str | None = None
    owner: str | None = None
    capabilities: list[str] = Field(default_factory=list)
    # Standing trust entries (`NAME`, `WORKSPACE/NAME@VERSION`…) for any server; `allow`
    # and `pair --allow` write to the trust store (`trust.json`) instead.
    allow: list[str] = Field(default_factory=list)
    # Environment variables no harness may set on this machine, besides the protocol's list
    # (a name, or a prefix ending in `*`).
    refused_env: list[str] = Field(default_factory=list)
    # Paired with --insecure: plain http:// to a server that is not on this machine.
    insecure: bool = False
    # Workspace repo names mapped to checkouts here (`python -m runnercli repo add`).
    repos: dict[str, str] = Field(default_factory=dict)
    # RE2 patterns whose matches never leave this machine (replaced by `[redacted]`).
    redact: list[str] = Field(default_factory=list)


def config_path(explicit: str | os.PathLike[str] | None = None) -> Path:
    """Return the config file path: --config, then $EVERDICT_RUNNER_CONFIG, then the XDG default."""
    if explicit:
        return Path(explicit).expanduser()
    if from_env := os.environ.get(CONFIG_ENV):
        return Path(from_env).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base).expanduser() / "everdict" / "runner.json"


def config_load(path: Path) -> RunnerConfig:
    """Read the config file; a missing file is an empty config."""
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return RunnerConfig()
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from exc
    try:
        return RunnerConfig.model_validate(json.loads(raw))
    except (ValueError, ValidationError) as exc:
        raise ConfigError(f"{path} is not a valid runner config: {exc}") from exc


def config_save(path: Path, config: RunnerConfig) -> None:
    """Write the config atomically with mode 0600, creating its directory (0700) if needed."""
    write_private(path, json.dumps(config.model_dump(), indent=2, sort_keys=True) + "\n")


def write_private(path: Path, payload: str) -> None:
    """Replace `path` with `payload` atomically, mode 0600, in a 0700 directory if new."""
    try:
        replace_file(path, payload.encode())
    except OSError as exc:
        raise ConfigError(f"cannot write {path}: {exc.strerror or exc}") from exc


def os_name() -> str:
    """The OS name as a capability: `linux`, `darwin`, `windows`."""
    return platform.system().lower() or sys.platform


def detected_capabilities() -> list[str]:
    """Return what this machine offers: `python`, the OS name, and known programs on PATH."""
    found = ["python", os_name()]
    found += [program for program in DETECTABLE_PROGRAMS if shutil.which(program)]
    found += [name for name, programs in DETECTABLE_ANY.items() if any(map(shutil.which, programs))]
    return [cap for cap in found if is_capability(cap)]


def merge_capabilities(*groups: list[str] | tuple[str, ...]) -> list[str]:
    """Merge capability lists, keeping the first occurrence's order."""
    merged: list[str] = []
    for group in groups:
        merged += [cap for cap in group if cap not in merged]
    return merged


def invalid_capabilities(capabilities: list[str] | tuple[str, ...]) -> list[str]:
    return [cap for cap in capabilities if not is_capability(cap)]


def runnercli_version() -> str:
    try:
        return metadata.version("everdict")
    except metadata.PackageNotFoundError:
        return "0+unknown"


def mask_token(token: str | None) -> str:
    if not token:
        return "(none)"
    return token[:8] + "…" if len(token) > 12 else "rnr_…"


def mcp_url(server: str) -> str:
    """The MCP endpoint for a base URL: `--server` is the site, the CLI appends `/mcp`."""
    base = server.strip().rstrip("/")
    return base if base.endswith("/mcp") else base + "/mcp"


def trust_path(config_file: Path) -> Path:
    """The trust store lives beside the config file it belongs to."""
    return config_file.with_name("trust.json")


def is_loopback(server: str) -> bool:
    """Whether `server` is on this machine (a token sent there never crosses a network)."""
    host = (urlsplit(server).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
