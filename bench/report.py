"""A benchmark's summary: rows of figures beside their baselines, printed and written as JSON."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from databases import Scratch


@dataclass
class Row:
    """One line of a benchmark's summary: a figure beside its same-run baseline."""

    benchmark: str
    figure: str
    value: str
    baseline: str
    ratio: str
    target: str
    met: bool | None = None


@dataclass
class Summary:
    title: str
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, **kwargs: Any) -> None:
        self.rows.append(Row(**kwargs))


def print_table(rows: Sequence[Row], out: Any = None) -> None:
    out = out or sys.stdout
    header = ("benchmark", "figure", "value", "baseline", "ratio", "target", "met")
    cells = [
        (
            r.benchmark,
            r.figure,
            r.value,
            r.baseline,
            r.ratio,
            r.target,
            "-" if r.met is None else ("yes" if r.met else "NO"),
        )
        for r in rows
    ]
    widths = [max(len(str(c[i])) for c in [header, *cells]) for i in range(len(header))]
    line = "  ".join(f"{{:<{w}}}" for w in widths)
    print(line.format(*header), file=out)
    print("  ".join("-" * w for w in widths), file=out)
    for c in cells:
        print(line.format(*c), file=out)


def finish(summary: Summary, args: argparse.Namespace) -> None:
    """Print the compact table (and the notes) and write it as JSON when asked."""
    print()
    print(f"== {summary.title}")
    print_table(summary.rows)
    for note in summary.notes:
        print(f"  note: {note}")
    if args.summary_json:
        Path(args.summary_json).write_text(
            json.dumps(
                {
                    "title": summary.title,
                    "rows": [asdict(r) for r in summary.rows],
                    "notes": summary.notes,
                },
                indent=2,
            )
        )


def machine_line(scratch: Scratch) -> str:
    load = os.getloadavg()
    return (
        f"{scratch.vendor} scratch database, {os.cpu_count()} cores, "
        f"load average {load[0]:.2f} at start"
    )
