"""`submit --harness-file F`: the harness file pushed first (a new version only when it
changed), and the run started at the version it is."""

from __future__ import annotations

from pathlib import Path

import click

from runnercli.client.personal import PersonalApi, SubmitError
from runnercli.push.command import file_lines, push_docs
from runnercli.push.tree import CATALOG_DIR, TreeError, read_harness
from runnercli.submit.options import Options


def _relative(path: Path) -> str:
    """The file as the repo names it (`.everdict/harnesses/x.yaml`), else as given."""
    resolved = path.resolve()
    for directory in resolved.parents:
        if (directory / CATALOG_DIR).is_dir():
            return resolved.relative_to(directory).as_posix()
    return str(path)


async def push_harness_file(api: PersonalApi, options: Options) -> None:
    """Push `options.harness_file` and point the run at the version it is."""
    assert options.harness_file is not None
    try:
        doc = read_harness(options.harness_file, _relative(options.harness_file))
    except TreeError as refused:
        raise SubmitError("\n".join(refused.problems)) from None
    reply = await push_docs(
        api, workspace=options.workspace, harnesses=[doc], datasets=[], dry_run=False
    )
    item = reply["files"][0]
    for line in file_lines(item):
        click.echo(line)
    options.harness, options.harness_version = item["name"], item["version"]
