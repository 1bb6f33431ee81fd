"""What `run` (or `submit --here`) was told: the runner's options and its consent settings.

Read by every part of the runner; imports nothing of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from runnercli.redact import Redactor
from runnercli.trust import Entry

CONSENT_TIMEOUT_S = 600.0
SERVICES_IDLE_S = 300.0


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


@dataclass
class ServiceSettings:
    """What `run` was told about service harnesses (`--services-idle-s`,
    `--max-service-starts`), and who it is for the labels of what it starts."""

    idle_s: float = SERVICES_IDLE_S
    max_starts: int = 1
    # `everdict.runner` on its containers and records: the paired runner's id.
    runner: str = "local"
    # Where its process services are recorded (beside the config file); none: a scratch one.
    records_dir: Path | None = None


@dataclass
class RunOptions:
    capabilities: list[str]
    # What may run here, and whether to ask (`--allow-any` is printed loudly at start).
    consent: ConsentSettings = field(default_factory=ConsentSettings)
    max_concurrent: int = 1
    wait_ms: int = 25_000
    once: bool = False
    # Where finished cases' results wait for the server's answer (beside the config file).
    spool_dir: Path | None = None
    services: ServiceSettings = field(default_factory=ServiceSettings)
    # The member's checkouts by workspace repo name (`repo add`), read once at start.
    repos: dict[str, str] = field(default_factory=dict)
    # The member's `redact` patterns, applied to everything that leaves the machine.
    redactor: Redactor = field(default_factory=Redactor)
    # What stays on this machine for the session: a page's file requests go unanswered
    # (`--no-files`), screens and the trace are not sent (`--no-screens`, `--no-trace`).
    no_files: bool = False
    no_screens: bool = False
    no_trace: bool = False
    # The laptop (`runnercli.laptop`): no sleep inhibitor with `--allow-sleep`; on battery,
    # "pause" (lease nothing) or "run" (`--on-battery`); the runner's report for `status`.
    allow_sleep: bool = False
    on_battery: str = "pause"
    state_file: Path | None = None

    @property
    def withheld(self) -> frozenset[str]:
        """What the member keeps on this machine: "files", "screens", "trace"."""
        kept = {"files": self.no_files, "screens": self.no_screens, "trace": self.no_trace}
        return frozenset(name for name, withheld in kept.items() if withheld)

    @property
    def slots(self) -> int:
        """Cases run at once: one with `--once`."""
        return 1 if self.once else self.max_concurrent
