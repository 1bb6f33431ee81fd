"""What the consent question adds for the case's world: each protocol-3 key a harness sets,
and everything that may leave this machine while and after its cases run.

The keys — the repo and the state of it the case gets, `artifacts` globs, a streamed output
format, every service in full (image or argv, command, ports, environment, scope), `slots`, a
judge's command; protocol 4's verifier, protected globs and budgets, and the paths of a case's
hidden files (never their content) — are in the harness's digest (but for the case's hidden
paths), so what the member allows is what is shown. What leaves says which of it the member
keeps here this session (`--no-files`, `--no-screens`, `--no-trace`) and how many of their
`redact` patterns hide what matches.
Every string from the server is made harmless for the terminal (`runnercli.console.terminal`).
"""

from __future__ import annotations

from runnercli.console.terminal import clean, quote_arg, quote_argv
from runnercli.protocol import CaseJob, HarnessSpec, ServiceSpec
from runnercli.protocol.presets import bypassing

INDENT = " " * 15
REF_WORDS = {
    "head": "its HEAD commit",
    "working": "HEAD plus your uncommitted tracked changes",
    "run": "the commit the run names (metadata.git_sha)",
}
STREAM_WORDS = {
    "claude-stream-json": "Claude's stream-json events, parsed into a trace",
    "codex-jsonl": "Codex's JSON lines, parsed into a trace",
}


def world_lines(job: CaseJob) -> list[str]:
    """The protocol-3 keys the harness sets, one fact a line (none for an older harness)."""
    spec = job.harness.spec
    lines: list[str] = []
    if spec.repo is not None:
        lines.append(
            f"  repo:        {clean(spec.repo.name)} at {spec.repo.ref}: a worktree of your "
            f"checkout at {REF_WORDS[spec.repo.ref]} (your checkout is not written to)"
        )
    if spec.artifacts is not None:
        globs = ", ".join(quote_arg(glob) for glob in spec.artifacts)
        lines.append(f"  artifacts:   {globs} (collected after the case)")
    if spec.output in STREAM_WORDS:
        lines.append(f"  output:      {spec.output} ({STREAM_WORDS[spec.output]})")
    for name, service in sorted((spec.services or {}).items()):
        lines += _service_lines(name, service)
    if spec.slots is not None:
        lines.append(f"  slots:       {spec.slots} of this runner's slots per case")
    lines += verify_lines(job)
    lines += _judge_lines(spec)
    if job.kind == "judge" and job.judge is not None:
        lines.append(
            f"  judging:     case {clean(job.judge.case_key)}: this command reads "
            "$EVERDICT_JUDGE_FILE (rubric, input, output, expected answer); its output is sent"
        )
    return lines


def verify_lines(job: CaseJob) -> list[str]:
    """Protocol 4: the verifier's command, the protected globs, the budgets, and the paths
    (never the content) of the case's hidden files."""
    spec = job.harness.spec
    lines: list[str] = []
    if spec.verify is not None:
        verify = spec.verify
        lines.append(
            f"  verify:      {quote_argv(verify.command)} in the worktree after the agent "
            f"(timeout {verify.timeout_s} s, {verify.output})"
        )
        lines += [
            f"{INDENT}verify env {clean(key)}={quote_arg(value)}"
            for key, value in sorted(verify.env.items())
        ]
    if spec.protect is not None:
        globs = ", ".join(quote_arg(glob) for glob in spec.protect)
        how = "fails the case" if (spec.on_tamper or "fail") == "fail" else "marks the case"
        lines.append(
            f"  protect:     {globs} (checked and restored after the agent; a change {how})"
        )
    if spec.limits is not None:
        limits = spec.limits
        said = [
            f"${limits.max_cost_usd:.2f}" if limits.max_cost_usd is not None else "",
            f"{limits.max_turns} turns" if limits.max_turns is not None else "",
            f"{limits.max_tokens:,} tokens" if limits.max_tokens is not None else "",
        ]
        lines.append(
            f"  limits:      {', '.join(s for s in said if s)} per case (the agent is stopped)"
        )
    if job.hidden:
        paths = ", ".join(quote_arg(path) for path in sorted(job.hidden)[:8])
        more = f" and {len(job.hidden) - 8} more" if len(job.hidden) > 8 else ""
        lines.append(
            f"  hidden:      {paths}{more} written into the worktree after the agent, "
            "for the verifier"
        )
    return lines


def _service_lines(name: str, service: ServiceSpec) -> list[str]:
    scope = "one per case" if service.scope == "case" else "shared by this version's cases"
    if service.image is not None:
        what = f"container {quote_arg(service.image)}"
        if service.command is not None:
            what += f", command {quote_argv(service.command)}"
        what += f", ports {', '.join(map(str, service.ports))} on 127.0.0.1"
    else:
        what = f"process {quote_argv(service.run or [])} {_where(service)}, on a free port"
    lines = [f"  service:     {clean(name)}: {what} ({scope})"]
    lines += [
        f"{INDENT}{clean(name)} env {clean(key)}={quote_arg(value)}"
        for key, value in sorted(service.env.items())
    ]
    lines.append(f"{INDENT}{clean(name)} ready: {service.probe_text()}")
    return lines


def _where(service: ServiceSpec) -> str:
    if service.cwd == "repo":
        return "in the repo's worktree"
    if service.cwd == "case" or service.scope == "case":
        return "in the case's directory"
    return "in a directory of its own"


def _judge_lines(spec: HarnessSpec) -> list[str]:
    judge = spec.grader.judge
    if judge is None:
        return []
    votes = spec.grader.votes or 1
    needs = clean(", ".join(judge.capabilities)) or "nothing"
    return [
        f"  judge:       {quote_argv(judge.command)}",
        f"{INDENT}(runs on your runners after each case, with the case's expected answer; "
        f"{votes} vote{'s' if votes != 1 else ''}, timeout {judge.timeout_s} s, needs {needs})",
    ]


def bypass_lines(command: list[str]) -> list[str]:
    """An agent CLI told to skip every permission, said loudly: it may read, change and run
    anything this user can, outside the case's directory too."""
    agent = bypassing(command)
    if agent is None:
        return []
    return [
        f"  PERMISSIONS: BYPASS — {agent.tool} runs every tool and command WITHOUT ASKING and "
        "WITHOUT A SANDBOX:",
        f"{INDENT}it can read, change and delete anything you can, outside its directory too",
    ]


def leaving(job: CaseJob, withheld: frozenset[str] = frozenset()) -> list[str]:
    """What of a case of this harness may leave the machine, each with whether it is sent."""
    spec = job.harness.spec

    def unless(kind: str, flag: str, text: str) -> str:
        return f"{text} — NOT SENT this session ({flag})" if kind in withheld else text

    sent = [
        "its output, stderr tail and log lines",
        unless("files", "--no-files", "files of its directory, when a workspace page asks"),
        unless("screens", "--no-screens", "screens it writes to $EVERDICT_SCREEN_DIR"),
        unless("trace", "--no-trace", _trace_words(spec)),
    ]
    if spec.artifacts is not None:
        sent.append("the files its artifacts globs match")
    if spec.repo is not None:
        sent.append(f"repo.diff: what it changed in {clean(spec.repo.name)}")
    return sent


def _trace_words(spec: HarnessSpec) -> str:
    if spec.output in STREAM_WORDS:
        return "its trace: the steps parsed from its stdout and $EVERDICT_TRACE_FILE"
    return "its trace: the steps it writes to $EVERDICT_TRACE_FILE"


def leaving_lines(
    job: CaseJob, withheld: frozenset[str] = frozenset(), redact_patterns: int = 0
) -> list[str]:
    """`leaving` as the lines of the question, and the redaction applied to all of it."""
    sent = leaving(job, withheld)
    lines = [f"  leaves:      {sent[0]}"] + [f"{INDENT}{item}" for item in sent[1:]]
    if redact_patterns:
        plural = "s" if redact_patterns != 1 else ""
        lines.append(
            f"{INDENT}(your {redact_patterns} redact pattern{plural} hide what they match)"
        )
    return lines


def world_summary(job: CaseJob, withheld: frozenset[str] = frozenset()) -> str:
    """The protocol-3 keys and what leaves, on one line (for a version allowed already)."""
    facts = [line.strip() for line in world_lines(job) if not line.startswith(INDENT)]
    if not facts:
        return ""
    kept = f"; not sent: {', '.join(sorted(withheld))}" if withheld else ""
    return "; ".join(" ".join(fact.split()) for fact in facts) + kept
