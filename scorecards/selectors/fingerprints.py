"""Where and with what a run's cases ran: its distinct fingerprints, and what differs between
the fingerprints of two runs ("claude 2.0.14 → 2.1.0 on 40 of 40 cases").

A fingerprint is what the runner reported with each result (`CaseResult.fingerprint` of the
wire contract): the runner's version, the OS and its version, the architecture, Python, the
digest of the harness content executed and the versions of the tools behind it.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

from django.db.models import TextField
from django.db.models.functions import Cast

from scorecards.models import CaseResult, Run, Verdict
from scorecards.selectors.compare import Comparison

# The machine's facts, by the name a page shows them under.
FACTS = (
    ("runner", "runnercli_version"),
    ("OS", "os"),
    ("OS version", "os_version"),
    ("arch", "arch"),
    ("Python", "python"),
    ("harness", "harness_digest"),
    ("agent config", "agent_config"),
)
MACHINE_FACTS = frozenset(label for label, _ in FACTS)
DIGEST_SHOWN = 12
NONE = "(none)"
# An agent CLI's own configuration, as a fact: "claude settings".
SETTINGS = " settings"


def fingerprint_facts(fingerprint: Any) -> dict[str, str]:
    """A fingerprint as named facts, tools included (`claude` → `2.1.0`); empty ones left out."""
    if not isinstance(fingerprint, dict):
        return {}
    facts = {label: str(fingerprint.get(key) or "") for label, key in FACTS}
    facts["harness"] = facts["harness"][:DIGEST_SHOWN]
    tools = fingerprint.get("tools")
    if isinstance(tools, dict):
        facts |= {str(name): str(version) for name, version in sorted(tools.items())}
    agents = fingerprint.get("agent_settings")
    if isinstance(agents, dict):
        for tool, settings in sorted(agents.items()):
            if isinstance(settings, dict):
                facts[f"{tool}{SETTINGS}"] = settings_fact(settings)
    return {label: value for label, value in facts.items() if value}


def settings_fact(settings: dict[str, Any]) -> str:
    """An agent CLI's configuration digests as one fact: `hooks 1a2b3c4d, settings …`."""
    shown = [f"{name} {str(digest)[:8]}" for name, digest in sorted(settings.items()) if digest]
    return ", ".join(shown) or NONE


def _parts(fact: str) -> dict[str, str]:
    if fact == NONE:
        return {}
    return dict(part.split(" ", 1) for part in fact.split(", ") if " " in part)


def settings_difference(before: str, after: str) -> str:
    """What differs between two configurations' facts: "hooks added, instructions changed"."""
    a, b = _parts(before), _parts(after)
    said = []
    for name in sorted({*a, *b}):
        if a.get(name) != b.get(name):
            said.append(
                f"{name} {'added' if name not in a else 'removed' if name not in b else 'changed'}"
            )
    return ", ".join(said)


def _machine(label: str) -> bool:
    return label in MACHINE_FACTS or label.endswith(SETTINGS)


@dataclass(frozen=True)
class FingerprintGroup:
    """One distinct fingerprint of a run: its facts, how many results, from which runners."""

    facts: dict[str, str]
    results: int
    runners: list[str]

    @property
    def machine(self) -> dict[str, str]:
        """The machine's and runner's facts, the tools left out."""
        return {label: value for label, value in self.facts.items() if _machine(label)}

    @property
    def tools(self) -> dict[str, str]:
        """Each tool's version by its name (`claude` → `2.1.197`): a page shows them as chips."""
        return {label: value for label, value in self.facts.items() if not _machine(label)}


def run_fingerprints(run: Run) -> list[FingerprintGroup]:
    """The run's distinct fingerprints, the most common first (results that never ran, such
    as a refused case, have none)."""
    counts: Counter[str] = Counter()
    runners: dict[str, dict[str, None]] = {}
    rows = run.results.values_list("fingerprint", "provenance")
    for fingerprint, provenance in rows.iterator(chunk_size=2000):
        facts = fingerprint_facts(fingerprint)
        if not facts:
            continue
        key = json.dumps(facts, sort_keys=True)
        counts[key] += 1
        runner = str((provenance or {}).get("runner", "")).partition("/")[2]
        runners.setdefault(key, {})[runner or "?"] = None
    return [
        FingerprintGroup(facts=json.loads(key), results=n, runners=list(runners[key]))
        for key, n in counts.most_common()
    ]


@dataclass(frozen=True)
class FingerprintChange:
    """One fact that differs between the two runs, on how many of the cases both ran."""

    fact: str
    before: str
    after: str
    cases: int
    of: int

    def __str__(self) -> str:
        if self.fact.endswith(SETTINGS):
            what = settings_difference(self.before, self.after)
            return f"{self.fact} differ on {self.cases} of {self.of} cases: {what}"
        return f"{self.fact} {self.before} → {self.after} on {self.cases} of {self.of} cases"


def _first_fingerprints(run: Run) -> dict[str, Any]:
    """The fingerprint of each case's first repeat in the run, by key (as the results' text,
    decoded once per distinct fingerprint by the caller)."""
    first = CaseResult.objects.filter(run=run, repeat=0).exclude(verdict=Verdict.SKIPPED)
    return dict(first.values_list("case__key", Cast("fingerprint", TextField())))


def fingerprint_changes(comparison: Comparison) -> list[FingerprintChange]:
    """What differs between run A's and run B's fingerprints, case by case over the cases both
    ran, most common first."""
    a, b = _first_fingerprints(comparison.a), _first_fingerprints(comparison.b)
    texts = Counter((a[key] or "", b[key] or "") for key in a.keys() & b.keys())
    facts = {t: fingerprint_facts(json.loads(t) if t else None) for pair in texts for t in pair}
    # In a fixed order: the facts first seen break ties between changes as common.
    weighted = [((facts[ta], facts[tb]), n) for (ta, tb), n in sorted(texts.items())]
    pairs = [(pair, n) for pair, n in weighted if pair[0] and pair[1]]
    changed: Counter[tuple[str, str, str]] = Counter()
    order: dict[str, int] = {}
    for (before_facts, after_facts), cases in pairs:
        for fact in [*before_facts, *(name for name in after_facts if name not in before_facts)]:
            order.setdefault(fact, len(order))
            before, after = before_facts.get(fact, NONE), after_facts.get(fact, NONE)
            if before != after:
                changed[(fact, before, after)] += cases
    paired = sum(cases for _, cases in pairs)
    return [
        FingerprintChange(fact, before, after, cases=n, of=paired)
        for (fact, before, after), n in sorted(
            changed.items(), key=lambda item: (-item[1], order[item[0][0]])
        )
    ]
