"""`python -m runnercli pair`: pair this machine, by a code approved in the browser or a token."""

from __future__ import annotations

import sys

import click

from runnercli.case.consent.trust import TrustError, TrustStore
from runnercli.client.device import DevicePairingFailed, default_label, device_pair
from runnercli.commands.common import (
    allow_option,
    capability_option,
    check_capabilities,
    check_entries,
    check_server,
    check_token,
    config_option,
    hello_or_exit,
    insecure_option,
    load_config,
    server_option,
    token_option,
)
from runnercli.config import (
    ConfigError,
    config_save,
    detected_capabilities,
    merge_capabilities,
    trust_path,
)
from runnercli.console.exits import EXIT_NOT_REPORTED
from runnercli.console.terminal import clean


@click.command()
@server_option
@token_option
@click.option("--label", help="This machine's name when pairing by code (default: the host name).")
@capability_option
@click.option("--no-browser", is_flag=True, help="Pairing by code: print the page, open nothing.")
@allow_option
@insecure_option
@config_option
def pair(
    server: str | None,
    token: str | None,
    label: str | None,
    capabilities: tuple[str, ...],
    no_browser: bool,
    allow: tuple[str, ...],
    insecure: bool,
    config_file: str | None,
) -> None:
    """Pair this machine: approve the code it shows in your browser, or give a runner token
    (--token, for machines without a browser at hand); store it for `run`.

    `--allow` entries go to the trust store for this server (`python -m runnercli trust`).
    """
    path, config = load_config(config_file)
    server = check_server(server, insecure=insecure)
    extra = check_capabilities(capabilities)
    entries = check_entries(allow)
    if token:
        token = check_token(token)
        if label:
            click.echo("note: --label is ignored with --token: the label was set with the token")
    else:
        offered = merge_capabilities(extra, detected_capabilities())
        token = _device_token(server, label or default_label(), offered, not no_browser)
    hello = hello_or_exit(server, token, merge_capabilities(extra, detected_capabilities()))
    config = config.model_copy(
        update={
            "server": server,
            "token": token,
            "runner_id": hello.runner_id,
            "label": hello.label,
            "owner": hello.owner,
            "capabilities": merge_capabilities(extra) if extra else config.capabilities,
            "insecure": insecure,
        }
    )
    try:
        config_save(path, config)
        store = TrustStore(trust_path(path), server)
        for entry in entries:
            store.add(entry)
    except (ConfigError, TrustError) as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(
        f"✓ paired with {server} as runner {hello.runner_id} "
        f"“{clean(hello.label)}” of {clean(hello.owner)}"
    )
    click.echo(f"  config saved to {path} (mode 0600)")
    if entries:
        click.echo(f"  allowed: {', '.join(map(str, entries))} (in {trust_path(path)})")
    click.echo("  start it with: python -m runnercli run")


def _device_token(server: str, label: str, capabilities: list[str], browser: bool) -> str:
    try:
        granted = device_pair(
            server, label=label, capabilities=capabilities, open_browser=browser, echo=click.echo
        )
    except DevicePairingFailed as exc:
        click.echo(f"✗ {exc}", err=True)
        sys.exit(EXIT_NOT_REPORTED)
    return granted.token
