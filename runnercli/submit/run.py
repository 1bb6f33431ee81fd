"""The run: how it is started, followed until it ends (a signal cancels it), and judged."""

from __future__ import annotations

import asyncio
import signal
from typing import Any

import click

from runnercli.client.personal import PersonalApi, SubmitError
from runnercli.submit.options import (
    ANY_REGRESSION,
    EXIT_BUDGET,
    EXIT_FAILED,
    EXIT_PASSED,
    SIGNIFICANT_REGRESSION,
    Options,
)
from runnercli.tasks import wait_event

TERMINAL = ("succeeded", "failed", "canceled")


def bar(done: int, total: int, width: int = 30) -> str:
    filled = width * done // total if total else width
    return "[" + "#" * filled + "-" * (width - filled) + "]"


def say(text: str) -> None:
    click.echo(text, err=True)


def percent(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.1f}%"


class Follow:
    """Waits for the run, showing progress; a signal cancels it."""

    def __init__(self, api: PersonalApi, options: Options, run_id: int) -> None:
        self.api = api
        self.options = options
        self.run_id = run_id
        self.stop = asyncio.Event()
        self.canceled = False
        self.shown = ""

    def _on_signal(self) -> None:
        self.stop.set()

    async def wait(self, watch: asyncio.Task[Any] | None = None) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self._on_signal)
        try:
            return await self._poll(watch)
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)

    async def _poll(self, watch: asyncio.Task[Any] | None) -> dict[str, Any]:
        while True:
            run = await self.api.call("get_run", run_id=self.run_id)
            self._progress(run)
            if run["status"] in TERMINAL:
                return run
            if self.stop.is_set() and not self.canceled:
                say(f"canceling run {self.run_id}…")
                self.canceled = True
                await self.api.call("cancel_run", run_id=self.run_id)
                continue
            if watch is not None and watch.done():
                say("✗ the runner of this machine stopped; canceling the run")
                self.stop.set()
                continue
            await wait_event(self.stop, self.options.poll_s)

    def _progress(self, run: dict[str, Any]) -> None:
        s = run["summary"]
        skipped = s.get("skipped", 0)
        done = s["pass"] + s["fail"] + s["error"] + skipped
        line = (
            f"{bar(done, s['total'])} {done}/{s['total']} · {s['pass']} pass, {s['fail']} fail, "
            f"{s['error']} error{f', {skipped} skipped' if skipped else ''} · {run['status']}"
        )
        if line != self.shown:
            self.shown = line
            say(line)


def interval(estimate: dict[str, Any] | None) -> str:
    """A summary's `pass_rate_ci` as ` · pass rate 62 % [48-74] (95 %, Wilson)`; nothing from a
    server older than the intervals."""
    if not estimate or estimate.get("value") is None or not estimate.get("ci"):
        return ""
    lo, hi = (bound * 100 for bound in estimate["ci"])
    places = 1 if 0 < hi - lo < 5 else 0
    method = "Wilson" if estimate["method"] == "wilson" else "bootstrap over cases"
    left = [f"{estimate[k]} {k}" for k in ("judging", "skipped") if estimate.get(k)]
    return (
        f" · pass rate {estimate['value'] * 100:.{places}f} % [{lo:.{places}f}\u2013"
        f"{hi:.{places}f}] (95 %, {method})" + (f", {', '.join(left)} left out" if left else "")
    )


def _summary_line(run: dict[str, Any]) -> str:
    s = run["summary"]
    stderr = f" ± {percent(s['stderr'])}" if s.get("stderr") is not None else ""
    # Results whose agent changed protected paths (a server of protocol 4 counts them).
    tampered = f" · {s['tampered']} tampered" if s.get("tampered") else ""
    tampered += f" · {s['skipped']} skipped" if s.get("skipped") else ""
    return (
        f"Run #{run['id']} {run['status']}: {s['pass']} pass, {s['fail']} fail, {s['error']} "
        f"error · mean pass fraction {percent(s['pass_fraction'])}{stderr} over {s['cases']} "
        f"cases · {s['flaky']} flaky{interval(s.get('pass_rate_ci'))}{tampered}"
    )


async def _regressed(api: PersonalApi, options: Options, run_id: int) -> bool:
    """Compare with the baseline and print its sentence and regressed cases; whether what
    `--fail-on` names happened."""
    if options.baseline is None:
        return False
    a = None if options.baseline == "previous" else int(options.baseline)
    try:
        compared = await api.call("compare_runs", b=run_id, a=a)
    except SubmitError as exc:
        if a is None:
            click.echo(f"No baseline to compare with ({exc}).")
            return False
        raise
    regressions: list[dict[str, Any]] = compared["regressions"]
    baseline = compared["a"]["id"]
    numbers = compared.get("numbers")
    if numbers is not None:
        click.echo(f"Against run #{baseline}: {numbers['sentence']}")
    any_fails = ANY_REGRESSION in options.fail_on or numbers is None
    if not regressions:
        click.echo(f"No regression against run #{baseline}.")
    for item in regressions:
        before, after = item["a"], item["b"]
        click.echo(
            f"{'✗' if any_fails else '·'} regressed against run #{baseline}: {item['case']} "
            f"{before['passes']}/{before['settled']} → {after['passes']}/{after['settled']} pass"
        )
    # A server older than the by-host comparison sends no `confined`.
    if compared.get("confined"):
        click.echo(f"  {compared['confined'][0].upper()}{compared['confined'][1:]}.")
    if numbers is None and SIGNIFICANT_REGRESSION in options.fail_on:
        # A server older than the numbers says no verdict: any regression stands for one.
        click.echo("  (this server gives no significance: any regression fails)")
    significant = numbers is not None and numbers["significance"]["verdict"] == "worse"
    if significant and SIGNIFICANT_REGRESSION in options.fail_on:
        click.echo(f"✗ run #{run_id} is worse than run #{baseline} beyond noise")
        return True
    return bool(regressions) and any_fails


async def verdict(api: PersonalApi, options: Options, run: dict[str, Any]) -> int:
    """Print the summary and the comparison with the baseline; the exit code of the build."""
    click.echo(_summary_line(run))
    code = EXIT_PASSED
    if run["status"] != "succeeded":
        click.echo(f"✗ the run ended {run['status']}")
        code = EXIT_FAILED
    fraction = run["summary"]["pass_fraction"] or 0.0
    if options.fail_under is not None and fraction < options.fail_under:
        click.echo(
            f"✗ mean pass fraction {percent(fraction)} is under {percent(options.fail_under)}"
        )
        code = EXIT_FAILED
    if await _regressed(api, options, run["id"]):
        code = EXIT_FAILED
    summary = run["summary"]
    if summary.get("budget_ended"):
        spent = summary.get("cost_usd", 0.0) + summary.get("judge_cost_usd", 0.0)
        click.echo(
            f"✗ the run budget ${summary['max_cost_usd']:.2f} ended the run: "
            f"{summary['skipped']} cases skipped (${spent:.2f} reported)"
        )
        code = EXIT_BUDGET if code == EXIT_PASSED else code
    return code


def start_args(options: Options, runtime: str) -> dict[str, Any]:
    return {
        "workspace": options.workspace,
        "harness": options.harness,
        "dataset": options.dataset,
        "runtime": runtime,
        "concurrency": options.concurrency,
        "repeats": options.repeats,
        "harness_version": options.harness_version,
        "dataset_version": options.dataset_version,
        "metadata": options.metadata or None,
        # Sent only when set: a server older than run budgets knows no such argument.
        **({} if options.max_cost_usd is None else {"max_cost_usd": options.max_cost_usd}),
    }


def announce(options: Options, run: dict[str, Any]) -> None:
    click.echo(f"run {run['id']}")
    click.echo(f"{options.server}/runs/{run['id']}/")
