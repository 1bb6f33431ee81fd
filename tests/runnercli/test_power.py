"""On battery or AC: a power-supply directory laid out as Linux's /sys/class/power_supply,
flipped between battery and AC under a watcher; `pmset -g batt` as macOS prints it."""

from __future__ import annotations

import asyncio
from pathlib import Path

from runnercli.laptop.power import (
    OnBattery,
    PowerState,
    PowerWatcher,
    parse_pmset,
    pause_reason,
    power_state,
    read_power_supply,
)


def supply(root: Path, name: str, **attributes: str) -> Path:
    directory = root / name
    directory.mkdir(parents=True, exist_ok=True)
    for attribute, value in attributes.items():
        (directory / attribute).write_text(value + "\n")
    return directory


def laptop(root: Path, *, on_ac: bool) -> None:
    supply(root, "AC", type="Mains", online="1" if on_ac else "0")
    status = "Charging" if on_ac else "Discharging"
    supply(root, "BAT0", type="Battery", status=status, capacity="57")


def test_a_laptop_flips_between_battery_and_ac_under_the_watcher(tmp_path: Path) -> None:
    root = tmp_path / "power_supply"
    laptop(root, on_ac=True)
    seen: list[PowerState] = []
    watcher = PowerWatcher(seen.append, read=lambda: power_state(root=root))

    async def scenario() -> list[bool]:
        changed = [await watcher.check()]
        laptop(root, on_ac=False)
        changed += [await watcher.check(), await watcher.check()]
        laptop(root, on_ac=True)
        changed.append(await watcher.check())
        return changed

    assert asyncio.run(scenario()) == [True, True, False, True]
    assert seen == [
        PowerState(False, "AC"),
        PowerState(True, "battery 57%"),
        PowerState(False, "AC"),
    ]


def test_the_watcher_polls_on_its_own(tmp_path: Path) -> None:
    root = tmp_path / "power_supply"
    laptop(root, on_ac=True)
    seen: list[bool] = []

    async def on_change(state: PowerState) -> None:
        seen.append(state.on_battery)

    async def scenario() -> None:
        watcher = PowerWatcher(on_change, read=lambda: read_power_supply(root), interval_s=0.05)
        task = asyncio.create_task(watcher.run())
        await asyncio.sleep(0.2)
        laptop(root, on_ac=False)
        await asyncio.sleep(0.3)
        task.cancel()

    asyncio.run(scenario())
    assert seen == [False, True]


def test_the_directory_comes_from_the_environment(tmp_path: Path) -> None:
    laptop(tmp_path, on_ac=False)
    env = {"EVERDICT_POWER_SUPPLY_DIR": str(tmp_path)}
    assert power_state(env=env, platform="darwin").on_battery


def test_no_battery_at_all_is_ac(tmp_path: Path) -> None:
    assert read_power_supply(tmp_path) == PowerState(False, "AC (no battery)")
    supply(tmp_path, "ACAD", type="Mains", online="0")
    assert not read_power_supply(tmp_path).on_battery
    assert not read_power_supply(tmp_path / "missing").on_battery


def test_a_mouse_battery_is_not_the_machines(tmp_path: Path) -> None:
    supply(tmp_path, "hid-mouse-battery", type="Battery", scope="Device", status="Discharging")
    assert read_power_supply(tmp_path) == PowerState(False, "AC (no battery)")


def test_a_battery_beside_offline_supplies_is_battery_even_if_it_says_otherwise(
    tmp_path: Path,
) -> None:
    supply(tmp_path, "BAT1", type="Battery", status="Not charging")
    assert read_power_supply(tmp_path) == PowerState(False, "AC (battery Not charging)")
    supply(tmp_path, "ucsi-source-psy-USBC000:001", type="USB", online="0")
    assert read_power_supply(tmp_path) == PowerState(True, "battery")
    supply(tmp_path, "ucsi-source-psy-USBC000:001", type="USB", online="1")
    assert read_power_supply(tmp_path) == PowerState(False, "AC")


def test_pmset_says_where_a_mac_draws_from() -> None:
    battery = (
        "Now drawing from 'Battery Power'\n"
        " -InternalBattery-0 (id=4653155)\t83%; discharging; 5:12 remaining present: true\n"
    )
    assert parse_pmset(battery) == PowerState(True, "battery 83%")
    ac = (
        "Now drawing from 'AC Power'\n"
        " -InternalBattery-0 (id=4653155)\t100%; charged; 0:00 remaining present: true\n"
    )
    assert parse_pmset(ac) == PowerState(False, "AC")
    assert parse_pmset("Now drawing from 'AC Power'\n") == PowerState(False, "AC")
    assert parse_pmset("") == PowerState(False, "AC (power source unknown)")


def test_the_policy_pauses_only_on_battery() -> None:
    battery, ac = PowerState(True, "battery"), PowerState(False, "AC")
    assert pause_reason(OnBattery.PAUSE, battery) == "on battery"
    assert pause_reason(OnBattery.PAUSE, ac) is None
    assert pause_reason(OnBattery.RUN, battery) is None
    assert [policy.value for policy in OnBattery] == ["pause", "run"]
