"""Redaction with the member's RE2 patterns: what is marked, what is refused (how fast:
bench/redaction.py)."""

from __future__ import annotations

import pytest

from runnercli.text.redact import RedactError, Redactor
from tests.runnercli.gitrepos import PNG

KEY = "sk-" + "A1b2C3d4" * 4
PATTERNS = [r"sk-[A-Za-z0-9]{20,}", r"(?i)password=\S+"]


def test_each_match_is_replaced_and_a_patterns_flags_stay_its_own() -> None:
    redactor = Redactor(PATTERNS)
    assert redactor.text(f"using {KEY} and PASSWORD=hunter2 now") == (
        "using [redacted] and [redacted] now"
    )
    # (?i) belongs to the second pattern only: an upper-case key is not the first's.
    assert redactor.text("SK-" + "A1B2C3D4" * 4) == "SK-" + "A1B2C3D4" * 4
    assert redactor.lines(["plain", f"key {KEY}"]) == ["plain", "key [redacted]"]


def test_patterns_rejected_up_front_name_the_bad_one() -> None:
    cases = [
        (["ok", r"(?<=x)y"], "redact pattern 2 '(?<=x)y' is not an RE2 pattern"),
        ([r"(a"], "redact pattern 1 '(a' is not an RE2 pattern: missing )"),
        ([r"(a)\1"], "is not an RE2 pattern: invalid escape sequence"),
        (["ok", ""], "redact pattern 2 must be a non-empty string"),
        ([r"a*"], "redact pattern 1 'a*' matches the empty string"),
        ([3], "redact pattern 1 must be a non-empty string, not 3"),
    ]
    for patterns, message in cases:
        with pytest.raises(RedactError) as refused:
            Redactor(patterns)  # type: ignore[arg-type]
        assert message in str(refused.value)


def test_a_pattern_that_also_matches_nothing_somewhere_marks_only_real_matches() -> None:
    assert Redactor([r"token\d+|\b"]).text("a token42 b") == "a [redacted] b"


def test_a_quoted_pattern_runs_apart_from_the_others() -> None:
    redactor = Redactor([r"\Qa.b", r"c+d"])
    assert redactor.text("a.b axb ccd") == "[redacted] axb [redacted]"


def test_text_blobs_are_redacted_and_binary_ones_left_alone() -> None:
    redactor = Redactor(PATTERNS)
    diff = f"+api_key = {KEY}\n-old\n".encode()
    assert redactor.bytes_if_text(diff, "text/x-diff") == b"+api_key = [redacted]\n-old\n"
    latin1 = f"caf\xe9 {KEY}\n".encode("latin-1")
    assert redactor.bytes_if_text(latin1, "text/plain") == b"caf\xe9 [redacted]\n"
    svg = f"<svg><!-- {KEY} --></svg>".encode()
    assert redactor.bytes_if_text(svg, "image/svg+xml") == b"<svg><!-- [redacted] --></svg>"
    png = PNG + KEY.encode()
    assert redactor.bytes_if_text(png, "image/png") == png
    assert redactor.bytes_if_text(png, None) == png  # a NUL byte near the start: binary
    assert redactor.bytes_if_text(KEY.encode(), "image/png") == KEY.encode()
    assert redactor.bytes_if_text(KEY.encode(), "application/octet-stream") == b"[redacted]"


def test_a_config_without_patterns_changes_nothing_and_a_bad_key_is_refused() -> None:
    none = Redactor.of_config({"server": "x"})
    assert not none
    assert none.text(KEY) == KEY
    assert none.bytes_if_text(KEY.encode(), "text/plain") == KEY.encode()
    with pytest.raises(RedactError, match='"redact" must be a list'):
        Redactor.of_config({"redact": "sk-.*"})
    assert Redactor.of_config({"redact": PATTERNS}).text(KEY) == "[redacted]"


def test_a_mebibyte_is_redacted_whole_as_text_and_as_bytes() -> None:
    # How fast: bench/redaction.py, beside Python's re in the same run.
    redactor = Redactor([*PATTERNS, r"ghp_[A-Za-z0-9]{36}", r"AKIA[0-9A-Z]{16}"])
    line = "lorem ipsum dolor sit amet, consectetur adipiscing elit " * 18 + "\n"
    text = "".join(line if n % 10 else f"{KEY} {line}" for n in range(1100))
    assert len(text) > 1 << 20
    redacted = redactor.text(text)
    as_bytes = redactor.bytes_if_text(text.encode(), "text/plain")
    clean = redactor.text(text.replace(KEY, "nothing"))
    assert redacted.count("[redacted]") == 110
    assert as_bytes == redacted.encode()
    assert "[redacted]" not in clean
