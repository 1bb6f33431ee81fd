"""The runner's config file, capabilities and the loop's pure decisions."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from runnercli.case.consent.trust import Entry, HarnessId
from runnercli.client.backoff import Backoff
from runnercli.config import (
    ConfigError,
    RunnerConfig,
    config_load,
    config_path,
    config_save,
    detected_capabilities,
    mask_token,
    mcp_url,
    merge_capabilities,
    os_name,
)
from tests.runnercli.conftest import make_job


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_default_path_honours_xdg_config_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("EVERDICT_RUNNER_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert config_path() == tmp_path / "xdg" / "everdict" / "runner.json"


def test_without_xdg_it_lives_under_home_dot_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("EVERDICT_RUNNER_CONFIG", raising=False)
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert config_path() == tmp_path / ".config" / "everdict" / "runner.json"


def test_the_environment_and_the_flag_override_the_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVERDICT_RUNNER_CONFIG", str(tmp_path / "env.json"))
    assert config_path() == tmp_path / "env.json"
    assert config_path(str(tmp_path / "flag.json")) == tmp_path / "flag.json"


def test_the_config_is_written_0600_in_a_0700_directory_and_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "cfg" / "everdict" / "runner.json"
    config = RunnerConfig(
        server="http://127.0.0.1:8000",
        token="rnr_secret",
        runner_id=4,
        label="laptop",
        owner="alice",
        capabilities=["gpu"],
        allow=["echo"],
    )
    config_save(path, config)
    assert mode_of(path) == 0o600
    assert mode_of(path.parent) == 0o700
    assert config_load(path) == config
    assert [p.name for p in path.parent.iterdir()] == ["runner.json"]  # no temp file left


def test_rewriting_a_loose_config_makes_it_0600(tmp_path: Path) -> None:
    path = tmp_path / "runner.json"
    path.write_text("{}")
    os.chmod(path, 0o644)
    config_save(path, RunnerConfig(token="rnr_x"))
    assert mode_of(path) == 0o600


def test_a_missing_config_is_empty_and_a_broken_one_is_an_error(tmp_path: Path) -> None:
    assert config_load(tmp_path / "absent.json") == RunnerConfig()
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(ConfigError, match="not a valid runner config"):
        config_load(broken)


def test_the_mcp_endpoint_is_the_base_url_plus_mcp() -> None:
    assert mcp_url("http://127.0.0.1:8000") == "http://127.0.0.1:8000/mcp"
    assert mcp_url("https://everdict.example/") == "https://everdict.example/mcp"
    assert mcp_url("https://everdict.example/mcp") == "https://everdict.example/mcp"


def test_detected_capabilities_name_python_and_the_os() -> None:
    found = detected_capabilities()
    assert found[:2] == ["python", os_name()]
    assert os_name() in {"linux", "darwin", "windows"}


def test_capabilities_merge_without_duplicates_in_order() -> None:
    assert merge_capabilities(["gpu", "python"], ["python", "linux"]) == ["gpu", "python", "linux"]


def test_a_token_is_never_shown_whole() -> None:
    assert mask_token("rnr_abcdefghijklmnopqrstuvwxyz") == "rnr_abcd…"
    assert mask_token(None) == "(none)"


def test_an_entry_matches_a_name_a_workspace_and_a_version() -> None:
    harness = HarnessId.of(make_job(["true"], name="echo"))  # acme/echo@1
    for entry in ("echo", "echo@1", "echo@v1", "acme/echo", "acme/echo@1"):
        assert Entry.parse(entry).covers(harness), entry
    for entry in ("echo@2", "other", "beta/echo", "acme/echo@2", "acme/other@1"):
        assert not Entry.parse(entry).covers(harness), entry


def test_backoff_grows_with_jitter_up_to_the_cap_and_resets() -> None:
    backoff = Backoff(base_s=0.5, cap_s=10.0)
    delays = [backoff.next_delay() for _ in range(12)]
    assert 0.25 <= delays[0] <= 0.5
    assert all(delay <= 10.0 for delay in delays)
    assert max(delays[6:]) >= 5.0
    backoff.reset()
    assert backoff.next_delay() <= 0.5
