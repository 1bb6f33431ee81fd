"""On battery or on AC: what the runner reads before it leases, and a watcher that polls it.

Linux reads `/sys/class/power_supply/*/` (`EVERDICT_POWER_SUPPLY_DIR` or an argument moves
it, for tests): an external supply (`type` Mains, USB…) with `online` 1 means AC; otherwise
a system battery (`type` Battery, not a mouse's: `scope` Device) that is `Discharging`, or
one beside supplies that are all offline, means battery. macOS asks `pmset -g batt`. A
machine with no battery at all (a desktop, a server) is on AC, and so is one whose supply
cannot be read: the runner never stops working on a guess.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

POWER_SUPPLY_ENV = "EVERDICT_POWER_SUPPLY_DIR"
POWER_SUPPLY_DIR = Path("/sys/class/power_supply")
POLL_S = 5.0
ON_BATTERY_REASON = "on battery"

# Supplies that power the machine from outside when `online` is 1.
EXTERNAL_TYPES = frozenset(
    {"Mains", "USB", "USB_C", "USB_PD", "USB_PD_DRP", "USB_DCP", "USB_CDP", "Wireless"}
)


class OnBattery(StrEnum):
    """`--on-battery`: what the runner does while the machine runs on its battery."""

    PAUSE = "pause"
    RUN = "run"


@dataclass(frozen=True)
class PowerState:
    on_battery: bool
    detail: str

    def __str__(self) -> str:
        return self.detail


def pause_reason(policy: OnBattery, state: PowerState) -> str | None:
    """Why the runner leases nothing now under `policy`, or None when it may lease."""
    return ON_BATTERY_REASON if policy is OnBattery.PAUSE and state.on_battery else None


def power_supply_dir(env: Mapping[str, str] | None = None) -> Path | None:
    """The directory set by EVERDICT_POWER_SUPPLY_DIR, if any."""
    env = os.environ if env is None else env
    return Path(env[POWER_SUPPLY_ENV]) if env.get(POWER_SUPPLY_ENV) else None


def _attr(supply: Path, name: str) -> str:
    try:
        return (supply / name).read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return ""


def read_power_supply(root: Path = POWER_SUPPLY_DIR) -> PowerState:
    """Read a Linux power-supply class directory."""
    try:
        supplies = sorted(root.iterdir())
    except OSError:
        return PowerState(False, "AC (power supply unknown)")
    batteries = [
        s for s in supplies if _attr(s, "type") == "Battery" and _attr(s, "scope") != "Device"
    ]
    if not batteries:
        return PowerState(False, "AC (no battery)")
    external = [s for s in supplies if _attr(s, "type") in EXTERNAL_TYPES]
    if any(_attr(s, "online") == "1" for s in external):
        return PowerState(False, "AC")
    statuses = [_attr(b, "status") for b in batteries]
    if "Discharging" in statuses or external:
        return PowerState(True, _battery_detail(batteries))
    return PowerState(False, f"AC (battery {', '.join(filter(None, statuses)) or 'present'})")


def _battery_detail(batteries: list[Path]) -> str:
    levels = [level for b in batteries if (level := _attr(b, "capacity"))]
    return f"battery {', '.join(level + '%' for level in levels)}" if levels else "battery"


def parse_pmset(output: str) -> PowerState:
    """Read `pmset -g batt`: "Now drawing from 'Battery Power'" (or 'UPS Power') is battery."""
    first = output.strip().splitlines()[0] if output.strip() else ""
    if "'Battery Power'" in first or "'UPS Power'" in first:
        level = next((word for word in output.split() if word.rstrip("%;").isdigit()), "")
        return PowerState(True, f"battery {level.rstrip(';')}".strip())
    if "'AC Power'" in first:
        return PowerState(False, "AC")
    return PowerState(False, "AC (power source unknown)")


def read_pmset() -> PowerState:
    try:
        done = subprocess.run(
            ["pmset", "-g", "batt"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return PowerState(False, "AC (pmset did not answer)")
    return parse_pmset(done.stdout)


def power_state(
    *, root: Path | None = None, platform: str | None = None, env: Mapping[str, str] | None = None
) -> PowerState:
    """On battery or AC: `root` (or EVERDICT_POWER_SUPPLY_DIR) is read wherever it is set."""
    root = root or power_supply_dir(env)
    platform = platform or sys.platform
    if root is not None:
        return read_power_supply(root)
    if platform == "darwin":
        return read_pmset()
    if platform.startswith("linux"):
        return read_power_supply(POWER_SUPPLY_DIR)
    return PowerState(False, "AC (power supply unknown)")


OnChange = Callable[[PowerState], Awaitable[None] | None]


class PowerWatcher:
    """Reads the power state every `interval_s` and calls `on_change` when the machine goes
    from AC to battery or back (the first reading counts as a change). `current` is always
    the latest reading."""

    def __init__(
        self,
        on_change: OnChange,
        *,
        read: Callable[[], PowerState] = power_state,
        interval_s: float = POLL_S,
    ) -> None:
        self.on_change = on_change
        self.read = read
        self.interval_s = interval_s
        self.current: PowerState | None = None

    async def check(self) -> bool:
        """Read once (in a thread: `pmset` is a process); True if battery or AC changed."""
        state = await asyncio.to_thread(self.read)
        before, self.current = self.current, state
        if before is not None and before.on_battery == state.on_battery:
            return False
        result = self.on_change(state)
        if inspect.isawaitable(result):
            await result
        return True

    async def run(self) -> None:
        """Poll until cancelled."""
        while True:
            await self.check()
            await asyncio.sleep(self.interval_s)
