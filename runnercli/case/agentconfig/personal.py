"""What of a member's own configuration an agent CLI reads, as digests (never contents).

Per CLI, in its configuration directory: its settings file, its user-level instructions, and
the names of the MCP servers, plugins and hooks configured — what changes its behaviour, not
a file it rewrites at every start (Claude Code's `.claude.json` counts only for the names of
its MCP servers). Each is the first 16 hex digits of a SHA-256, or "" when there is none, so
two results say whether, and where, the configurations they ran with differ.
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from runnercli.protocol.agents import CLAUDE_CODE, AgentCli

DIGEST_CHARS = 16


def _digest(data: bytes | None) -> str:
    return "" if not data else hashlib.sha256(data).hexdigest()[:DIGEST_CHARS]


def _names(names: Iterable[str]) -> str:
    listed = sorted({str(name) for name in names})
    return _digest("\n".join(listed).encode()) if listed else ""


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def _keys(value: Any) -> list[str]:
    return list(value) if isinstance(value, dict) else []


def _json(data: bytes | None) -> dict[str, Any]:
    try:
        parsed = json.loads(data) if data else {}
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def personal_config(agent: AgentCli, directory: Path) -> dict[str, str]:
    """The digests of what the CLI reads of its configuration in `directory`."""
    if agent is CLAUDE_CODE:
        settings = _read(directory / "settings.json")
        parsed = _json(settings)
        servers = _keys(_json(_read(directory / ".claude.json")).get("mcpServers"))
        return {
            "settings": _digest(settings),
            "instructions": _digest(_read(directory / "CLAUDE.md")),
            "hooks": _names(_keys(parsed.get("hooks"))),
            "plugins": _names(_keys(parsed.get("enabledPlugins"))),
            "mcp_servers": _names([*servers, *_keys(parsed.get("mcpServers"))]),
        }
    config = _read(directory / "config.toml")
    try:
        toml = tomllib.loads(config.decode()) if config else {}
    except (ValueError, UnicodeDecodeError):
        toml = {}
    return {
        "settings": _digest(config),
        "instructions": _digest(_read(directory / "AGENTS.md")),
        "hooks": _names(["notify"] if toml.get("notify") else []),
        "mcp_servers": _names(_keys(toml.get("mcp_servers"))),
    }
