"""`python -m runnercli submit`: start a scorecard run from CI and fail the build on a regression.

Authenticated by a personal API key (`--api-key` / `$EVERDICT_API_KEY`), through the personal
MCP tools (`start_run`, `get_run`, `compare_runs`, `cancel_run`; `pair_runner` and
`revoke_runner` for `--here`; `push_catalog` for `--harness-file`). Exit codes: 0 passed; 1
under `--fail-under`, a regression against the baseline (`--fail-on`: B worse beyond noise by
default, or any regressed case), or the run ended failed or canceled;
2 usage, authentication or server error. SIGINT/SIGTERM while waiting cancels the run.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import click

from runnercli.client.personal import PersonalApi, SubmitError
from runnercli.config import SERVER_ENV
from runnercli.submit.harness_file import push_harness_file
from runnercli.submit.here import run_here
from runnercli.submit.metadata import detected_metadata, given_metadata
from runnercli.submit.options import (
    API_KEY_ENV,
    EXIT_ERROR,
    EXIT_PASSED,
    FAIL_ON,
    SIGNIFICANT_REGRESSION,
    Options,
)
from runnercli.submit.run import Follow, announce, start_args, verdict


async def _submit(options: Options) -> int:
    try:
        async with PersonalApi(options.server, options.api_key) as api:
            if options.harness_file is not None:
                await push_harness_file(api, options)
            if options.here:
                return await run_here(api, options)
            run = await api.call("start_run", **start_args(options, options.runtime))
            announce(options, run)
            if not options.wait:
                return EXIT_PASSED
            finished = await Follow(api, options, run["id"]).wait()
            return await verdict(api, options, finished)
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
@click.option("--harness", help="Name, or name@version.")
@click.option(
    "--harness-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A harness file (.everdict/harnesses/NAME.yaml): pushed, then run at its version.",
)
@click.option("--dataset", required=True, help="Name, or name@version.")
@click.option("--runtime", default="self:any", show_default=True, help="self:any or self:<id>.")
@click.option("--repeats", type=click.IntRange(1, 20), default=1, show_default=True)
@click.option("--concurrency", type=click.IntRange(1, 256), default=1, show_default=True)
@click.option(
    "--baseline",
    help="Compare with this run id, or `previous`; what fails is --fail-on's (by default a "
    "significant regression).",
)
@click.option(
    "--fail-on",
    type=click.Choice(FAIL_ON),
    multiple=True,
    help="Against the baseline, fail on B being worse beyond noise (significant-regression, "
    "the default) or on any case that regressed (any-regression); repeatable.",
)
@click.option(
    "--fail-under",
    type=click.FloatRange(0, 1),
    help="Fail when the mean pass fraction over cases (an error counts 0) is below this.",
)
@click.option(
    "--max-cost-usd",
    type=click.FloatRange(0, 100_000, min_open=True),
    help="The run's budget: once its cases and judges reported this much (USD), the cases not "
    "started are skipped and submit exits 3.",
)
@click.option("--wait", is_flag=True, help="Wait for the run: progress, summary, regressions.")
@click.option("--here", is_flag=True, help="Run the cases on this machine (implies --wait).")
@click.option("--metadata", "metadata_pairs", multiple=True, metavar="KEY=VALUE")
@click.option("--poll-s", type=click.FloatRange(0.2, 60), default=2.0, show_default=True)
def submit(**given: Any) -> None:
    """Start a run (CI): exit 0 passed, 1 failed or regressed, 2 error, 3 budget spent."""
    if not given["api_key"].startswith("evk_"):
        raise click.BadParameter("an API key starts with evk_", param_hint="--api-key")
    server = given["server"].rstrip("/")
    if not server.startswith(("http://", "https://")):
        raise click.BadParameter(f"{server!r} is not an http(s) URL", param_hint="--server")
    if (given["harness"] is None) == (given["harness_file"] is None):
        raise click.BadParameter("give --harness or --harness-file", param_hint="--harness")
    harness, harness_version = _name_version(given["harness"] or "", "--harness")
    dataset, dataset_version = _name_version(given["dataset"], "--dataset")
    metadata = detected_metadata(dict(os.environ)) | given_metadata(given["metadata_pairs"])
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
        fail_on=tuple(dict.fromkeys(given["fail_on"])) or (SIGNIFICANT_REGRESSION,),
        wait=given["wait"] or given["here"],
        here=given["here"],
        poll_s=given["poll_s"],
        metadata=metadata,
        harness_file=given["harness_file"],
        max_cost_usd=given["max_cost_usd"],
    )
    sys.exit(asyncio.run(_submit(options)))


def _name_version(value: str, hint: str) -> tuple[str, int | None]:
    name, at, version = value.rpartition("@")
    if not at:
        return value, None
    if not version.isdigit() or not name:
        raise click.BadParameter(f"{value!r}: use NAME or NAME@VERSION", param_hint=hint)
    return name, int(version)
