"""Redaction on the member's machine: the runner's redactor over a MiB of text, beside Python's
own `re` doing the same replacements, in the same run.

The member's `redact` patterns (five: an API key, a password, a GitHub token, an AWS key and
a bearer header) over 1 MiB of log text in which one line in ten carries a key: the text
redacted, the same bytes redacted as a text file is, and the text with nothing to redact —
as the runner does for a case's output, a text artifact and a clean one. Baseline: the same
three passes with one `re.sub` of the same alternation (backtracking, and refusing nothing).
Target: the three passes within 1 s.

    .venv/bin/python bench/redaction.py [--mib 1] [--repeat 5]

It uses no database: `--sqlite` / `--postgres` (as `run_all.py` passes them) are accepted.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from collections.abc import Callable

from databases import ROOT, add_database_arguments
from report import Summary, finish

sys.path.insert(0, str(ROOT))

from runnercli.text.redact import REDACTED, Redactor

KEY = "sk-" + "A1b2C3d4" * 4
PATTERNS = [
    r"sk-[A-Za-z0-9]{20,}",
    r"(?i)password=\S+",
    r"ghp_[A-Za-z0-9]{36}",
    r"AKIA[0-9A-Z]{16}",
    r"(?i)authorization: bearer \S+",
]
LINE = "lorem ipsum dolor sit amet, consectetur adipiscing elit " * 18 + "\n"
TARGET_S = 1.0


def log_text(mib: float) -> str:
    """About `mib` MiB of lines, one in ten carrying a key."""
    lines = int(mib * (1 << 20) / len(LINE)) + 1
    return "".join(LINE if n % 10 else f"{KEY} {LINE}" for n in range(lines))


def three_passes(
    text: str, redact: Callable[[str], str], redact_bytes: Callable[[bytes], bytes]
) -> float:
    """Seconds for: the text, its bytes as a text file's, the text with nothing to redact."""
    clean = text.replace(KEY, "nothing")
    data = text.encode()
    began = time.perf_counter()
    redacted = redact(text)
    as_bytes = redact_bytes(data)
    untouched = redact(clean)
    took = time.perf_counter() - began
    assert redacted.count(REDACTED) == text.count(KEY) and REDACTED not in untouched
    assert as_bytes == redacted.encode()
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=float, default=1.0, help="MiB of text (1)")
    parser.add_argument("--repeat", type=int, default=5, help="rounds (5)")
    add_database_arguments(parser)
    args = parser.parse_args()
    summary = Summary("redaction: what leaves the member's machine, redacted")
    text = log_text(args.mib)
    redactor = Redactor(PATTERNS)
    # Python's re takes a pattern's own flags only scoped to it: `(?i:…)`, not `(?i)…`.
    alternation = "|".join(
        f"(?i:{pattern[4:]})" if pattern.startswith("(?i)") else f"(?:{pattern})"
        for pattern in PATTERNS
    )
    stdlib, stdlib_bytes = re.compile(alternation), re.compile(alternation.encode())
    marker = REDACTED.encode()
    ours, theirs = [], []
    for _ in range(args.repeat):  # interleaved: drift of the machine hits both alike
        ours.append(
            three_passes(
                text, redactor.text, lambda data: redactor.bytes_if_text(data, "text/plain")
            )
        )
        theirs.append(
            three_passes(
                text,
                lambda value: stdlib.sub(REDACTED, value),
                lambda data: stdlib_bytes.sub(marker, data),
            )
        )
    value, baseline = statistics.median(ours), statistics.median(theirs)
    summary.add(
        benchmark="redaction",
        figure=f"{args.mib:g} MiB, {len(PATTERNS)} patterns: text, bytes, clean",
        value=f"{value * 1000:.0f} ms",
        baseline=f"{baseline * 1000:.0f} ms with Python's re.sub",
        ratio=f"{value / baseline:.2f}x" if baseline else "-",
        target=f"<= {TARGET_S:g} s",
        met=value <= TARGET_S,
    )
    finish(summary, args)


if __name__ == "__main__":
    main()
