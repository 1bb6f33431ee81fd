"""What the runner prints of the server's strings, and how it shows a command."""

from __future__ import annotations

import io

from runnercli.case.consent.prompt import describe, how_it_runs
from runnercli.console.status import StatusLine
from runnercli.console.terminal import clean, quote_argv
from tests.runnercli.conftest import make_job


def test_escape_sequences_and_control_characters_become_visible_text() -> None:
    assert clean("key\x1b[2Kfake ✓ completed") == "key\\x1b[2Kfake ✓ completed"
    assert clean("a\x9b31mb\x07c\rd\ne\x7f") == "a\\x9b31mb\\x07c\\x0dd\\x0ae\\x7f"
    assert clean("rm \u202eflow") == "rm \\u202eflow"
    assert clean("plain, accented é and emoji 🎉") == "plain, accented é and emoji 🎉"
    assert clean(clean("\x1b]0;title\x07")) == clean("\x1b]0;title\x07")  # idempotent


def test_a_status_line_in_a_log_prints_a_hostile_case_key_harmlessly() -> None:
    stream = io.StringIO()
    with StatusLine(stream, live=False) as status:
        status.set("running case evil\x1b[2K")
        status.event("run 1 case evil\x1b[2K\x1b[1A: ✓ completed")
        status.result("\x1b]0;pwned\x07done")
    printed = stream.getvalue()
    assert "\x1b" not in printed and "\x07" not in printed
    assert "case evil\\x1b[2K\\x1b[1A: ✓ completed" in printed


def test_each_argv_element_is_quoted_so_its_bounds_show() -> None:
    assert quote_argv(["python", "-c", "print('hi there')"]) == (
        "'python' '-c' 'print('\"'\"'hi there'\"'\"')'"
    )
    assert quote_argv(["echo", "a b", ""]) == "'echo' 'a b' ''"


def test_a_command_that_starts_a_shell_says_so() -> None:
    for argv in (
        ["sh", "-c", "echo hi"],
        ["/bin/bash", "-lc", "make"],
        ["zsh", "-ec", "x"],
        ["/usr/bin/env", "FOO=1", "dash", "-c", "x"],
        ["fish", "-c", "x"],
        ["cmd.exe", "/C", "dir"],
        ["powershell", "-Command", "Get-Item"],
        ["pwsh", "-c", "x"],
        ["bash", "script.sh"],
    ):
        assert how_it_runs(argv).startswith("THROUGH A SHELL"), argv
    assert how_it_runs(["python", "run.py"]).startswith("argv, no shell")
    assert "runs the code given on its command line" in how_it_runs(["python3", "-c", "1"])
    assert "runs the code given on its command line" in how_it_runs(["node", "-e", "1"])


def test_the_description_shows_argv_env_values_and_who() -> None:
    job = make_job(
        ["sh", "-c", "echo {input.word}"],
        input={"word": "hi"},
        env={"NO_COLOR": "1", "API_BASE": "https://example.test/\x1b[2K"},
        key="k\x1b[2K",
    )
    lines = "\n".join(describe(job))
    assert "'sh' '-c' 'echo {input.word}'" in lines
    assert "THROUGH A SHELL (sh)" in lines
    assert "this case:   'sh' '-c' 'echo hi'" in lines
    assert "API_BASE='https://example.test/\\x1b[2K'" in lines
    assert "NO_COLOR='1'" in lines
    assert "written by:  alice" in lines
    assert "run by:      alice (run 1, case 'k\\x1b[2K')" in lines
    assert "timeout:     30 s" in lines
    assert "workspace:   acme" in lines
    assert "\x1b" not in lines
