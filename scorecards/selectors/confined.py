"""Whether a comparison's regressions all ran on one host of several: "all 4 regressions ran
on laptop-2, claude 2.1.0"."""

from __future__ import annotations

from scorecards.selectors.compare import REGRESSED, Comparison, Side
from scorecards.selectors.hosts import facts_text, host_facts


def _runner_label(entry: str) -> str:
    """`laptop-2` of a Side's `3/laptop-2 by alice`."""
    return entry.partition("/")[2].rpartition(" by ")[0] or entry


def _host_of(side: Side) -> str:
    fp = side.fingerprint or {}
    repo = fp.get("repo")
    repo = repo if isinstance(repo, dict) else {}
    facts = host_facts(
        fp.get("os"), fp.get("os_version"), fp.get("tools"), repo.get("sha"), repo.get("dirty")
    )
    return facts_text(facts)


def confined_regressions(comparison: Comparison) -> str:
    """`all 4 regressions ran on laptop-2, claude 2.1.0` when run B ran on several hosts and
    every regression (two or more) on one of them; "" otherwise."""
    sides = [c.b for c in comparison.changes if c.b is not None]
    regressed = [c.b for c in comparison.changes if c.change == REGRESSED and c.b is not None]
    if len(regressed) < 2:
        return ""
    what = f"all {len(regressed)} regressions ran on"
    runners = set().union(*(s.runners for s in regressed))
    hosts = {_host_of(s) for s in regressed}
    every_runner = set().union(*(s.runners for s in sides))
    if len(runners) == 1 and len(every_runner) > 1:
        label = _runner_label(next(iter(runners)))
        host = next(iter(hosts)) if len(hosts) == 1 else ""
        return f"{what} {label}" + (f", {host}" if host else "")
    if len(hosts) == 1 and len({_host_of(s) for s in sides}) > 1 and next(iter(hosts)):
        return f"{what} {next(iter(hosts))}"
    return ""
