"""`python -m runnercli push [--workspace W] [--dry-run]`: a repo's `.everdict/` harnesses and
datasets, pushed with the member's API key through the `push_catalog` tool as one change.

A file becomes a new version only where its content differs from the latest version's; the
same tree pushed twice creates nothing the second time. A bad file is refused here with its
`file:line` (or by the server, naming the file and a case's line) and nothing is created.
Exit codes: 0 pushed (or nothing to change), 2 a bad file, a refusal or a server error.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import click

from runnercli.client.personal import API_KEY_ENV, PersonalApi, SubmitError
from runnercli.config import SERVER_ENV
from runnercli.push.tree import Tree, TreeError, find_root, read_tree

WORKSPACE_ENV = "EVERDICT_WORKSPACE"
EXIT_PUSHED = 0
EXIT_REFUSED = 2
MARKS = {"created": "+", "unchanged": "=", "would create": "~"}


async def push_docs(
    api: PersonalApi,
    *,
    workspace: str | None,
    harnesses: list[Any],
    datasets: list[Any],
    dry_run: bool,
) -> dict[str, Any]:
    """One `push_catalog` call: every file's outcome, or SubmitError with the refusal."""
    args: dict[str, Any] = {
        "harnesses": [doc.wire() for doc in harnesses],
        "datasets": [doc.wire() for doc in datasets],
        "dry_run": dry_run,
    }
    if workspace:
        args["workspace"] = workspace
    return await api.call("push_catalog", **args)


def file_lines(item: dict[str, Any]) -> list[str]:
    """What a push did with one file: its mark, path, name and version, and what changed."""
    head = f"{MARKS[item['status']]} {item['file']}: {item['name']} v{item['version']}"
    if item["status"] == "unchanged":
        return [f"{head} unchanged (the latest version holds this content)"]
    was = "new" if item["previous"] is None else f"was v{item['previous']}"
    verb = "created" if item["status"] == "created" else "would be created"
    changes = [change for change in item["changes"] if change != "new"]
    return [f"{head} {verb} ({was})", *(f"    {change}" for change in changes)]


def summary_line(reply: dict[str, Any]) -> str:
    counts: dict[str, int] = {}
    for item in reply["files"]:
        counts[item["status"]] = counts.get(item["status"], 0) + 1
    said = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    if reply["dry_run"]:
        return f"dry run on {reply['workspace']}: {said}; nothing was created"
    return f"pushed to {reply['workspace']}: {said}"


def _refusal(text: str) -> str:
    """The server's reasons, without the names of the call they came back from."""
    for prefix in ("push_catalog: ", "Error executing tool push_catalog: "):
        text = text.removeprefix(prefix)
    return text


async def _push(server: str, api_key: str, workspace: str | None, tree: Tree, dry: bool) -> int:
    try:
        async with PersonalApi(server, api_key) as api:
            reply = await push_docs(
                api,
                workspace=workspace,
                harnesses=tree.harnesses,
                datasets=tree.datasets,
                dry_run=dry,
            )
    except SubmitError as exc:
        for problem in _refusal(str(exc)).splitlines():
            click.echo(f"✗ {problem}", err=True)
        click.echo("nothing was created", err=True)
        return EXIT_REFUSED
    for item in reply["files"]:
        for line in file_lines(item):
            click.echo(line)
    click.echo(summary_line(reply))
    return EXIT_PUSHED


@click.command()
@click.option("--server", envvar=SERVER_ENV, required=True, help="Base URL ($EVERDICT_SERVER).")
@click.option("--api-key", envvar=API_KEY_ENV, required=True, help=f"evk_… (${API_KEY_ENV}).")
@click.option(
    "--workspace",
    envvar=WORKSPACE_ENV,
    help=f"Its slug (${WORKSPACE_ENV}); default: the one workspace you are an admin of.",
)
@click.option("--dry-run", is_flag=True, help="Say what would be created; create nothing.")
@click.option(
    "--dir",
    "start",
    type=click.Path(file_okay=False, path_type=Path),
    default=".",
    help="Where to look for .everdict/ (here or above).",
)
def push(server: str, api_key: str, workspace: str | None, dry_run: bool, start: Path) -> None:
    """Push .everdict/harnesses/*.yaml and .everdict/datasets/*.jsonl: a new version of each
    file whose content changed. Exit 0 pushed, 2 a bad file or an error (nothing created)."""
    if not api_key.startswith("evk_"):
        raise click.BadParameter("an API key starts with evk_", param_hint="--api-key")
    try:
        tree = read_tree(find_root(start.resolve()))
    except TreeError as refused:
        for problem in refused.problems:
            click.echo(f"✗ {problem}", err=True)
        click.echo("nothing was sent", err=True)
        sys.exit(EXIT_REFUSED)
    for skipped in tree.skipped:
        click.echo(f"  skipped {skipped}", err=True)
    if not tree.harnesses and not tree.datasets:
        click.echo(f"✗ nothing to push under {tree.root / '.everdict'}", err=True)
        sys.exit(EXIT_REFUSED)
    sys.exit(asyncio.run(_push(server.rstrip("/"), api_key, workspace, tree, dry_run)))
