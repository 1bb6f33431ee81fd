"""`make demo`: the whole product on one machine, from a fresh clone to a scored run.

Migrates the embedded database, seeds the `demo` workspace from the table of
`everdict.demo_seed` (user demo/demo), starts the server and the scheduler, pairs a runner on
this machine, starts it, dispatches a run to it, prints the scorecard and keeps serving until
Ctrl-C. Every process it starts runs in a process group of its own and is stopped on the way
out. A second start reuses what the first one seeded.

    python -m everdict.demo [--port 8000] [--state-dir var]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from everdict.demo_browser import browser_run
from everdict.demo_judge import judged_run
from everdict.demo_seed import (
    ALLOWED,
    DATASET,
    HARNESS,
    PASSWORD,
    USERNAME,
    WORKSPACE,
    demo_seed,
    demo_user,
)
from everdict.demo_verify import REPO_NAME, calc_checkout, verified_run
from everdict.demo_web import WEB_DOCKER_HARNESS, demo_static_image
from everdict.processes import (
    Proc,
    ProcessExited,
    check_alive,
    check_port_free,
    daphne_args,
    descendants,
    kill,
    spawn,
    wait_http,
)

if TYPE_CHECKING:
    from django.contrib.auth.models import User

RUNNER_LABEL = "this machine (demo)"
CONCURRENCY = 2  # the runner is started with --max-concurrent 2 to match
HOST = "127.0.0.1"


class DemoError(Exception):
    """Something the person running the demo must fix; printed without a traceback."""


# ------------------------------------------------------------------ seeding


def demo_runner(
    user: User, config_file: Path, server: str, repos: dict[str, str] | None = None
) -> Any:
    """Reuse the runner paired by an earlier start, or revoke it and pair a new one.

    The token is only in the runner's config file (the server keeps its hash), so a
    runner whose config is gone cannot be reused.
    """
    from runnercli.config import ConfigError, RunnerConfig, config_load, config_save
    from runners.models import Runner
    from runners.services import runner_authenticate, runner_pair, runner_revoke

    try:
        config = config_load(config_file)
    except ConfigError:
        config = RunnerConfig()
    runner = runner_authenticate(config.token) if config.token else None
    repos = {**config.repos, **(repos or {})}
    if runner is not None and runner.owner_id == user.pk:
        if config.server != server or config.repos != repos:
            config_save(config_file, config.model_copy(update={"server": server, "repos": repos}))
        return runner
    for old in Runner.objects.owned_by(user).active().filter(label=RUNNER_LABEL):
        runner_revoke(owner=user, runner_id=old.pk)
    paired = runner_pair(owner=user, label=RUNNER_LABEL, os=sys.platform, capabilities=["python"])
    config_save(
        config_file,
        RunnerConfig(
            server=server,
            token=paired.token,
            runner_id=paired.runner.pk,
            label=paired.runner.label,
            owner=USERNAME,
            capabilities=["python"],
            repos=repos,
        ),
    )
    return paired.runner


# ------------------------------------------------------------------ processes


class Children:
    """The processes the demo started, each leading a process group of its own."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.started: list[Proc] = []

    def start(self, name: str, args: list[str], env: dict[str, str]) -> Proc:
        # Appended to: a second start keeps the logs of the first.
        proc = spawn(args, self.log_dir / f"{name}.log", env, append=True)
        self.started.append(proc)
        return proc

    def stop_all(self, grace_s: float = 10.0) -> None:
        """Stop in reverse order, each group SIGTERM then SIGKILL after `grace_s`: the
        runner goes first and finishes its cases while the server can still take them."""
        # A second Ctrl-C must not cut this short and leave processes behind.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        strays = descendants()
        for proc in reversed(self.started):
            proc.stop(grace_s=grace_s)
        # A case process that escaped its group (its own session) must not outlive us.
        kill(strays)


def _check_port_free(port: int) -> None:
    try:
        check_port_free(port, HOST)
    except OSError as exc:
        raise DemoError(
            f"port {port} on {HOST} is already in use ({exc.strerror}): stop whatever "
            f"listens there, or pick another port with --port N or EVERDICT_DEMO_PORT=N"
        ) from exc


def _wait_http(url: str, children: Children, timeout_s: float = 60) -> None:
    try:
        wait_http(url, timeout_s=timeout_s, watch=children.started, interval_s=0.2)
    except ProcessExited as exc:
        raise DemoError(str(exc)) from exc
    except TimeoutError as exc:
        raise DemoError(f"the server did not answer at {url} within {timeout_s:.0f}s") from exc


def _check_alive(children: Children) -> None:
    try:
        check_alive(children.started)
    except ProcessExited as exc:
        raise DemoError(str(exc)) from exc


# ------------------------------------------------------------------ the run

# What the runner prints once the server answered its `hello` (runnercli.loop).
HELLO_LINE = "connected to "


def _wait_for_hello(log: Path, offset: int, children: Children, timeout_s: float = 60) -> None:
    """Wait until the runner started now has said hello, so the run is dispatched to a runner
    that is online (its events then carry no "runner offline" warning)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(FileNotFoundError), log.open("rb") as handle:
            handle.seek(offset)
            if HELLO_LINE.encode() in handle.read():
                return
        _check_alive(children)
        time.sleep(0.2)
    raise DemoError(f"the runner did not connect within {timeout_s:.0f}s: see {log}")


def _wait_for_run(run_id: int, children: Children, timeout_s: float, say: Any) -> Any:
    from django.db import close_old_connections

    from scorecards.models import Run

    deadline = time.monotonic() + timeout_s
    shown = ""
    while True:
        close_old_connections()
        run = Run.objects.get(pk=run_id)
        done = run.results.count()
        progress = f"{run.status}: {done}/{run.dataset.case_count} cases scored"
        if progress != shown:
            say(f"  {progress}")
            shown = progress
        if run.is_terminal or time.monotonic() > deadline:
            return run
        _check_alive(children)
        time.sleep(0.5)


def print_summary(run: Any, url: str, console: Any) -> None:
    from rich.table import Table

    from scorecards.replies.runs import RunReply
    from scorecards.selectors.results import run_overview

    reply = RunReply.of(run_overview(run)).data()
    summary = reply["summary"]
    table = Table(title=f"Run #{run.pk}: {run.harness} on {run.dataset}", title_justify="left")
    for column in ("case", "verdict", "score", "time", "answer"):
        table.add_column(column)
    colours = {"pass": "green", "fail": "red", "error": "red"}
    for result in reply["results"]:
        answer = result["output"]
        with contextlib.suppress(ValueError, TypeError):
            import json

            parsed = json.loads(answer)
            # A JSON harness's answer is its `result`; a text one (the browser's) as it is.
            if isinstance(parsed, dict):
                answer = str(parsed.get("result", answer))
        marked = " (tampered)" if result.get("tampered") else ""
        table.add_row(
            result["case"],
            f"[{colours[result['verdict']]}]{result['verdict']}{marked}[/]",
            f"{result['score']:.1f}",
            f"{result['duration_ms'] / 1000:.1f}s",
            (answer or result["error"])[:40],
        )
    console.print(table)
    rate = summary["pass_rate"]
    console.print(
        f"Pass rate: [bold]{rate * 100:.0f}%[/] ({summary['pass']} pass, {summary['fail']} fail, "
        f"{summary['error']} error) · status {reply['status']} · reported cost "
        f"${summary['cost_usd']:.6f} (provenance, not billed)"
        if rate is not None
        else f"No case was scored: status {reply['status']}."
    )
    console.print(f"Run page: [bold]{url}[/]  (log in as {USERNAME} / {PASSWORD})")


# ------------------------------------------------------------------ main


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m everdict.demo", description=__doc__)
    parser.add_argument(
        "--port",
        type=int,
        default=int(os.environ.get("EVERDICT_DEMO_PORT", "8000")),
        help="Port of the server (default 8000; $EVERDICT_DEMO_PORT).",
    )
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=None,
        help="Where the runner config and the process logs go (default: var/).",
    )
    parser.add_argument(
        "--timeout", type=float, default=120, help="Seconds to wait for the run (default 120)."
    )
    return parser.parse_args(argv)


def _stop(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


@contextlib.contextmanager
def _interruptible() -> Iterator[None]:
    """Ctrl-C and SIGTERM stop the demo, even when started with SIGINT ignored (`cmd &`)."""
    previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "everdict.settings")
    import django

    django.setup()
    from django.conf import settings
    from rich.console import Console

    console = Console(highlight=False)
    state_dir = (args.state_dir or settings.VAR_DIR).resolve()
    children = Children(state_dir / "demo-logs")
    with _interruptible():
        try:
            return _demo(args, state_dir, children, console)
        except DemoError as exc:
            console.print(f"[red]✗ {exc}[/]")
            return 1
        except KeyboardInterrupt:
            console.print("\nStopping…")
            return 0
        finally:
            children.stop_all()
            if children.started:
                console.print("Stopped the server, the scheduler and the runner.")


def _demo(args: argparse.Namespace, state_dir: Path, children: Children, console: Any) -> int:
    from django.core.management import call_command

    server = f"http://{HOST}:{args.port}"
    _check_port_free(args.port)
    console.print("Preparing the database…")
    call_command("migrate", interactive=False, verbosity=0)
    user = demo_user()
    demo_seed(user)
    if (problem := demo_static_image()) is None:
        console.print(f"Docker answers: {WEB_DOCKER_HARNESS} (a container service) can run here")
    else:
        console.print(f"{WEB_DOCKER_HARNESS} needs Docker and will show so: {problem}")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    python = sys.executable
    console.print(f"Starting the server at {server} and the scheduler (logs in {children.log_dir})")
    # The demo dispatches its runs from this process, and the embedded store carries no
    # notification between processes: the server finds them at its periodic re-check, so that
    # is made short here (one small query a fifth of a second) rather than the default 5 s.
    server_env = {"EVERDICT_WAKE_RECHECK_S": "0.2", **env}
    children.start("daphne", daphne_args(args.port, HOST), server_env)
    children.start("scheduler", [python, "manage.py", "scheduler"], env)
    _wait_http(f"{server}/healthz", children)
    config_file = state_dir / "demo-runner.json"
    # The verified harness's project, mapped for the runner (`repo add`).
    calc = calc_checkout(state_dir)
    runner = demo_runner(user, config_file, server, {REPO_NAME: str(calc)})
    console.print(f"Starting runner #{runner.pk} “{runner.label}” (config {config_file})")
    runner_env = {**env, "EVERDICT_RUNNER_CONFIG": str(config_file), "NO_COLOR": "1"}
    runner_env.pop("DJANGO_SETTINGS_MODULE", None)
    runner_log = children.log_dir / "runner.log"
    log_start = runner_log.stat().st_size if runner_log.exists() else 0
    children.start(
        "runner",
        [
            python,
            "-m",
            "runnercli",
            "run",
            "--server",
            server,
            "--max-concurrent",
            "2",
            # The demo's own harnesses, and nothing else: anything else would be refused.
            *[arg for name in ALLOWED for arg in ("--allow", f"{WORKSPACE}/{name}")],
        ],
        runner_env,
    )
    _wait_for_hello(runner_log, log_start, children)
    watch = functools.partial(_watched_run, user, runner, server, children, args, console)
    run = watch(
        harness=HARNESS,
        dataset=DATASET,
        concurrency=CONCURRENCY,
        says=f" to runner #{runner.pk}: follow it live at ",
    )
    if not run.is_terminal:
        console.print(f"The run has not finished within {args.timeout:.0f}s; it goes on.")
    judged_run(watch, dataset=DATASET, concurrency=CONCURRENCY)
    verified_run(watch, console)
    browser_run(watch, console)
    console.print(f"Serving at {server}/ — press Ctrl-C to stop.")
    while True:
        _check_alive(children)
        time.sleep(0.5)


def _watched_run(
    user: User,
    runner: Any,
    server: str,
    children: Children,
    args: Any,
    console: Any,
    *,
    harness: str,
    dataset: str,
    says: str,
    **options: Any,
) -> Any:
    """A run of `harness` over `dataset` on the demo's runner, said (`says` ends in its page's
    address), waited for and summarised."""
    from scorecards.services import run_start

    run = run_start(
        user=user,
        workspace_slug=WORKSPACE,
        harness=harness,
        dataset=dataset,
        runtime=f"self:{runner.pk}",
        **options,
    )
    url = f"{server}/runs/{run.pk}/"
    console.print(f"Dispatched run #{run.pk}{says}{url}")
    run = _wait_for_run(run.pk, children, args.timeout, console.print)
    print_summary(run, url, console)
    return run


if __name__ == "__main__":
    sys.exit(main())
