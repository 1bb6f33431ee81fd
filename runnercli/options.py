"""What `run` (or `submit --here`) was told: the runner's options.

Read by every part of the runner; imports nothing of it but the member's redaction. What it
was told about consent is the consent's own (`runnercli.case.consent.settings`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from runnercli.text.redact import Redactor

SERVICES_IDLE_S = 300.0


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
