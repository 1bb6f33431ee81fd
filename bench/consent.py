"""What consent costs a runner per case, beside the `--allow-any` baseline of the same run.

Every job is checked before it runs: its digest recomputed from the spec, its environment
against the refused keys, and — unless `--allow-any` — the trust store (`trust.json`) read
afresh, so an `allow` typed in another terminal counts at once. This times `Consent.decide`
in-process (no server: the decision is local) for the baseline, a session `--allow` entry,
and a trust-store entry in a store of `--entries` entries over `--servers` servers; and the
one-off `git --version` probe a session makes for the fingerprint.

    .venv/bin/python bench/consent.py [--jobs 2000] [--entries 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from report import Summary, finish
from stats import ms, pct

from runnercli.case.consent.decide import Consent
from runnercli.case.consent.settings import ConsentSettings
from runnercli.case.consent.trust import Entry, TrustStore
from runnercli.case.tools import probe
from runnercli.console.status import StatusLine
from runnercli.protocol import CaseJob, HarnessSpec, harness_digest

SERVER = "https://everdict.example"


def job(job_id: int) -> CaseJob:
    spec = HarnessSpec(command=["claude", "-p", "{input.prompt}"], env={"NO_COLOR": "1"})
    return CaseJob.model_validate(
        {
            "job_id": job_id,
            "attempt_id": job_id,
            "lease_epoch": 1,
            "run_id": 1,
            "workspace": "acme",
            "submitted_by": "alice",
            "case": {"key": f"c{job_id}", "input": {"prompt": "hi"}},
            "harness": {
                "name": "agent",
                "version": 3,
                "digest": harness_digest(spec),
                "author": "bob",
                "spec": spec.model_dump(),
            },
            "timeout_s": 600,
        }
    )


def timed(settings: ConsentSettings, jobs: list[CaseJob]) -> list[float]:
    async def decide_all() -> list[float]:
        consent = Consent(settings, StatusLine(io.StringIO(), live=False))
        never = asyncio.Event()
        samples = []
        for one in jobs:
            started = time.perf_counter()
            decision = await consent.decide(one, kill=never, stop=never)
            samples.append(time.perf_counter() - started)
            assert decision.outcome.value == "run", decision
        return samples

    return asyncio.run(decide_all())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--entries", type=int, default=1000)
    parser.add_argument("--servers", type=int, default=10)
    parser.add_argument("--summary-json", default=None)
    # Accepted for run_all.py; the decision touches no database.
    parser.add_argument("--sqlite", action="store_true")
    parser.add_argument("--postgres", default=None)
    args = parser.parse_args()

    jobs = [job(i) for i in range(args.jobs)]
    summary = Summary(f"consent: Consent.decide per case, {args.jobs} cases")
    with tempfile.TemporaryDirectory() as tmp:
        trust_file = Path(tmp) / "trust.json"
        for s in range(args.servers):
            store = TrustStore(trust_file, SERVER if s == 0 else f"https://other-{s}.example")
            for e in range(args.entries // args.servers):
                store.add(Entry("acme", f"harness-{e}", None))
        TrustStore(trust_file, SERVER).add(Entry.parse("acme/agent@3"))
        baseline = timed(ConsentSettings(trust_file, SERVER, allow_any=True), jobs)
        allowed = [Entry.parse("acme/agent")]
        session = timed(ConsentSettings(trust_file, SERVER, session=allowed), jobs)
        stored = timed(ConsentSettings(trust_file, SERVER), jobs)
        size = trust_file.stat().st_size
    base_p50 = pct(baseline, 50)
    summary.add(
        benchmark="consent",
        figure="--allow-any p50 (baseline)",
        value=ms(base_p50),
        baseline=ms(base_p50),
        ratio="1.0x",
        target="-",
    )
    for label, samples in (
        ("session --allow p50", session),
        (f"trust store p50 ({args.entries + 1} entries, {size // 1024} KiB)", stored),
    ):
        p50 = pct(samples, 50)
        summary.add(
            benchmark="consent",
            figure=label,
            value=ms(p50),
            baseline=ms(base_p50),
            ratio=f"{p50 / base_p50:.1f}x",
            target="< 5 ms",
            met=p50 < 0.005,
        )
    if shutil.which("git"):
        started = time.perf_counter()
        version = asyncio.run(probe("git"))
        summary.add(
            benchmark="consent",
            figure=f"git --version probe, once per session ({version})",
            value=ms(time.perf_counter() - started),
            baseline="-",
            ratio="-",
            target="< 5 s (its bound)",
            met=True,
        )
    summary.notes.append(
        "the baseline recomputes the digest and checks the environment; the others add "
        "reading trust.json (and pinning, first time only)"
    )
    finish(summary, args)


if __name__ == "__main__":
    main()
