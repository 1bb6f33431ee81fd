"""Running one case on this machine: argv rendering, environment, bounds, timeouts, kills."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest

from runnercli.case import advisory_usage, run_case
from runnercli.case.argv import StartError, render_argv
from runnercli.case.input import CASE_ENV
from runnercli.protocol import (
    CaseJob,
    CaseRef,
    CaseResult,
)
from tests.runnercli.conftest import make_job

Script = Callable[[str], list[str]]

# The contract's bounds, written here rather than read from the code under test.
MAX_OUTPUT_BYTES = 1024 * 1024
MAX_STDERR_TAIL_BYTES = 64 * 1024
MAX_LOG_LINE_BYTES = 8 * 1024


def run(job: CaseJob, **kwargs: Any) -> tuple[CaseResult, list[str]]:
    lines: list[str] = []
    result = asyncio.run(run_case(job, on_stderr_line=lines.append, **kwargs))
    return result, lines


def gone(pid: int) -> bool:
    """True when the process no longer runs (a zombie awaiting its reaper counts as gone)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def wait_gone(pids: list[int], timeout: float = 5) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(gone(pid) for pid in pids):
            return True
        time.sleep(0.05)
    return False


# ---- argv rendering


def test_a_hostile_input_stays_one_argv_element() -> None:
    case = CaseRef(key="k", input={"prompt": "; rm -rf / && echo $(whoami) `id` | cat"})
    argv = render_argv(["tool", "-p", "{input.prompt}", "--out"], case)
    assert argv == ["tool", "-p", "; rm -rf / && echo $(whoami) `id` | cat", "--out"]


def test_it_substitutes_the_case_key_nested_paths_and_text_around_placeholders() -> None:
    case = CaseRef(key="case-7", input={"a": {"b": ["x", "y"]}, "n": 3, "flag": True})
    argv = render_argv(
        ["--key={case.key}", "{input.a.b.1}", "{input.n}", "{input.flag}", "{input.a}"], case
    )
    assert argv == ["--key=case-7", "y", "3", "true", '{"b": ["x", "y"]}']


def test_a_placeholder_the_case_cannot_fill_is_a_start_error() -> None:
    with pytest.raises(StartError, match=r"\{input.missing\}"):
        render_argv(["{input.missing}"], CaseRef(key="k", input={"prompt": "hi"}))


def test_the_harness_receives_shell_metacharacters_literally(
    script: Script, tmp_path: Path
) -> None:
    argv = script("import json, sys; print(json.dumps(sys.argv[1:]))")
    hostile = f"$(touch {tmp_path}/pwned); touch {tmp_path}/pwned2"
    result, _ = run(make_job([*argv, "{input.prompt}"], input={"prompt": hostile}))
    assert result.status == "completed"
    assert json.loads(result.output) == [hostile]
    assert not (tmp_path / "pwned").exists()
    assert not (tmp_path / "pwned2").exists()


# ---- environment and working directory


def test_the_case_json_and_the_spec_env_reach_the_harness_but_not_the_token(
    script: Script, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVERDICT_RUNNER_TOKEN", "rnr_secret")
    argv = script(
        """
        import json, os
        print(json.dumps({
            "case": json.loads(os.environ["EVERDICT_CASE"]),
            "mode": os.environ.get("MODE"),
            "token": os.environ.get("EVERDICT_RUNNER_TOKEN"),
        }))
        """
    )
    job = make_job(argv, key="k9", input={"prompt": "hi"}, env={"MODE": "strict"})
    result, _ = run(job)
    seen = json.loads(result.output)
    assert seen["case"] == {"key": "k9", "input": {"prompt": "hi"}}
    assert seen["mode"] == "strict"
    assert seen["token"] is None
    assert CASE_ENV == "EVERDICT_CASE"


def test_each_case_runs_in_a_fresh_temp_dir_that_is_removed_after(script: Script) -> None:
    argv = script(
        """
        import os
        open("left-behind.txt", "w").write("x")
        print(os.getcwd())
        print(sorted(os.listdir(".")))
        """
    )
    first, _ = run(make_job(argv))
    second, _ = run(make_job(argv))
    first_dir, listing = first.output.splitlines()
    second_dir = second.output.splitlines()[0]
    assert listing == "['left-behind.txt']"  # it started empty
    assert first_dir != second_dir
    assert os.path.basename(first_dir).startswith("everdict-case-")
    assert not os.path.exists(first_dir)
    assert not os.path.exists(second_dir)


# ---- results


def test_it_reports_exit_code_duration_runner_info_and_advisory_usage(script: Script) -> None:
    argv = script(
        """
        import json, sys
        print(json.dumps({"result": "ok", "total_cost_usd": 0.25,
                          "usage": {"input_tokens": 10, "output_tokens": 4}}))
        sys.exit(3)
        """
    )
    result, _ = run(make_job(argv))
    assert result.status == "completed"
    assert result.exit_code == 3
    assert result.duration_ms > 0
    assert result.usage == {"total_cost_usd": 0.25, "input_tokens": 10, "output_tokens": 4}
    assert result.fingerprint.python
    assert result.fingerprint.os in {"linux", "darwin", "windows"}


def test_usage_is_none_when_the_output_is_not_json_or_carries_none() -> None:
    assert advisory_usage("plain text") is None
    assert advisory_usage('{"result": "x"}') is None
    assert advisory_usage('["list"]') is None
    assert advisory_usage('{"input_tokens": true, "output_tokens": 2}') == {"output_tokens": 2}


def test_a_program_that_does_not_exist_is_a_start_error() -> None:
    with pytest.raises(StartError, match="program not found: no-such-harness-binary"):
        run(make_job(["no-such-harness-binary", "{case.key}"]))


def test_stdout_is_kept_up_to_one_mebibyte(script: Script) -> None:
    argv = script(
        """
        import sys
        sys.stdout.write("a" * (1024 * 1024 + 500_000))
        """
    )
    notes: list[str] = []
    result, _ = run(make_job(argv), on_note=notes.append)
    assert result.status == "completed"
    assert len(result.output.encode()) == MAX_OUTPUT_BYTES
    assert notes == [f"stdout was {1024 * 1024 + 500_000} bytes; kept the first {MAX_OUTPUT_BYTES}"]


def test_stderr_keeps_its_tail_and_streams_bounded_lines(script: Script) -> None:
    argv = script(
        """
        import sys
        for i in range(3000):
            sys.stderr.write(f"line {i:05d} " + "x" * 40 + "\\n")
        sys.stderr.write("y" * 20000)
        sys.stderr.write("\\nlast line")
        """
    )
    result, lines = run(make_job(argv))
    assert len(result.stderr_tail.encode()) <= MAX_STDERR_TAIL_BYTES
    assert result.stderr_tail.endswith("last line")
    assert "line 00000" not in result.stderr_tail
    assert lines[0].startswith("line 00000")
    assert lines[2999].startswith("line 02999")
    assert lines[-1] == "last line"
    assert all(len(line.encode()) <= MAX_LOG_LINE_BYTES for line in lines)
    assert "".join(lines[3000:-1]) == "y" * 20000  # the endless line came in bounded pieces


def test_a_long_line_is_cut_between_characters_never_inside_one(script: Script) -> None:
    argv = script(
        """
        import sys
        sys.stderr.buffer.write(("é" * 10000 + "\\n").encode())
        """
    )
    _, lines = run(make_job(argv))
    assert "".join(lines) == "é" * 10000
    assert len(lines) == 3
    assert all(len(line.encode()) <= MAX_LOG_LINE_BYTES for line in lines)


# ---- timeouts and kills


GRANDPARENT = """
    import subprocess, sys, time
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    with open(sys.argv[1], "w") as f:
        f.write(f"{__import__('os').getpid()} {child.pid}")
    time.sleep(60)
"""


def read_pids(path: Path, timeout: float = 10) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and len(path.read_text().split()) == 2:
            return [int(pid) for pid in path.read_text().split()]
        time.sleep(0.05)
    raise AssertionError("the harness never wrote its pids")


def test_a_timeout_kills_the_whole_process_group(script: Script, tmp_path: Path) -> None:
    pids_file = tmp_path / "pids"
    job = make_job([*script(GRANDPARENT), str(pids_file)], timeout_s=1)
    started = time.monotonic()
    result, _ = run(job)
    assert result.status == "timeout"
    assert result.exit_code is None
    assert time.monotonic() - started < 8
    assert wait_gone(read_pids(pids_file))


def test_a_harness_ignoring_sigterm_is_killed_after_the_grace(
    script: Script, tmp_path: Path
) -> None:
    pids_file = tmp_path / "pids"
    argv = script(
        """
        import os, signal, sys, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        open(sys.argv[1], "w").write(f"{os.getpid()} {os.getpid()}")
        time.sleep(60)
        """
    )
    result, _ = run(make_job([*argv, str(pids_file)], timeout_s=1), term_grace_s=0.5)
    assert result.status == "timeout"
    assert wait_gone(read_pids(pids_file))


def test_a_kill_ends_the_process_group_at_once(script: Script, tmp_path: Path) -> None:
    pids_file = tmp_path / "pids"
    job = make_job([*script(GRANDPARENT), str(pids_file)], timeout_s=60)

    async def kill_when_started() -> CaseResult:
        kill = asyncio.Event()
        task = asyncio.create_task(run_case(job, on_stderr_line=lambda _: None, kill=kill))
        while not pids_file.exists():
            await asyncio.sleep(0.05)
        kill.set()
        return await task

    started = time.monotonic()
    result = asyncio.run(kill_when_started())
    assert result.status == "canceled"
    assert time.monotonic() - started < 8
    assert wait_gone(read_pids(pids_file), timeout=2)


def test_leftover_processes_are_ended_when_the_harness_exits(
    script: Script, tmp_path: Path
) -> None:
    pids_file = tmp_path / "pids"
    argv = script(
        """
        import os, subprocess, sys
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                                 stdout=subprocess.DEVNULL)
        open(sys.argv[1], "w").write(f"{os.getpid()} {child.pid}")
        print("done")
        """
    )
    result, _ = run(make_job([*argv, str(pids_file)]))
    assert result.status == "completed"
    assert result.output == "done\n"
    assert wait_gone(read_pids(pids_file), timeout=2)


# ---- the case file


def test_a_300_kb_case_reaches_the_harness_through_the_case_file_only(script: Script) -> None:
    argv = script(
        """
        import json, os, stat, sys
        path = os.environ["EVERDICT_CASE_FILE"]
        case = json.load(open(sys.argv[1]))
        print(json.dumps({
            "same_file": path == sys.argv[1],
            "mode": oct(stat.S_IMODE(os.stat(path).st_mode)),
            "size": len(case["input"]["blob"]),
            "key": case["key"],
            "in_env": "EVERDICT_CASE" in os.environ,
        }))
        """
    )
    job = make_job([*argv, "{case.file}"], key="big", input={"blob": "x" * 300_000})
    result, _ = run(job)
    assert result.status == "completed", result.stderr_tail
    seen = json.loads(result.output)
    assert seen == {
        "same_file": True,
        "mode": "0o600",
        "size": 300_000,
        "key": "big",
        "in_env": False,  # over 64 KiB: the file only
    }


def test_a_small_case_is_both_in_the_file_and_on_the_environment(script: Script) -> None:
    argv = script(
        """
        import json, os
        on_disk = json.load(open(os.environ["EVERDICT_CASE_FILE"]))
        print(json.dumps(on_disk == json.loads(os.environ["EVERDICT_CASE"])))
        """
    )
    result, _ = run(make_job(argv, input={"prompt": "hi"}))
    assert result.output.strip() == "true", result.stderr_tail


def test_an_argv_element_over_128_kib_is_refused_pointing_at_the_case_file(
    script: Script,
) -> None:
    argv = script("print('never')")
    job = make_job([*argv, "{input.blob}"], input={"blob": "y" * 140_000})
    with pytest.raises(StartError, match=r"argv element 2 is 140000 bytes.*\{case\.file\}"):
        run(job)
