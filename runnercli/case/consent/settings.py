"""What `run` (or `submit --here`) was told about consent, by its flags and its config: what
may run here, and whether to ask (`--allow-any` is printed loudly at start)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from runnercli.case.consent.trust import Entry

CONSENT_TIMEOUT_S = 600.0


@dataclass
class ConsentSettings:
    """What `run` was told about consent, by its flags and its config."""

    trust_file: Path | None = None
    server: str = ""
    session: list[Entry] = field(default_factory=list)
    standing: list[Entry] = field(default_factory=list)
    allow_any: bool = False
    refused_env: list[str] = field(default_factory=list)
    ask: bool = False
    # Without a terminal: questions wait here for `python -m runnercli allow --pending N`.
    pending_dir: Path | None = None
    timeout_s: float = CONSENT_TIMEOUT_S
    # What the member keeps on this machine for the session (`--no-files`…: "files",
    # "screens", "trace"), and how many `redact` patterns apply to what leaves it: both shown
    # when the member is asked.
    withheld: frozenset[str] = frozenset()
    redact_patterns: int = 0
    # What the member adds to `python -m runnercli allow` for it to reach this runner's trust
    # store and server (`--config PATH`, `--server URL`), when they are not the defaults.
    command_options: str = ""

    def command(self, name: str, *args: str) -> str:
        return " ".join(["python -m runnercli", name, *self.command_options.split(), *args])
