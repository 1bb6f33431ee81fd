"""What every topology of one runner shares: the Docker engine, the records of its processes,
who it is (labels), the bound on starts, the repo worktrees and the member's repo mapping."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from runnercli.case.repo import Worktrees
from runnercli.case.services.engine import Engine
from runnercli.case.services.records import Records, owner_label

# The prefix of the directories made for version-scoped process services (and the worktrees
# in them), removed by the next `run` when a killed runner left them.
SERVICE_DIR_PREFIX = "everdict-service-"


@dataclass
class Runtime:
    records: Records
    runner: str = "local"
    max_starts: int = 1
    repos: dict[str, str] = field(default_factory=dict)
    say: Callable[[str], None] = lambda message: None
    engine: Engine = field(default_factory=Engine)
    worktrees: Worktrees = field(default_factory=Worktrees)
    owner: str = field(default_factory=owner_label)
    tmp_root: Path = field(default_factory=lambda: Path(tempfile.gettempdir()))

    def __post_init__(self) -> None:
        self.starts = asyncio.Semaphore(self.max_starts)
        if self.engine.say is not self.say:
            self.engine.say = self.say
