"""`service install [--dry-run] | uninstall | status | logs`: the unit systemd reads, the agent
launchd reads, and the round trip into a temporary home.

The unit is checked by systemd's own `systemd-analyze --user verify` (marked `systemd`: CI sets
`REQUIRE_SYSTEMD`, so there it fails rather than skips without it). Where these machines
have no user service manager, the service programs (`systemctl`, `journalctl`, `launchctl`)
are small scripts on a PATH of the test's own that record how they were called: that is the
OS boundary, never the project's code.
"""

from __future__ import annotations

import json
import os
import plistlib
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from runnercli.commands.login_service import service_group
from runnercli.login_service import (
    Backend,
    Host,
    LaunchdAgent,
    LoginServiceError,
    ServicePaths,
    SystemdUser,
    login_service_spec,
    render_systemd_unit,
)
from runnercli.login_service.units import UNIT_NAME
from tests.required import systemd_analyze

# A config path systemd must be told about with care: spaces, a specifier, a variable.
ODD_DIR = "my runner $HOME %h"


def verify(unit: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """`systemd-analyze --user verify` of `unit`, with a runtime directory of its own (a test
    calling it is marked `systemd`)."""
    analyze = systemd_analyze()
    if analyze is None:
        pytest.fail("systemd-analyze is absent: a test that verifies a unit is marked `systemd`")
    where = tmp_path / "verify"
    where.mkdir(parents=True)
    (where / UNIT_NAME).write_text(unit)
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime), "HOME": str(tmp_path)}
    return subprocess.run(
        [analyze, "--user", "verify", str(where / UNIT_NAME)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def paired_config(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    config = directory / "runner.json"
    config.write_text(json.dumps({"server": "http://127.0.0.1:8000", "token": "rnr_" + "x" * 20}))
    return config


def fake_program(bin_dir: Path, name: str, body: str) -> None:
    """A shell script standing in for a service program; it appends its argv to calls.log."""
    bin_dir.mkdir(exist_ok=True)
    path = bin_dir / name
    record = bin_dir / "calls.log"
    path.write_text(f'#!/bin/sh\necho "{name} $*" >> "{record}"\n{body}\n')
    path.chmod(0o755)


def calls(bin_dir: Path) -> list[str]:
    log = bin_dir / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


def invoke(
    make: Callable[[], Backend], home: Path, *args: str, hello: Callable[[Path], str] | None = None
) -> Result:
    env = {"HOME": str(home), "XDG_CONFIG_HOME": None, "EVERDICT_RUNNER_CONFIG": None}
    return CliRunner().invoke(service_group(hello, backend=make), list(args), env=env)


def systemd_on(bin_dir: Path) -> Callable[[], Backend]:
    return lambda: SystemdUser(ServicePaths.from_env(), Host(path=str(bin_dir)))


def dry_run_body(output: str) -> str:
    """What `--dry-run` prints between its `# …` header and its `# then: …` footer."""
    lines = output.splitlines()
    assert lines[0].startswith("# ") and lines[-1].startswith("# then: ")
    return "\n".join(lines[1:-1]) + "\n"


@pytest.mark.systemd
def test_the_dry_run_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    config = paired_config(tmp_path / ODD_DIR)
    done = invoke(
        systemd_on(tmp_path / "bin"), tmp_path, "install", "--dry-run", "--config", str(config)
    )
    assert done.exit_code == 0, done.output
    assert done.output.startswith(
        f"# systemd user unit, would be written to {tmp_path}/.config/systemd/user/{UNIT_NAME}"
    )
    unit = dry_run_body(done.output)
    checked = verify(unit, tmp_path)
    assert (checked.returncode, checked.stderr) == (0, ""), checked.stderr
    assert f'--config "{tmp_path}/my runner $$HOME %%h/runner.json" --service' in unit
    for line in (
        "Restart=on-failure",
        "RestartPreventExitStatus=3 4",
        "KillSignal=SIGTERM",
        "KillMode=mixed",
        "TimeoutStopSec=120",
        "WantedBy=default.target",
        "Environment=PYTHONUNBUFFERED=1",
    ):
        assert line in unit.splitlines()
    assert not (tmp_path / ".config").exists(), "a dry run writes nothing"


@pytest.mark.systemd
def test_a_program_path_with_spaces_and_specifiers_is_quoted_so_systemd_finds_it(
    tmp_path: Path,
) -> None:
    odd = tmp_path / "tools $PATH %n"
    odd.mkdir()
    (odd / "python").symlink_to(sys.executable)
    spec = login_service_spec(tmp_path / "runner.json", python=str(odd / "python"), env={})
    unit = render_systemd_unit(spec)
    assert f'ExecStart="{tmp_path}/tools $PATH %%n/python" -m runnercli run' in unit
    checked = verify(unit, tmp_path)
    # verify checks that the program named by ExecStart exists: it read the path back whole.
    assert (checked.returncode, checked.stderr) == (0, ""), checked.stderr
    broken = verify(unit.replace("%%n/python", "%n/python"), tmp_path / "again")
    assert broken.returncode != 0


def test_a_program_path_systemd_cannot_name_is_refused(tmp_path: Path) -> None:
    spec = login_service_spec(tmp_path / "runner.json", python='/opt/my "py"/python', env={})
    with pytest.raises(LoginServiceError, match="quotes, backslashes"):
        render_systemd_unit(spec)


def test_the_unit_carries_the_members_path_and_nothing_secret(tmp_path: Path) -> None:
    env = {"PATH": "/home/m/.local/bin:/usr/bin", "EVERDICT_RUNNER_TOKEN": "rnr_secret"}
    unit = render_systemd_unit(login_service_spec(tmp_path / "runner.json", env=env))
    assert "Environment=PATH=/home/m/.local/bin:/usr/bin" in unit.splitlines()
    assert "rnr_secret" not in unit


def test_the_launchd_agent_parses_back_with_plistlib(tmp_path: Path) -> None:
    config = paired_config(tmp_path / ODD_DIR)
    agent = lambda: LaunchdAgent(ServicePaths.from_env(), Host(path=str(tmp_path / "bin")), 501)  # noqa: E731
    done = invoke(agent, tmp_path, "install", "--dry-run", "--config", str(config))
    assert done.exit_code == 0, done.output
    plist_path = tmp_path / "Library/LaunchAgents/dev.everdict.runner.plist"
    assert done.output.startswith(f"# launchd agent, would be written to {plist_path}")
    agent_spec = plistlib.loads(dry_run_body(done.output).encode())
    assert agent_spec["Label"] == "dev.everdict.runner"
    assert agent_spec["ProgramArguments"] == [
        os.path.abspath(sys.executable), "-m", "runnercli", "run", "--config", str(config),
        "--service",
    ]  # fmt: skip
    assert agent_spec["KeepAlive"] == {"SuccessfulExit": False}
    assert agent_spec["RunAtLoad"] is True
    log = str(tmp_path / "Library/Logs/everdict/runner.log")
    assert agent_spec["StandardOutPath"] == agent_spec["StandardErrorPath"] == log
    assert agent_spec["EnvironmentVariables"]["PYTHONUNBUFFERED"] == "1"
    assert "# then: launchctl enable gui/501/dev.everdict.runner; launchctl bootstrap gui/501 " in (
        done.output
    )
    assert not plist_path.exists()


def test_install_and_uninstall_round_trip_where_no_user_manager_answers(tmp_path: Path) -> None:
    home, bin_dir = tmp_path / "home", tmp_path / "bin"
    fake_program(bin_dir, "systemctl", 'echo "Failed to connect to bus" >&2; exit 1')
    config = paired_config(home / ".config/everdict")
    dry = invoke(systemd_on(bin_dir), home, "install", "--dry-run", "--config", str(config))

    done = invoke(systemd_on(bin_dir), home, "install", "--config", str(config))
    assert done.exit_code == 0, done.output
    unit = home / ".config/systemd/user" / UNIT_NAME
    assert unit.read_text() == dry_run_body(dry.output)
    assert stat.S_IMODE(unit.stat().st_mode) == 0o644
    assert "no user service manager answers here" in done.output
    assert "    systemctl --user daemon-reload\n" in done.output
    assert f"    systemctl --user enable --now {UNIT_NAME}\n" in done.output
    assert "loginctl enable-linger" in done.output
    assert calls(bin_dir) == ["systemctl --user show-environment"], "nothing enabled"

    status = invoke(systemd_on(bin_dir), home, "status", "--config", str(config))
    assert f"service:  systemd user unit {unit}" in status.output
    assert "state:    unknown: no user service manager answers" in status.output
    assert "runner:   not running (no report)" in status.output

    removed = invoke(systemd_on(bin_dir), home, "uninstall")
    assert removed.exit_code == 0 and f"✓ removed {unit}" in removed.output
    assert not unit.exists()
    again = invoke(systemd_on(bin_dir), home, "uninstall")
    assert again.exit_code == 0 and "nothing to remove" in again.output
    after = invoke(systemd_on(bin_dir), home, "status", "--config", str(config))
    assert f"not installed ({unit})" in after.output


def test_xdg_config_home_is_where_the_unit_goes(tmp_path: Path) -> None:
    paths = ServicePaths.from_env({"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "x")})
    assert paths.systemd_unit == tmp_path / "x/systemd/user" / UNIT_NAME
    relative = ServicePaths.from_env({"HOME": str(tmp_path), "XDG_CONFIG_HOME": "x"})
    assert relative.systemd_unit == tmp_path / ".config/systemd/user" / UNIT_NAME


SYSTEMCTL_UP = """case "$*" in
  "--user is-active everdict-runner.service") echo active ;;
esac
exit 0"""


def test_where_the_user_manager_answers_install_enables_and_starts_it(tmp_path: Path) -> None:
    home, bin_dir = tmp_path / "home", tmp_path / "bin"
    fake_program(bin_dir, "systemctl", SYSTEMCTL_UP)
    fake_program(bin_dir, "journalctl", 'echo "2030-01-01T00:00:00 laptop runner: status: idle"')
    fake_program(bin_dir, "loginctl", "echo no")
    config = paired_config(home / ".config/everdict")

    done = invoke(systemd_on(bin_dir), home, "install", "--config", str(config))
    assert done.exit_code == 0, done.output
    assert "✓ enabled and started: it starts again at every login" in done.output
    user = next(line for line in calls(bin_dir) if line.startswith("loginctl")).split()[2]
    assert f"loginctl enable-linger {user}" in done.output
    assert [line for line in calls(bin_dir) if "show-environment" not in line] == [
        "systemctl --user daemon-reload",
        f"systemctl --user enable --now {UNIT_NAME}",
        f"loginctl show-user {user} --property=Linger --value",
    ]

    status = invoke(
        systemd_on(bin_dir), home, "status", "--config", str(config),
        hello=lambda path: f"runner 7 “laptop”, online (asked with {path.name})",
    )  # fmt: skip
    assert "state:    active" in status.output
    assert "server:   runner 7 “laptop”, online (asked with runner.json)" in status.output
    assert "  2030-01-01T00:00:00 laptop runner: status: idle" in status.output
    assert f"journalctl --user -u {UNIT_NAME} -o short-iso -n 20 --no-pager" in calls(bin_dir)

    (bin_dir / "calls.log").unlink()
    assert invoke(systemd_on(bin_dir), home, "uninstall").exit_code == 0
    assert [line for line in calls(bin_dir) if "show-environment" not in line] == [
        f"systemctl --user disable --now {UNIT_NAME}",
        "systemctl --user daemon-reload",
    ]


def test_a_manager_refusing_to_enable_it_fails_the_install_with_its_reason(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    refuse = (
        'case "$*" in *enable*) echo "Failed to enable unit: Access denied" >&2; exit 1 ;; esac'
    )
    fake_program(bin_dir, "systemctl", refuse)
    config = paired_config(tmp_path / "cfg")
    done = invoke(systemd_on(bin_dir), tmp_path, "install", "--config", str(config))
    assert done.exit_code == 1
    assert (
        f"✗ systemctl --user enable --now {UNIT_NAME}: Failed to enable unit: Access denied"
        in done.output
    )
    assert "enabled and started" not in done.output


def test_a_failing_hello_is_a_line_of_status_not_a_crash(tmp_path: Path) -> None:
    def unreachable(path: Path) -> str:
        raise ConnectionError("server unreachable")

    done = invoke(systemd_on(tmp_path / "bin"), tmp_path, "status", hello=unreachable)
    assert done.exit_code == 0, done.output
    assert "server:   cannot ask: server unreachable" in done.output


LAUNCHCTL_UP = """case "$1" in
  print) [ "$2" = gui/501 ] && exit 0
         if [ -f "$(dirname "$0")/loaded" ]; then
           printf 'gui/501/dev.everdict.runner = {\\n\\tstate = running\\n\\tpid = 4242\\n}\\n'
           exit 0
         fi
         exit 113 ;;
  bootstrap) touch "$(dirname "$0")/loaded" ;;
  bootout) rm -f "$(dirname "$0")/loaded" ;;
esac
exit 0"""


def test_the_launchd_agent_round_trip_bootstraps_and_boots_out(tmp_path: Path) -> None:
    home, bin_dir = tmp_path / "home", tmp_path / "bin"
    fake_program(bin_dir, "launchctl", LAUNCHCTL_UP)
    config = paired_config(home / ".config/everdict")
    agent = lambda: LaunchdAgent(ServicePaths.from_env(), Host(path=str(bin_dir)), 501)  # noqa: E731

    done = invoke(agent, home, "install", "--config", str(config))
    assert done.exit_code == 0, done.output
    plist = home / "Library/LaunchAgents/dev.everdict.runner.plist"
    assert plistlib.loads(plist.read_bytes())["Label"] == "dev.everdict.runner"
    assert (home / "Library/Logs/everdict").is_dir()
    assert f"launchctl bootstrap gui/501 {plist}" in calls(bin_dir)

    (home / "Library/Logs/everdict/runner.log").write_text(
        "".join(f"line {i}\n" for i in range(30))
    )
    status = invoke(agent, home, "status", "--config", str(config))
    assert "state:    running (pid 4242)" in status.output
    assert "  line 29" in status.output and "  line 9\n" not in status.output
    logs = invoke(agent, home, "logs", "-n", "2")
    assert logs.output == "line 28\nline 29\n"

    assert invoke(agent, home, "uninstall").exit_code == 0
    assert "launchctl bootout gui/501/dev.everdict.runner" in calls(bin_dir)
    assert not plist.exists()


def test_install_refuses_a_config_that_is_not_paired(tmp_path: Path) -> None:
    config = tmp_path / "runner.json"
    done = invoke(systemd_on(tmp_path / "bin"), tmp_path, "install", "--config", str(config))
    assert done.exit_code == 1
    assert "is not paired yet" in done.output
    assert not (tmp_path / ".config").exists()
