"""`python -m runnercli allow …` and `python -m runnercli trust [--remove …]`: the member's
trust store of the harnesses this machine may run without asking."""

from __future__ import annotations

from pathlib import Path

import click

from runnercli.case.consent import pending
from runnercli.case.consent.trust import Entry, ServerTrust, TrustError, TrustStore, parse_entries
from runnercli.config import (
    SERVER_ENV,
    ConfigError,
    RunnerConfig,
    config_load,
    config_path,
    trust_path,
)
from runnercli.console.terminal import clean

config_option = click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False),
    help="Config file; the trust store is trust.json beside it ($EVERDICT_RUNNER_CONFIG).",
)
server_option = click.option(
    "--server",
    envvar=SERVER_ENV,
    help="The server the entries are for (default: the one this runner is paired with).",
)


def _store(config_file: str | None, server: str | None) -> tuple[Path, RunnerConfig, TrustStore]:
    path = config_path(config_file)
    try:
        config = config_load(path)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from exc
    server = server or config.server
    if not server:
        raise click.UsageError(
            f"no server: pair first, or pass --server URL (or set ${SERVER_ENV})"
        )
    return path, config, TrustStore(trust_path(path), server)


@click.command()
@click.argument("entries", nargs=-1, metavar="WORKSPACE/NAME[@VERSION]…")
@click.option(
    "--pending",
    "pending_number",
    type=click.IntRange(min=1),
    help="Answer the question N that a runner without a terminal keeps (`pending`).",
)
@click.option("--always", is_flag=True, help="With --pending: allow this version from now on.")
@click.option("--refuse", is_flag=True, help="With --pending: refuse it (the case fails).")
@click.option("--reason", default="", help="With --refuse: why, given with the failure.")
@server_option
@config_option
def allow(
    entries: tuple[str, ...],
    pending_number: int | None,
    always: bool,
    refuse: bool,
    reason: str,
    server: str | None,
    config_file: str | None,
) -> None:
    """Let this machine run a harness without asking.

    WORKSPACE/NAME allows every version; WORKSPACE/NAME@VERSION one version, pinned to its
    content the first time it runs here. NAME and NAME@VERSION allow it from any workspace.
    `--pending N` answers a question a runner without a terminal keeps: once (the
    default), `--always`, or `--refuse [--reason …]`.
    """
    if pending_number is not None:
        if entries:
            raise click.UsageError("--pending answers one question: give no harness with it")
        _answer(config_path(config_file), pending_number, always, refuse, reason)
        return
    if always or refuse or reason:
        raise click.UsageError("--always, --refuse and --reason go with --pending N")
    if not entries:
        raise click.UsageError("name a harness (WORKSPACE/NAME[@VERSION]) or --pending N")
    try:
        parsed = parse_entries(entries)
    except TrustError as exc:
        raise click.BadParameter(str(exc), param_hint="WORKSPACE/NAME[@VERSION]") from exc
    _, _, store = _store(config_file, server)
    for entry in parsed:
        try:
            added = store.add(entry)
        except TrustError as exc:
            raise click.ClickException(str(exc)) from exc
        scope = _scope(entry)
        click.echo(
            f"✓ {entry} may run here ({scope}), from {store.server}"
            if added
            else f"= {entry} was already allowed ({scope}), from {store.server}"
        )
    click.echo(f"  trust store: {store.path}")


def _scope(entry: Entry) -> str:
    where = "any workspace" if entry.workspace is None else f"workspace {entry.workspace}"
    if entry.version is None:
        return f"every version, {where}"
    return f"version {entry.version} only, pinned on first run, {where}"


@click.command()
@click.option(
    "--remove",
    multiple=True,
    metavar="ENTRY",
    help="Forget an entry and the digests pinned under it (repeatable).",
)
@click.option("--all", "all_servers", is_flag=True, help="List the entries of every server.")
@server_option
@config_option
def trust(
    remove: tuple[str, ...], all_servers: bool, server: str | None, config_file: str | None
) -> None:
    """List what this machine may run without asking, or --remove entries."""
    path, config, store = _store(config_file, server)
    if remove:
        _remove(store, remove)
        return
    try:
        servers = store.read_all()
    except TrustError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"trust store: {store.path}")
    shown = servers if all_servers else {store.server: servers.get(store.server, ServerTrust())}
    for url, entries in shown.items():
        _list(url, entries)
    if not shown:
        click.echo("  (empty)")
    if config.allow:
        click.echo(f"config {path}: allow {', '.join(map(clean, config.allow))} (any server)")


def _remove(store: TrustStore, remove: tuple[str, ...]) -> None:
    try:
        entries = parse_entries(remove)
        for entry in entries:
            present, dropped = store.remove(entry)
            pins = f"; forgot the pins of {', '.join(dropped)}" if dropped else ""
            state = "removed" if present else "was not in the trust store"
            click.echo(f"✓ {entry} {state} for {store.server}{pins}")
    except TrustError as exc:
        raise click.ClickException(str(exc)) from exc


def _list(url: str, trust: ServerTrust) -> None:
    click.echo(clean(url))
    if not trust.allow and not trust.pins:
        click.echo("  nothing allowed: every harness is asked about (refused without a terminal)")
        return
    pinned = dict(trust.pins)
    for text in trust.allow:
        entry = Entry.parse(text)
        under = {pin: digest for pin, digest in pinned.items() if entry.covers_pin(pin)}
        detail = _scope(entry)
        if entry.version is not None and not under:
            detail += "; not run yet"
        click.echo(f"  {entry}  ({detail})")
        for pin, digest in sorted(under.items()):
            click.echo(f"      {clean(pin)} pinned to sha256:{clean(digest)[:16]}…")
            del pinned[pin]
    for pin, digest in sorted(pinned.items()):
        click.echo(f"  {clean(pin)} pinned to sha256:{clean(digest)[:16]}… (no entry)")


def _answer(path: Path, number: int, always: bool, refuse: bool, reason: str) -> None:
    if always and refuse:
        raise click.UsageError("--always and --refuse contradict each other")
    if reason and not refuse:
        raise click.UsageError("--reason goes with --refuse")
    reply = "no" if refuse else "always" if always else "once"
    try:
        question = pending.answer(pending.pending_dir(path), number, reply, reason)
    except pending.PendingError as exc:
        raise click.ClickException(str(exc)) from exc
    said = {"once": "runs once", "always": "is allowed from now on", "no": "is refused"}[reply]
    click.echo(f"✓ {clean(question.harness)} {said} (question {number})")


@click.command(name="pending")
@config_option
def pending_command(config_file: str | None) -> None:
    """List what a runner without a terminal waits for your consent on."""
    path = config_path(config_file)
    waiting = pending.questions(pending.pending_dir(path))
    if not waiting:
        click.echo("nothing waits for your consent")
        return
    for question in waiting:
        click.echo(f"[{question.number}] {clean(question.harness)}")
        for line in question.lines:
            click.echo(f"    {clean(line)}")
        click.echo(
            f"    → python -m runnercli allow --pending {question.number} "
            "[--always | --refuse --reason …]"
        )
