"""A run by host: pass rate, count and mean duration per runner and per distinct fingerprint
(OS, tool versions, repo commit).

One grouped statement per run: the database groups its results by runner and by the facts of
their fingerprint; only those groups (a handful of rows) reach Python.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count, F, Q, Sum
from django.db.models.fields.json import KT, KeyTransform

from runners.models import Runner
from scorecards.models import CaseResult, Run, Verdict


@dataclass
class HostGroup:
    """Results of one runner, or of one distinct fingerprint."""

    label: str
    facts: dict[str, str] = field(default_factory=dict)
    runners: list[str] = field(default_factory=list)
    results: int = 0
    passes: int = 0
    duration_ms: int = 0

    @property
    def pass_rate(self) -> float | None:
        return round(self.passes / self.results, 4) if self.results else None

    @property
    def mean_duration_ms(self) -> int | None:
        return round(self.duration_ms / self.results) if self.results else None

    def add(self, results: int, passes: int, duration_ms: int) -> None:
        self.results += results
        self.passes += passes
        self.duration_ms += duration_ms


@dataclass(frozen=True)
class ByHost:
    runners: list[HostGroup]
    fingerprints: list[HostGroup]


def host_facts(
    os: Any, os_version: Any, tools: Any, repo: Any = None, dirty: Any = None
) -> dict[str, str]:
    """The facts that tell hosts apart: OS and version, tool versions, the repo's commit."""
    facts = {"OS": " ".join(str(v) for v in (os, os_version) if v)}
    if isinstance(tools, str):
        try:
            tools = json.loads(tools)
        except ValueError:
            tools = {}
    if isinstance(tools, dict):
        facts |= {str(name): str(version) for name, version in sorted(tools.items())}
    if repo:
        facts["repo"] = str(repo)[:12] + ("+dirty" if dirty in (True, "true", 1) else "")
    return {k: v for k, v in facts.items() if v}


def facts_text(facts: dict[str, str]) -> str:
    """`claude 2.1.0, linux 6.1`: tools first, then the OS and the repo commit."""
    tools = [f"{k} {v}" for k, v in facts.items() if k not in ("OS", "repo")]
    rest = [facts[k] if k == "OS" else f"repo {facts[k]}" for k in ("OS", "repo") if k in facts]
    return ", ".join(tools + rest)


def run_by_host(run: Run) -> ByHost:
    """Per runner and per distinct fingerprint: results, passes and mean duration (results
    that never reached a runner are left out)."""
    rows = (
        CaseResult.objects.filter(run=run, runner__isnull=False)
        .values(
            "runner_id",
            os=KT("fingerprint__os"),
            os_version=KT("fingerprint__os_version"),
            tools=KeyTransform("tools", "fingerprint"),
            repo=KT("fingerprint__repo__sha"),
            dirty=KT("fingerprint__repo__dirty"),
        )
        .annotate(
            n=Count("pk"),
            passes=Count("pk", filter=Q(verdict=Verdict.PASS)),
            took=Sum(F("duration_ms")),
        )
        .order_by()
    )
    groups = list(rows)
    labels = dict(
        Runner.objects.filter(pk__in={g["runner_id"] for g in groups}).values_list("pk", "label")
    )
    runners: dict[int, HostGroup] = {}
    prints: dict[str, HostGroup] = {}
    for g in groups:
        label = labels.get(g["runner_id"], f"#{g['runner_id']}")
        counts = (g["n"], g["passes"], g["took"] or 0)
        runners.setdefault(g["runner_id"], HostGroup(label=label)).add(*counts)
        facts = host_facts(g["os"], g["os_version"], g["tools"], g["repo"], g["dirty"])
        key = json.dumps(facts, sort_keys=True)
        group = prints.setdefault(key, HostGroup(label=facts_text(facts) or "—", facts=facts))
        group.add(*counts)
        if label not in group.runners:
            group.runners.append(label)
    by_count = sorted(runners.values(), key=lambda h: (-h.results, h.label))
    return ByHost(runners=by_count, fingerprints=sorted(prints.values(), key=lambda h: -h.results))
