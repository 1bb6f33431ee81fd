"""The trust store and its commands: `allow`, `trust`, `trust --remove`."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from runnercli.case.consent.trust import Entry, HarnessId, TrustError, TrustStore, server_key
from runnercli.cli import cli
from runnercli.config import RunnerConfig, config_save

SERVER = "http://127.0.0.1:8000"
ECHO_3 = HarnessId("acme", "echo", 3)


def test_the_four_entry_forms_parse_and_anything_else_is_refused() -> None:
    assert Entry.parse("echo") == Entry(None, "echo", None)
    assert Entry.parse("echo@3") == Entry(None, "echo", 3)
    assert Entry.parse("acme/echo") == Entry("acme", "echo", None)
    assert Entry.parse("acme/echo@v3") == Entry("acme", "echo", 3)
    assert str(Entry.parse("acme/echo@v3")) == "acme/echo@3"
    for bad in ("", "acme/", "/echo", "a/b/c", "echo@", "echo@0", "echo@x", "ec ho", "-echo"):
        with pytest.raises(TrustError):
            Entry.parse(bad)


def test_entries_are_kept_per_server_url_in_a_0600_file(tmp_path: Path) -> None:
    path = tmp_path / "trust.json"
    store = TrustStore(path, SERVER + "/")
    assert store.add(Entry.parse("acme/echo"))
    assert not store.add(Entry.parse("acme/echo"))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert TrustStore(path, "HTTP://127.0.0.1:8000/mcp").read().allow == ["acme/echo"]
    assert TrustStore(path, "http://127.0.0.1:9000").read().allow == []
    assert server_key("https://Everdict.Example/base/mcp/") == "https://everdict.example/base"


def test_a_version_is_pinned_to_the_first_digest_it_ran_with(tmp_path: Path) -> None:
    store = TrustStore(tmp_path / "trust.json", SERVER)
    assert store.pin(ECHO_3, "a" * 64) == "a" * 64
    assert store.pin(ECHO_3, "b" * 64) == "a" * 64
    assert store.read().pins == {"acme/echo@3": "a" * 64}


def test_removing_an_entry_forgets_the_pins_it_covered(tmp_path: Path) -> None:
    store = TrustStore(tmp_path / "trust.json", SERVER)
    store.add(Entry.parse("acme/echo"))
    store.pin(ECHO_3, "a" * 64)
    store.pin(HarnessId("acme", "judge", 1), "c" * 64)
    assert store.remove(Entry.parse("acme/echo")) == (True, ["acme/echo@3"])
    assert store.read().pins == {"acme/judge@1": "c" * 64}
    assert store.remove(Entry.parse("acme/echo")) == (False, [])


def test_a_broken_trust_store_is_an_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "trust.json"
    path.write_text(json.dumps({"servers": {SERVER: {"allow": ["not an entry!"]}}}))
    with pytest.raises(TrustError, match=r"trust\.json is not a valid trust store"):
        TrustStore(path, SERVER).read()


def test_allow_trust_and_remove_on_the_command_line(tmp_path: Path) -> None:
    config = tmp_path / "runner.json"
    config_save(config, RunnerConfig(server=SERVER, token="rnr_x" * 5, allow=["legacy"]))
    run = CliRunner().invoke
    added = run(cli, ["allow", "--config", str(config), "acme/echo@3", "acme/judge"])
    assert added.exit_code == 0, added.output
    assert "✓ acme/echo@3 may run here (version 3 only, pinned on first run" in added.output
    assert "✓ acme/judge may run here (every version, workspace acme)" in added.output
    TrustStore(tmp_path / "trust.json", SERVER).pin(ECHO_3, "ab" * 32)

    listed = run(cli, ["trust", "--config", str(config)])
    assert listed.exit_code == 0, listed.output
    assert f"trust store: {tmp_path / 'trust.json'}" in listed.output
    assert "acme/echo@3 pinned to sha256:abababababababab…" in listed.output
    assert "acme/judge  (every version, workspace acme)" in listed.output
    assert "allow legacy (any server)" in listed.output
    status = run(cli, ["status", "--config", str(config)])
    assert (
        "allow:        legacy, acme/echo@3, acme/judge; anything else: asked on a terminal"
        in status.output
    )

    removed = run(cli, ["trust", "--config", str(config), "--remove", "acme/echo@3"])
    assert removed.exit_code == 0, removed.output
    assert "✓ acme/echo@3 removed" in removed.output
    assert "forgot the pins of acme/echo@3" in removed.output
    assert TrustStore(tmp_path / "trust.json", SERVER).read().allow == ["acme/judge"]

    bad = run(cli, ["allow", "--config", str(config), "acme/"])
    assert bad.exit_code == 2
    assert "is not NAME, NAME@VERSION, WORKSPACE/NAME or WORKSPACE/NAME@VERSION" in bad.output


def test_allow_needs_a_server_when_not_paired(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["allow", "--config", str(tmp_path / "c.json"), "acme/x"])
    assert result.exit_code == 2
    assert "no server: pair first, or pass --server URL" in result.output
