"""Idle runners: N concurrent idle long-polling runner sessions on one daphne process.

Each idle session is a paired runner of its own (its own `rnr_` token, paired through
`runners.services.runner_pair`; by default each belongs to a member of its own, as on a
real server where members have a laptop or two), calling `lease_job` in a loop with the
long-poll window the server offers in `hello` (`limits.max_wait_ms`, 55 s by default), as
the runner CLI does: the same stateless Streamable HTTP tool call, sent as a bare JSON-RPC
POST so that the client processes stay light. The sessions live in a few
client processes (asyncio, several hundred sessions each) and are opened at a bounded
rate. The server
keeps its defaults (re-check and presence-write intervals) unless told otherwise.

Measured with the sessions parked, beside the same figures with none (the baseline, same
run, same server process):
  - server RSS and CPU, per idle runner (psutil on the daphne process);
  - database load caused by idle runners: row updates on `runners_runner` (presence
    writes, throttled by EVERDICT_PRESENCE_WRITE_S) and transactions committed, per
    second, from PostgreSQL's statistics views;
  - wake latency of a job dispatched to one more runner while they all wait (dispatch by
    the service in this process, stamped after commit, as in wake_latency.py).
Target: 10,000 idle runners within 1 GiB (projected from the per-runner figure when N is
smaller) and 40 % of a core.

    .venv/bin/python bench/idle_runners.py --n 1000,10000 [--window 60] [--client-procs 4]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import multiprocessing as mp
import time
import urllib.request
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import wake_latency
from databases import Scratch, add_database_arguments, scratch_database
from mcp_runner import leased_jobs
from report import Summary, finish, machine_line
from seeding import Member, pair_runners, seed_member, seed_suite
from servers import Server, daphne, raise_open_files, server_env
from stats import latency_line, pct

GIB = 2**30
TARGET_RUNNERS = 10_000
TARGET_CPU = 0.40  # of a core, at TARGET_RUNNERS
# Sessions per client process at most (each holds a socket; the open-file limit is shared).
SESSIONS_PER_CLIENT = 2_500


@dataclass
class Reading:
    runners: int
    wait_ms: int = 0  # the long-poll window the server offered in hello
    rss: int = 0
    cpu_per_s: float = 0.0
    runner_updates_per_s: float | None = None
    commits_per_s: float | None = None
    parked: int = 0
    polls_per_s: float = 0.0  # lease_job calls answered per second in the window
    hello_cpu_s: float = 0.0  # server CPU per hello call
    wake: list[float] = field(default_factory=list)
    hello: list[float] = field(default_factory=list)
    polls: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    jobs_taken: int = 0
    wake_failed: str = ""


# ------------------------------------------------------------------------- pairing


def pair_idle_runners(count: int, owners: str) -> list[str]:
    """Pair `count` runners: one per member of its own, or all for one member."""
    from django.contrib.auth import get_user_model
    from django.db import transaction

    from runners.services import runner_pair

    user_model = get_user_model()
    if owners == "one":
        owner = user_model.objects.create_user("idle-owner", password=None)
        return [token for _, token in pair_runners(owner, count, label="idle")]
    user_model.objects.bulk_create(
        [user_model(username=f"idle-{i}", password="!") for i in range(count)], batch_size=1000
    )
    users = list(user_model.objects.filter(username__startswith="idle-").order_by("pk"))
    tokens = []
    with transaction.atomic():
        for i, user in enumerate(users):
            tokens.append(runner_pair(owner=user, label=f"idle-{i}", capabilities=["python"]).token)
    return tokens


# ------------------------------------------------------------------ client processes


# What the official MCP client sends for `lease_job` once it has settled on the protocol
# revision this server speaks (as the runner CLI does): headers and body, byte for byte.
PROTOCOL_REVISION = "2026-07-28"
LEASE_HEADERS = {
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
    "MCP-Protocol-Version": PROTOCOL_REVISION,
    "Mcp-Method": "tools/call",
    "Mcp-Name": "lease_job",
}


def tool_call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": name,
            "arguments": arguments,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": PROTOCOL_REVISION,
                "io.modelcontextprotocol/clientInfo": {"name": "idle-bench", "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    }


def lease_call(wait_ms: int) -> dict[str, Any]:
    return tool_call("lease_job", {"protocol": 2, "wait_ms": wait_ms, "status": "idle"})


def negotiated_wait_ms(url: str, token: str) -> int:
    """The long-poll window the server offers in `hello` (what the runner CLI then uses)."""
    body = json.dumps(tool_call("hello", {"protocol": 2, "capabilities": ["python"]})).encode()
    headers = {**LEASE_HEADERS, "Mcp-Name": "hello", "Authorization": f"Bearer {token}"}
    request = urllib.request.Request(f"{url}/mcp", data=body, headers=headers, method="POST")
    with urllib.request.urlopen(request, timeout=30) as response:
        reply = tool_result(response.read().decode(), response.headers.get("content-type", ""))
    return int(reply["structuredContent"]["limits"]["max_wait_ms"])


def tool_result(text: str, content_type: str) -> dict[str, Any]:
    if content_type.startswith("text/event-stream"):
        data = [line[5:] for line in text.splitlines() if line.startswith("data:")]
        text = data[-1] if data else "{}"
    message = json.loads(text)
    if "error" in message:
        raise RuntimeError(f"JSON-RPC error {message['error']}")
    result: dict[str, Any] = message.get("result", {})
    return result


class KeptConnection:
    """One runner's keep-alive HTTP/1.1 connection: a POST, its whole reply, and again.

    Each session holds a socket of its own, as a runner does, without a pool shared by the
    process: httpx's pool does bookkeeping over all its connections on every reply, which
    at thousands of connections per process stalls the client before the server.
    """

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    def request(self, path: str, headers: dict[str, str], body: bytes) -> bytes:
        lines = [f"POST {path} HTTP/1.1", f"Host: {self.host}:{self.port}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        lines += [f"Content-Length: {len(body)}", "", ""]
        return "\r\n".join(lines).encode() + body

    async def post(self, request: bytes) -> tuple[int, str, str]:
        """Send a prepared request; return (status, content type, body)."""
        try:
            if self._streams is None:
                self._streams = await asyncio.open_connection(self.host, self.port)
            reader, writer = self._streams
            writer.write(request)
            await writer.drain()
            return await self._reply(reader)
        except BaseException:
            self.close()
            raise

    async def _reply(self, reader: asyncio.StreamReader) -> tuple[int, str, str]:
        status = int((await reader.readline()).split()[1])
        headers: dict[str, str] = {}
        while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        if "content-length" in headers:
            body = await reader.readexactly(int(headers["content-length"]))
        else:  # chunked (a server-sent events reply)
            chunks = []
            while size := int((await reader.readline()).split(b";")[0], 16):
                chunks.append(await reader.readexactly(size))
                await reader.readexactly(2)
            await reader.readline()
            body = b"".join(chunks)
        if headers.get("connection", "").lower() == "close":
            self.close()
        return status, headers.get("content-type", ""), body.decode()

    def close(self) -> None:
        if self._streams is not None:
            self._streams[1].close()
            self._streams = None


def client_process(
    url: str, tokens: list[str], wait_ms: int, rate: float, stop: Any, opened: Any, results: Any
) -> None:
    """Hold one idle long-polling runner per token until `stop` is set.

    Each idle runner is what the server sees of `python -m runnercli run` with nothing to
    do: the same `lease_job` tool call over stateless Streamable HTTP, with its own token,
    again as soon as the last one answered. It is sent as a bare JSON-RPC POST over a
    keep-alive connection of its own rather than a full SDK session per runner, so that
    thousands of runners fit in a few client processes beside the server on a small
    machine.
    """
    import resource

    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    stats: dict[str, Any] = {"polls": 0, "jobs": 0, "errors": {}}
    body = json.dumps(lease_call(wait_ms)).encode()

    def error(key: str) -> None:
        stats["errors"][key] = stats["errors"].get(key, 0) + 1

    async def runner(token: str) -> None:
        connection = KeptConnection(url)
        request = connection.request(
            "/mcp", {"Authorization": f"Bearer {token}", **LEASE_HEADERS}, body
        )
        with opened.get_lock():
            opened.value += 1
        try:
            while True:
                try:
                    async with asyncio.timeout(wait_ms / 1000 + 90):
                        status, content_type, text = await connection.post(request)
                    if status != 200:
                        raise RuntimeError(f"HTTP {status}")
                    reply = tool_result(text, content_type)
                    stats["polls"] += 1
                    if leased_jobs(reply.get("structuredContent")):
                        stats["jobs"] += 1
                    if reply.get("isError"):
                        error("tool error")
                except Exception as exc:
                    error(type(exc).__name__)
                    await asyncio.sleep(1)
        finally:
            connection.close()

    async def run() -> None:
        tasks = []
        for token in tokens:
            tasks.append(asyncio.create_task(runner(token)))
            await asyncio.sleep(1 / rate)
            if stop.is_set():
                break
        while not stop.is_set():
            await asyncio.sleep(0.2)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    asyncio.run(run())
    results.put(stats)


# ------------------------------------------------------------------------ measuring


def metric_lines(url: str) -> list[str]:
    """The server's /metrics, or nothing when it does not answer in time: a saturated
    server is a finding of the run, not the end of it."""
    try:
        with urllib.request.urlopen(f"{url}/metrics", timeout=30) as response:
            return list(response.read().decode().splitlines())
    except OSError as exc:
        print(f"  /metrics unanswered ({type(exc).__name__}): the server is saturated")
        return []


def scrape(url: str, name: str) -> float:
    for line in metric_lines(url):
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def scrape_total(url: str, name: str) -> float | None:
    """The sum of a metric over all its labels (None when /metrics did not answer)."""
    lines = metric_lines(url)
    if not lines:
        return None
    return sum(float(line.rsplit(" ", 1)[1]) for line in lines if line.startswith(name + "{"))


def hello_cpu(server: Server, token: str, calls: int) -> float:
    """Server CPU seconds per `hello` call (the same bare POST as the idle sessions')."""
    request = json.dumps(tool_call("hello", {"protocol": 2, "capabilities": ["python"]}))
    headers = {**LEASE_HEADERS, "Mcp-Name": "hello", "Authorization": f"Bearer {token}"}

    async def send_all() -> None:
        connection = KeptConnection(server.url)
        prepared = connection.request("/mcp", headers, request.encode())
        try:
            for _ in range(calls):
                await connection.post(prepared)
        finally:
            connection.close()

    asyncio.run(send_all())  # warm: the token is kept, as an idle runner's is
    before = server.cpu_seconds()
    asyncio.run(send_all())
    return (server.cpu_seconds() - before) / calls


def db_counters(scratch: Scratch) -> tuple[int, int] | None:
    """(updates of runners_runner rows, transactions committed) so far, from pg_stat views."""
    if not scratch.is_postgres:
        return None
    import psycopg

    with psycopg.connect(scratch.libpq_url(), autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        updates = conn.execute(
            "SELECT n_tup_upd FROM pg_stat_user_tables WHERE relname = 'runners_runner'"
        ).fetchone()
        commits = conn.execute(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
    return int(updates[0] if updates else 0), int(commits[0] if commits else 0)


def observe(server: Server, scratch: Scratch, window: float, reading: Reading) -> None:
    """Server CPU, peak RSS and database write rates over `window` seconds."""
    # Statistics reach the views within a second or so of each transaction.
    before = db_counters(scratch)
    polls_before = scrape_total(server.url, "everdict_lease_calls_total")
    cpu_before = server.cpu_seconds()
    began = time.monotonic()
    peak = server.rss_bytes()
    while time.monotonic() - began < window:
        time.sleep(1)
        peak = max(peak, server.rss_bytes())
    took = time.monotonic() - began
    reading.cpu_per_s = (server.cpu_seconds() - cpu_before) / took
    polls_after = scrape_total(server.url, "everdict_lease_calls_total")
    if polls_before is not None and polls_after is not None:
        reading.polls_per_s = (polls_after - polls_before) / took
    reading.rss = peak
    time.sleep(1.5)  # let the last second's statistics arrive
    after = db_counters(scratch)
    if before is not None and after is not None:
        reading.runner_updates_per_s = (after[0] - before[0]) / took
        reading.commits_per_s = (after[1] - before[1]) / took


def wake(
    server: Server,
    member: Member,
    runner: tuple[int, str],
    jobs: int,
    reading: Reading,
    budget: float,
) -> None:
    runner_id, token = runner
    try:
        reading.wake, reading.hello = asyncio.run(
            wake_latency.measure(
                "orm", server.url, server.url, member, token, runner_id, jobs, 3, budget_s=budget
            )
        )
    except Exception as exc:  # an overloaded server is a finding, not a crash
        leaves = exc.exceptions if isinstance(exc, BaseExceptionGroup) else [exc]
        reading.wake_failed = "; ".join(sorted({_describe(e) for e in leaves}))
        reading.wake, reading.hello = [], []


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(e) for e in exc.exceptions)
    return type(exc).__name__ + (f": {exc}" if str(exc) else "")


def measure_n(
    scratch: Scratch,
    n: int,
    tokens: list[str],
    member: Member,
    measured: tuple[int, str],
    args: argparse.Namespace,
) -> tuple[Reading, Reading]:
    with daphne(scratch, f"idle-{n}", **args.daphne_env) as server:
        # Baseline: the same server with no idle runner, after the same warm-up calls.
        base = Reading(runners=0)
        wake(server, member, measured, args.wake_jobs, base, args.wake_budget)
        base.hello_cpu_s = hello_cpu(server, measured[1], args.hello_calls)
        observe(server, scratch, args.base_window, base)

        ctx = mp.get_context("spawn")
        stop = ctx.Event()
        opened = ctx.Value("l", 0)
        results = ctx.Queue()
        procs = max(1, min(max(args.client_procs, math.ceil(n / SESSIONS_PER_CLIENT)), n))
        idle = Reading(runners=n, wait_ms=negotiated_wait_ms(server.url, measured[1]))
        rate = args.ramp_rate / procs
        children = [
            ctx.Process(
                target=client_process,
                args=(server.url, tokens[i:n:procs], idle.wait_ms, rate, stop, opened, results),
            )
            for i in range(procs)
        ]
        for child in children:
            child.start()
        try:
            deadline = time.monotonic() + n / args.ramp_rate + args.ramp_grace
            parked, said = 0, time.monotonic()
            while time.monotonic() < deadline:
                time.sleep(0.25)
                parked = int(scrape(server.url, "everdict_parked_long_polls"))
                if parked >= n or time.monotonic() - said >= 2:
                    print(
                        f"  {opened.value:>6} sessions open, {parked:>6} long-polls parked",
                        flush=True,
                    )
                    said = time.monotonic()
                if parked >= n:
                    break
            time.sleep(args.settle)
            observe(server, scratch, args.window, idle)
            wake(server, member, measured, args.wake_jobs, idle, args.wake_budget)
            idle.parked = int(scrape(server.url, "everdict_parked_long_polls"))
        finally:
            stop.set()
            for _ in children:
                stats = results.get(timeout=120)
                idle.polls += stats["polls"]
                idle.jobs_taken += stats["jobs"]
                for key, count in stats["errors"].items():
                    idle.errors[key] = idle.errors.get(key, 0) + count
            for child in children:
                child.join(30)
    return base, idle


# -------------------------------------------------------------------------- report


def per_runner(base: Reading, idle: Reading) -> tuple[float, float]:
    rss = (idle.rss - base.rss) / idle.runners
    cpu = (idle.cpu_per_s - base.cpu_per_s) / idle.runners
    return rss, cpu


def print_reading(label: str, r: Reading) -> None:
    rates = (
        f"runner-row updates {r.runner_updates_per_s:7.1f}/s, commits {r.commits_per_s:7.1f}/s"
        if r.runner_updates_per_s is not None
        else "database rates: n/a on SQLite"
    )
    print(
        f"{label:<22} RSS {r.rss / 2**20:7.1f} MiB, CPU {r.cpu_per_s * 100:5.1f}% of a core, "
        f"{rates}"
    )
    if r.wake_failed:
        print(f"  wake latency: the measuring runner's calls failed ({r.wake_failed})")
    print(latency_line("  wake latency of one job (ORM, after commit)", r.wake, 50))
    print(latency_line("  bare hello round trip", r.hello, 50))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", default="1000,10000", help="idle runner counts (1000,10000)")
    parser.add_argument(
        "--owners",
        choices=("each", "one"),
        default="each",
        help="each idle runner has a member of its own (default), or one has all",
    )
    parser.add_argument("--client-procs", type=int, default=4, help="client processes (4)")
    parser.add_argument("--ramp-rate", type=float, default=200, help="sessions opened per second")
    parser.add_argument("--ramp-grace", type=float, default=60, help="extra seconds to park all")
    parser.add_argument("--settle", type=float, default=3, help="seconds before measuring")
    parser.add_argument(
        "--window", type=float, default=60, help="measuring window, seconds (60: a whole poll)"
    )
    parser.add_argument("--base-window", type=float, default=10, help="baseline window (10)")
    parser.add_argument("--wake-jobs", type=int, default=50, help="jobs for the wake latency")
    parser.add_argument(
        "--hello-calls", type=int, default=300, help="hello calls for the CPU baseline (300)"
    )
    parser.add_argument(
        "--wake-budget", type=float, default=60, help="at most this many seconds of wake jobs"
    )
    parser.add_argument(
        "--recheck-s",
        type=float,
        default=None,
        help="server EVERDICT_WAKE_RECHECK_S (default: the server's own)",
    )
    add_database_arguments(parser)
    args = parser.parse_args()
    counts = sorted({int(x) for x in args.n.split(",") if x.strip()})
    args.daphne_env = server_env(args)
    if args.recheck_s is not None:
        args.daphne_env["EVERDICT_WAKE_RECHECK_S"] = str(args.recheck_s)
    # Each session holds a socket on both sides: raise the limit for this process and,
    # by inheritance, for daphne and the client processes.
    limit = raise_open_files(max(counts) * 2 + 4096)

    summary = Summary("idle runners: N parked long-polls on one daphne process")
    with scratch_database(args) as scratch:
        print(f"idle runners — {machine_line(scratch)}; open-file limit {limit}")
        from django.conf import settings

        member = seed_member()
        seed_suite(member, name="one", cases=1)
        measured = pair_runners(member.user, 1, label="measured")[0]
        began = time.perf_counter()
        tokens = pair_idle_runners(max(counts), args.owners)
        owned = "one member each" if args.owners == "each" else "all one member"
        print(
            f"paired {len(tokens):,} idle runners ({owned}, one token per session) in "
            f"{time.perf_counter() - began:.1f} s; server re-check "
            f"{args.recheck_s or settings.EVERDICT_WAKE_RECHECK_S} s, presence writes at most "
            f"every {settings.EVERDICT_PRESENCE_WRITE_S} s per runner"
        )
        for n in counts:
            print(f"\n-- {n:,} idle runners")
            base, idle = measure_n(scratch, n, tokens, member, measured, args)
            print_reading("no idle runner", base)
            print_reading(f"{n:,} idle runners", idle)
            print(
                f"  long-poll window {idle.wait_ms / 1000:g} s (offered in hello); "
                f"{idle.parked:,} long-polls parked at the end; {idle.polls:,} polls answered "
                f"during the run; jobs taken by idle runners {idle.jobs_taken}; client errors "
                f"{idle.errors or 'none'}"
            )
            rss, cpu = per_runner(base, idle)
            projected = base.rss + rss * TARGET_RUNNERS
            print(
                f"  per idle runner: {rss / 1024:.1f} KiB RSS, {cpu * 1000:.3f} ms CPU per second; "
                f"projected RSS for {TARGET_RUNNERS:,}: {projected / 2**20:.0f} MiB"
            )
            # Everything the idle runners cost, per poll they make: parked time included.
            per_poll = (
                (idle.cpu_per_s - base.cpu_per_s) / idle.polls_per_s if idle.polls_per_s else 0
            )
            print(
                f"  {idle.polls_per_s:.1f} polls answered per second; server CPU per empty "
                f"re-poll {per_poll * 1000:.2f} ms beside {base.hello_cpu_s * 1000:.2f} ms per "
                "hello (same server, before the idle runners came)"
            )
            held = idle.parked >= 0.95 * n
            if not held:
                print(
                    f"  only {idle.parked:,} of {n:,} long-polls were parked: the server could "
                    "not keep up, so the per-runner figures are not a measure of idle cost"
                )
                summary.notes.append(
                    f"{n:,}: only {idle.parked:,} long-polls parked (server saturated)"
                )
            summary.add(
                benchmark="idle_runners",
                figure=f"RSS, {n:,} idle (projected {TARGET_RUNNERS:,})",
                value=f"{idle.rss / 2**20:.0f} MiB ({projected / 2**20:.0f} MiB)",
                baseline=f"{base.rss / 2**20:.0f} MiB idle-free",
                ratio=f"{rss / 1024:.1f} KiB/runner",
                target=f"{TARGET_RUNNERS:,} <= 1 GiB",
                met=projected <= GIB if held else None,
            )
            projected_cpu = base.cpu_per_s + cpu * TARGET_RUNNERS
            summary.add(
                benchmark="idle_runners",
                figure=f"server CPU, {n:,} idle (projected {TARGET_RUNNERS:,})",
                value=f"{idle.cpu_per_s * 100:.1f}% core ({projected_cpu * 100:.1f}%)",
                baseline=f"{base.cpu_per_s * 100:.1f}% core",
                ratio=f"{cpu * 1000 * 1000:.1f} us/s/runner",
                target=f"{TARGET_RUNNERS:,} <= {TARGET_CPU * 100:.0f}% core",
                met=projected_cpu <= TARGET_CPU if held else None,
            )
            summary.add(
                benchmark="idle_runners",
                figure=f"server CPU per empty re-poll, {n:,} idle",
                value=f"{per_poll * 1000:.2f} ms ({idle.polls_per_s:.0f} polls/s)",
                baseline=f"{base.hello_cpu_s * 1000:.2f} ms per hello",
                ratio=f"{per_poll / base.hello_cpu_s:.1f}x" if base.hello_cpu_s > 0 else "-",
                target="-",
            )
            if idle.runner_updates_per_s is not None and base.runner_updates_per_s is not None:
                summary.add(
                    benchmark="idle_runners",
                    figure=f"DB writes, {n:,} idle",
                    value=f"{idle.runner_updates_per_s:.1f} runner upd/s, "
                    f"{idle.commits_per_s:.0f} commits/s",
                    baseline=f"{base.runner_updates_per_s:.1f} upd/s, "
                    f"{base.commits_per_s:.0f} commits/s",
                    ratio=f"{idle.runner_updates_per_s / n:.3f} upd/s/runner",
                    target=f"<= 1 per {settings.EVERDICT_PRESENCE_WRITE_S} s/runner",
                    # 10 % for the window's edges: a write just inside it counts whole.
                    met=idle.runner_updates_per_s / n <= 1.1 / settings.EVERDICT_PRESENCE_WRITE_S,
                )
            p99, base99 = pct(idle.wake, 99), pct(base.wake, 99)
            value = f"{pct(idle.wake, 50) * 1000:.1f} / {p99 * 1000:.1f} ms"
            if idle.wake_failed:
                value = f"failed after {len(idle.wake)} ({idle.wake_failed[:40]})"
            summary.add(
                benchmark="idle_runners",
                figure=f"wake p50 / p99, {n:,} idle",
                value=value,
                baseline=f"{pct(base.wake, 50) * 1000:.1f} / {base99 * 1000:.1f} ms",
                ratio=f"p99 {p99 / base99:.1f}x" if base99 > 0 and idle.wake else "-",
                target="p99 <= 25 ms",
                met=bool(idle.wake) and not idle.wake_failed and p99 <= 0.025,
            )
        summary.notes.append(
            f"one rnr_ token per session, {args.client_procs} client processes; "
            f"idle runners {'each own member' if args.owners == 'each' else 'one member'}"
        )
    finish(summary, args)


if __name__ == "__main__":
    main()
