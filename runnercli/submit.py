"""`python -m runnercli submit`: start a scorecard run from CI and fail the build on a regression.

Authenticated by a personal API key (`--api-key` / `$EVERDICT_API_KEY`), through the personal
MCP tools (`start_run`, `get_run`, `compare_runs`, `cancel_run`; `pair_runner` and
`revoke_runner` for `--here`). Exit codes: 0 passed; 1 under `--fail-under`, a regression
against the baseline, or the run ended failed or canceled; 2 usage, authentication or server
error. SIGINT/SIGTERM while waiting cancels the run.

`--here` makes the CI machine itself the runner: an ephemeral runner is paired with the API
key (label `ci-<host>`), the run is pinned to it, the pull loop runs in this process (consent
opted out: it only exists for this run), and the runner is revoked on the way out.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any

import click
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from runnercli.client import RunnerClient
from runnercli.config import SERVER_ENV, detected_capabilities, mcp_url, os_name
from runnercli.consent import ConsentSettings
from runnercli.loop import RunnerLoop, RunOptions
from runnercli.status import StatusLine

API_KEY_ENV = "EVERDICT_API_KEY"
EXIT_PASSED = 0
EXIT_FAILED = 1
EXIT_ERROR = 2
TERMINAL = ("succeeded", "failed", "canceled")
HERE_WAIT_MS = 10_000


class SubmitError(Exception):
    """A usage, authentication or server error: exit 2."""


class PersonalApi:
    """An MCP session with a personal API key; `call` returns a tool's structured reply."""

    def __init__(self, server: str, api_key: str) -> None:
        self.server = server
        self.api_key = api_key
        self._status: int | None = None
        self._stack = contextlib.AsyncExitStack()
        self._client: Client | None = None

    async def _on_response(self, response: httpx2.Response) -> None:
        if response.status_code >= 400:
            self._status = response.status_code

    async def __aenter__(self) -> PersonalApi:
        http = httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {self.api_key}"},
            timeout=httpx2.Timeout(30, read=60),
            event_hooks={"response": [self._on_response]},
        )
        transport = streamable_http_client(mcp_url(self.server), http_client=http)
        try:
            await self._stack.enter_async_context(http)
            self._client = await self._stack.enter_async_context(Client(transport))
        except Exception as exc:
            await self._stack.aclose()
            raise self._error(exc) from None
        return self

    async def __aexit__(self, *exc: object) -> None:
        with contextlib.suppress(Exception):
            await self._stack.aclose()

    def _error(self, exc: BaseException) -> SubmitError:
        if self._status == 401:
            return SubmitError("the server refused this API key (HTTP 401): check --api-key")
        if self._status is not None:
            return SubmitError(f"the server answered HTTP {self._status}")
        return SubmitError(f"cannot reach {self.server}: {type(exc).__name__}: {exc}")

    async def call(self, tool: str, **args: Any) -> dict[str, Any]:
        assert self._client is not None
        try:
            result = await self._client.call_tool(tool, {k: v for k, v in args.items()})
        except Exception as exc:
            raise self._error(exc) from None
        if result.is_error:
            text = " ".join(getattr(block, "text", "") for block in result.content)
            raise SubmitError(f"{tool}: {text}")
        return dict(result.structured_content or {})


# ------------------------------------------------------------------ metadata


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", *args], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def ci_url(env: dict[str, str]) -> str | None:
    """The URL of this CI job, from the variables GitHub Actions, GitLab, Buildkite,
    CircleCI or Jenkins set."""
    if env.get("GITHUB_RUN_ID") and env.get("GITHUB_REPOSITORY"):
        base = env.get("GITHUB_SERVER_URL", "https://github.com")
        return f"{base}/{env['GITHUB_REPOSITORY']}/actions/runs/{env['GITHUB_RUN_ID']}"
    for name in ("CI_JOB_URL", "BUILDKITE_BUILD_URL", "CIRCLE_BUILD_URL", "BUILD_URL"):
        if env.get(name):
            return env[name]
    return None


def detected_metadata(env: dict[str, str]) -> dict[str, Any]:
    """git SHA, branch and dirty flag of the working directory, and the CI job's URL."""
    found: dict[str, Any] = {}
    sha = env.get("GITHUB_SHA") or env.get("CI_COMMIT_SHA") or _git("rev-parse", "HEAD")
    if sha:
        found["git_sha"] = sha
    branch = (
        env.get("GITHUB_HEAD_REF")
        or env.get("GITHUB_REF_NAME")
        or env.get("CI_COMMIT_REF_NAME")
        or env.get("BUILDKITE_BRANCH")
        or _git("rev-parse", "--abbrev-ref", "HEAD")
    )
    if branch and branch != "HEAD":
        found["branch"] = branch
    status = _git("status", "--porcelain", "--untracked-files=no")
    if status is not None:
        found["dirty"] = bool(status)
    if url := ci_url(env):
        found["ci_url"] = url
    return found


def _given_metadata(pairs: tuple[str, ...]) -> dict[str, Any]:
    given: dict[str, Any] = {}
    for pair in pairs:
        name, eq, value = pair.partition("=")
        if not eq or not name:
            raise click.BadParameter(f"{pair!r} is not KEY=VALUE", param_hint="--metadata")
        given[name] = value
    return given


# ------------------------------------------------------------------ the run


@dataclass
class Options:
    server: str
    api_key: str
    workspace: str
    harness: str
    dataset: str
    runtime: str
    repeats: int
    concurrency: int
    baseline: str | None
    fail_under: float | None
    wait: bool
    here: bool
    poll_s: float
    metadata: dict[str, Any] = field(default_factory=dict)
    harness_version: int | None = None
    dataset_version: int | None = None


def bar(done: int, total: int, width: int = 30) -> str:
    filled = width * done // total if total else width
    return "[" + "#" * filled + "-" * (width - filled) + "]"


def _say(text: str) -> None:
    click.echo(text, err=True)


def _percent(value: float | None) -> str:
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
                _say(f"canceling run {self.run_id}…")
                self.canceled = True
                await self.api.call("cancel_run", run_id=self.run_id)
                continue
            if watch is not None and watch.done():
                _say("✗ the runner of this machine stopped; canceling the run")
                self.stop.set()
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stop.wait(), self.options.poll_s)

    def _progress(self, run: dict[str, Any]) -> None:
        s = run["summary"]
        done = s["pass"] + s["fail"] + s["error"]
        line = (
            f"{bar(done, s['total'])} {done}/{s['total']} · {s['pass']} pass, {s['fail']} fail, "
            f"{s['error']} error · {run['status']}"
        )
        if line != self.shown:
            self.shown = line
            _say(line)


def _summary_line(run: dict[str, Any]) -> str:
    s = run["summary"]
    stderr = f" ± {_percent(s['stderr'])}" if s.get("stderr") is not None else ""
    return (
        f"Run #{run['id']} {run['status']}: {s['pass']} pass, {s['fail']} fail, {s['error']} "
        f"error · mean pass fraction {_percent(s['pass_fraction'])}{stderr} over {s['cases']} "
        f"cases · {s['flaky']} flaky"
    )


async def _regressions(api: PersonalApi, options: Options, run_id: int) -> list[dict[str, Any]]:
    if options.baseline is None:
        return []
    a = None if options.baseline == "previous" else int(options.baseline)
    try:
        compared = await api.call("compare_runs", b=run_id, a=a)
    except SubmitError as exc:
        if a is None:
            click.echo(f"No baseline to compare with ({exc}).")
            return []
        raise
    regressions: list[dict[str, Any]] = compared["regressions"]
    baseline = compared["a"]["id"]
    if not regressions:
        click.echo(f"No regression against run #{baseline}.")
    for item in regressions:
        before, after = item["a"], item["b"]
        click.echo(
            f"✗ regressed against run #{baseline}: {item['case']} "
            f"{before['passes']}/{before['settled']} → {after['passes']}/{after['settled']} pass"
        )
    return regressions


async def _verdict(api: PersonalApi, options: Options, run: dict[str, Any]) -> int:
    """Print the summary and the regressions; the exit code of the build."""
    click.echo(_summary_line(run))
    code = EXIT_PASSED
    if run["status"] != "succeeded":
        click.echo(f"✗ the run ended {run['status']}")
        code = EXIT_FAILED
    fraction = run["summary"]["pass_fraction"] or 0.0
    if options.fail_under is not None and fraction < options.fail_under:
        click.echo(
            f"✗ mean pass fraction {_percent(fraction)} is under {_percent(options.fail_under)}"
        )
        code = EXIT_FAILED
    if await _regressions(api, options, run["id"]):
        code = EXIT_FAILED
    return code


def _start_args(options: Options, runtime: str) -> dict[str, Any]:
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
    }


def _announce(options: Options, run: dict[str, Any]) -> None:
    click.echo(f"run {run['id']}")
    click.echo(f"{options.server}/runs/{run['id']}/")


class _HereLoop(RunnerLoop):
    """The pull loop inside `submit --here`: signals are `submit`'s (they cancel the run)."""

    def _install_signals(self) -> None:
        pass

    def _remove_signals(self) -> None:
        pass


async def _run_here(api: PersonalApi, options: Options) -> int:
    label = f"ci-{socket.gethostname()}"[:100]
    capabilities = detected_capabilities()
    paired = await api.call("pair_runner", label=label, os=os_name(), capabilities=capabilities)
    _say(f"paired ephemeral runner {paired['id']} “{label}” for this run")
    try:
        run = await api.call("start_run", **_start_args(options, f"self:{paired['id']}"))
        _announce(options, run)
        runner_options = RunOptions(
            capabilities=capabilities,
            # Its own run, just started by this command: nothing to ask about.
            consent=ConsentSettings(allow_any=True),
            max_concurrent=options.concurrency,
            wait_ms=HERE_WAIT_MS,
        )
        client = RunnerClient(
            options.server, paired["token"], max_wait_ms=HERE_WAIT_MS, slots=options.concurrency
        )
        async with client:
            with StatusLine(stream=sys.stderr, live=False) as status:
                pull = _HereLoop(client, runner_options, status)
                task = asyncio.create_task(pull.run())
                try:
                    finished = await Follow(api, options, run["id"]).wait(watch=task)
                finally:
                    pull.request_stop()
                    pull.request_stop()
                    with contextlib.suppress(Exception):
                        await asyncio.wait_for(task, 30)
        return await _verdict(api, options, finished)
    finally:
        await api.call("revoke_runner", runner_id=paired["id"])
        _say(f"revoked runner {paired['id']}")


async def _submit(options: Options) -> int:
    try:
        async with PersonalApi(options.server, options.api_key) as api:
            if options.here:
                return await _run_here(api, options)
            run = await api.call("start_run", **_start_args(options, options.runtime))
            _announce(options, run)
            if not options.wait:
                return EXIT_PASSED
            finished = await Follow(api, options, run["id"]).wait()
            return await _verdict(api, options, finished)
    except SubmitError as exc:
        click.echo(f"✗ {exc}", err=True)
        return EXIT_ERROR


def _baseline(value: str | None) -> str | None:
    if value is None or value == "previous" or (value.isdigit() and int(value) > 0):
        return value
    raise click.BadParameter("a run id or `previous`", param_hint="--baseline")


@click.command()
@click.option("--server", envvar=SERVER_ENV, required=True, help="Base URL ($EVERDICT_SERVER).")
@click.option("--api-key", envvar=API_KEY_ENV, required=True, help=f"evk_… (${API_KEY_ENV}).")
@click.option("--workspace", required=True)
@click.option("--harness", required=True, help="Name, or name@version.")
@click.option("--dataset", required=True, help="Name, or name@version.")
@click.option("--runtime", default="self:any", show_default=True, help="self:any or self:<id>.")
@click.option("--repeats", type=click.IntRange(1, 20), default=1, show_default=True)
@click.option("--concurrency", type=click.IntRange(1, 256), default=1, show_default=True)
@click.option("--baseline", help="Compare with this run id, or `previous`; a regression fails.")
@click.option(
    "--fail-under",
    type=click.FloatRange(0, 1),
    help="Fail when the mean pass fraction over cases (an error counts 0) is below this.",
)
@click.option("--wait", is_flag=True, help="Wait for the run: progress, summary, regressions.")
@click.option("--here", is_flag=True, help="Run the cases on this machine (implies --wait).")
@click.option("--metadata", "metadata_pairs", multiple=True, metavar="KEY=VALUE")
@click.option("--poll-s", type=click.FloatRange(0.2, 60), default=2.0, show_default=True)
def submit(**given: Any) -> None:
    """Start a run (CI): exit 0 passed, 1 failed or regressed, 2 error."""
    if not given["api_key"].startswith("evk_"):
        raise click.BadParameter("an API key starts with evk_", param_hint="--api-key")
    server = given["server"].rstrip("/")
    if not server.startswith(("http://", "https://")):
        raise click.BadParameter(f"{server!r} is not an http(s) URL", param_hint="--server")
    harness, harness_version = _name_version(given["harness"], "--harness")
    dataset, dataset_version = _name_version(given["dataset"], "--dataset")
    metadata = detected_metadata(dict(os.environ)) | _given_metadata(given["metadata_pairs"])
    if len(json.dumps(metadata).encode()) > 4096:
        raise click.BadParameter("over 4 KiB of metadata", param_hint="--metadata")
    options = Options(
        server=server,
        api_key=given["api_key"],
        workspace=given["workspace"],
        harness=harness,
        dataset=dataset,
        harness_version=harness_version,
        dataset_version=dataset_version,
        runtime=given["runtime"],
        repeats=given["repeats"],
        concurrency=given["concurrency"],
        baseline=_baseline(given["baseline"]),
        fail_under=given["fail_under"],
        wait=given["wait"] or given["here"],
        here=given["here"],
        poll_s=given["poll_s"],
        metadata=metadata,
    )
    sys.exit(asyncio.run(_submit(options)))


def _name_version(value: str, hint: str) -> tuple[str, int | None]:
    name, at, version = value.rpartition("@")
    if not at:
        return value, None
    if not version.isdigit() or not name:
        raise click.BadParameter(f"{value!r}: use NAME or NAME@VERSION", param_hint=hint)
    return name, int(version)
