"""What every benchmark shares: a scratch database, a daphne server, seeding, MCP sessions, figures.

A benchmark runs against a database of its own, created empty and migrated with
`manage.py migrate`, and dropped at the end: PostgreSQL by default (database
`everdict_bench` on the server named by `--postgres`, `DATABASE_URL` or the local default),
or a SQLite file under `var/bench/` with `--sqlite`. The benchmark process itself is a
Django process on that database (it seeds and dispatches through the services); the server
under test is a real `daphne` process over the same database.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import resource
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

BENCH_DIR = ROOT / "var" / "bench"
DEFAULT_POSTGRES = "postgres://postgres@127.0.0.1:5432/postgres"
DEFAULT_DB_NAME = "everdict_bench"
# A benchmark measures the server as deployed: DEBUG off (no query log kept per request).
SERVER_ENV = {
    "DEBUG": "0",
    "SECRET_KEY": "everdict-bench-secret-key-not-for-production",
    "LOG_LEVEL": "WARNING",
    "DJANGO_SETTINGS_MODULE": "everdict.settings",
    "PYTHONUNBUFFERED": "1",
}
NO_OP_SPEC: dict[str, Any] = {
    "command": ["true"],
    "timeout_s": 60,
    "output": "text",
    "grader": {"type": "exit_code"},
}


# ------------------------------------------------------------------------ arguments


def add_database_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("database")
    group.add_argument(
        "--sqlite", action="store_true", help="use a scratch SQLite file instead of PostgreSQL"
    )
    group.add_argument(
        "--postgres",
        metavar="URL",
        default=None,
        help="PostgreSQL server to create the scratch database on "
        f"(default: $DATABASE_URL when it is PostgreSQL, else {DEFAULT_POSTGRES})",
    )
    group.add_argument(
        "--db-name", default=DEFAULT_DB_NAME, help="name of the scratch database (or file stem)"
    )
    group.add_argument(
        "--keep", action="store_true", help="keep the scratch database afterwards (to inspect)"
    )
    parser.add_argument(
        "--summary-json", metavar="PATH", default=None, help="also write the summary rows here"
    )
    parser.add_argument(
        "--server-env",
        metavar="NAME=VALUE",
        action="append",
        default=[],
        help="extra environment for the server processes (repeatable), e.g. "
        "EVERDICT_WAKE_RECHECK_S=30",
    )


def server_env(args: argparse.Namespace) -> dict[str, str]:
    """The --server-env pairs as a dict."""
    pairs = {}
    for item in args.server_env:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise SystemExit(f"--server-env wants NAME=VALUE, got {item!r}")
        pairs[name] = value
    return pairs


def postgres_base(args: argparse.Namespace) -> str:
    if args.postgres:
        return str(args.postgres)
    env_url = os.environ.get("DATABASE_URL", "")
    if env_url.startswith(("postgres://", "postgresql://")):
        return env_url
    return DEFAULT_POSTGRES


# ------------------------------------------------------------------ scratch database


@dataclass(frozen=True)
class Scratch:
    url: str
    vendor: str  # "postgresql" or "sqlite"
    workdir: Path

    @property
    def is_postgres(self) -> bool:
        return self.vendor == "postgresql"

    def libpq_url(self) -> str:
        """The database URL in the form psycopg accepts."""
        return self.url.replace("postgres://", "postgresql://", 1)


def _sqlite_files(path: Path) -> list[Path]:
    return [path, Path(f"{path}-wal"), Path(f"{path}-shm")]


@contextmanager
def scratch_database(args: argparse.Namespace) -> Iterator[Scratch]:
    """Create an empty migrated database, point this process's Django at it; drop it after."""
    BENCH_DIR.mkdir(parents=True, exist_ok=True)
    workdir = BENCH_DIR / f"{args.db_name}-run"
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir()
    database = _sqlite_database if args.sqlite else _postgres_database
    with database(args, workdir) as scratch:
        django_setup(scratch)
        try:
            yield scratch
        finally:
            _close_django()
    # Server logs are kept only when something failed (or when asked to keep).
    if not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)


def migrations_digest() -> str:
    """A digest of every migration file: a migrated template is reused while it matches."""
    sha = hashlib.sha256()
    for path in sorted(ROOT.glob("*/migrations/*.py")):
        sha.update(str(path.relative_to(ROOT)).encode())
        sha.update(path.read_bytes())
    return sha.hexdigest()[:12]


@contextmanager
def _sqlite_database(args: argparse.Namespace, workdir: Path) -> Iterator[Scratch]:
    path = BENCH_DIR / f"{args.db_name}.sqlite3"
    template = BENCH_DIR / f"template-{migrations_digest()}.sqlite3"
    with (BENCH_DIR / "template.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not template.exists():
            for stale in BENCH_DIR.glob("template-*.sqlite3*"):
                stale.unlink(missing_ok=True)
            building = template.with_suffix(".building")
            building.unlink(missing_ok=True)
            _migrate(f"sqlite:///{building}")
            # One self-contained file (no WAL beside it) to copy from.
            with sqlite3.connect(building) as conn:
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                conn.execute("PRAGMA journal_mode=DELETE")
            conn.close()
            building.rename(template)
        for stale in _sqlite_files(path):
            stale.unlink(missing_ok=True)
        shutil.copyfile(template, path)
    try:
        yield Scratch(url=f"sqlite:///{path}", vendor="sqlite", workdir=workdir)
    finally:
        if not args.keep:
            for leftover in _sqlite_files(path):
                leftover.unlink(missing_ok=True)


@contextmanager
def _postgres_database(args: argparse.Namespace, workdir: Path) -> Iterator[Scratch]:
    import psycopg

    parts = urlsplit(postgres_base(args))
    admin = urlunsplit(parts._replace(path="/postgres"))
    template = f"everdict_bench_template_{migrations_digest()}"
    name = args.db_name
    with psycopg.connect(admin, autocommit=True) as conn:
        # One process builds the migrated template; the others wait for it, then clone it.
        conn.execute("SELECT pg_advisory_lock(hashtext('everdict_bench_template'))")
        try:
            exists = conn.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", [template]
            ).fetchone()
            if not exists:
                stale = conn.execute(
                    "SELECT datname FROM pg_database WHERE starts_with(datname, %s)",
                    ["everdict_bench_template_"],
                ).fetchall()
                for (old,) in stale:
                    conn.execute(f'DROP DATABASE IF EXISTS "{old}" WITH (FORCE)')
                conn.execute(f'CREATE DATABASE "{template}_building"')
                _migrate(urlunsplit(parts._replace(path=f"/{template}_building")))
                conn.execute(f'ALTER DATABASE "{template}_building" RENAME TO "{template}"')
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
        finally:
            conn.execute("SELECT pg_advisory_unlock(hashtext('everdict_bench_template'))")
    try:
        yield Scratch(
            url=urlunsplit(parts._replace(path=f"/{name}")), vendor="postgresql", workdir=workdir
        )
    finally:
        if not args.keep:
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _migrate(url: str) -> None:
    env = {**os.environ, **SERVER_ENV, "DATABASE_URL": url}
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=ROOT,
        env=env,
        check=True,
    )


def django_setup(scratch: Scratch) -> None:
    os.environ.update(SERVER_ENV)
    os.environ["DATABASE_URL"] = scratch.url
    import django

    django.setup()


def _close_django() -> None:
    if "django.db" in sys.modules:
        from django.db import connections

        connections.close_all()


# ------------------------------------------------------------------------ seeding


@dataclass(frozen=True)
class Member:
    user: Any
    api_key: str
    slug: str


def seed_member(username: str = "bench", slug: str = "bench") -> Member:
    """A member, their workspace and a personal API key (through the services)."""
    from django.contrib.auth import get_user_model

    from accounts.services import api_key_create
    from scorecards.services import workspace_create

    user = get_user_model().objects.create_user(username, password=None)
    workspace_create(user=user, slug=slug, name=slug.title())
    return Member(user=user, api_key=api_key_create(user=user, name="bench").key, slug=slug)


def seed_suite(
    member: Member, *, name: str, cases: int, spec: dict[str, Any] | None = None
) -> None:
    """A harness and a dataset of `cases` cases, both named `name`."""
    from scorecards.services import dataset_create, harness_create

    harness_create(user=member.user, workspace_slug=member.slug, name=name, spec=spec or NO_OP_SPEC)
    dataset_create(
        user=member.user,
        workspace_slug=member.slug,
        name=name,
        cases=[{"key": f"c{i}", "input": {"i": i}, "expected": "0"} for i in range(cases)],
    )


def pair_runners(
    owner: Any, count: int, *, label: str = "bench", capabilities: Sequence[str] = ("python",)
) -> list[tuple[int, str]]:
    """Pair `count` runners for `owner` through `runner_pair`; returns (id, token) pairs."""
    from django.db import transaction

    from runners.services import runner_pair

    paired = []
    with transaction.atomic():
        for i in range(count):
            p = runner_pair(owner=owner, label=f"{label}-{i}", capabilities=list(capabilities))
            paired.append((p.runner.pk, p.token))
    return paired


# ------------------------------------------------------------------------- server


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def raise_open_files(wanted: int) -> int:
    """Raise this process's file-descriptor limit (children inherit it); return the new one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if target > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


class Server:
    """A daphne process serving the whole application (pages, /api/, /mcp)."""

    def __init__(self, popen: subprocess.Popen[bytes], port: int, log: Path) -> None:
        self.popen = popen
        self.port = port
        self.log = log
        self.url = f"http://127.0.0.1:{port}"

    @property
    def pid(self) -> int:
        return self.popen.pid

    def process(self) -> Any:
        import psutil

        return psutil.Process(self.popen.pid)

    def rss_bytes(self) -> int:
        return int(self.process().memory_info().rss)

    def cpu_seconds(self) -> float:
        times = self.process().cpu_times()
        return float(times.user + times.system)

    def stop(self) -> None:
        if self.popen.poll() is None:
            try:
                os.killpg(self.popen.pid, signal.SIGTERM)
                self.popen.wait(15)
            except ProcessLookupError:
                pass
            except subprocess.TimeoutExpired:
                os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(5)


def wait_http(url: str, popen: subprocess.Popen[bytes], log: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except urllib.error.HTTPError:
            return
        except OSError as exc:
            if time.monotonic() > deadline or popen.poll() is not None:
                raise RuntimeError(f"{url} did not come up; see {log}") from exc
            time.sleep(0.1)


@contextmanager
def daphne(scratch: Scratch, name: str = "daphne", **env: Any) -> Iterator[Server]:
    """Start daphne on a free loopback port over the scratch database; stop it after."""
    port = free_port()
    log = scratch.workdir / f"{name}-{port}.log"
    child_env = {**os.environ, **SERVER_ENV, "DATABASE_URL": scratch.url}
    child_env.update({k: str(v) for k, v in env.items()})
    handle = log.open("wb")
    popen = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "daphne",
            "-b",
            "127.0.0.1",
            "-p",
            str(port),
            "everdict.asgi:application",
        ],
        cwd=ROOT,
        env=child_env,
        stdout=handle,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    server = Server(popen, port, log)
    try:
        wait_http(f"{server.url}/healthz", popen, log)
        yield server
    finally:
        server.stop()
        handle.close()


# -------------------------------------------------------------------------- MCP


@asynccontextmanager
async def mcp_session(
    url: str, token: str, *, read_timeout: float = 60, max_connections: int = 20
) -> AsyncIterator[Any]:
    """An MCP client session on `url`/mcp with a bearer token, as the runner CLI opens one."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"},
        timeout=httpx2.Timeout(10, read=read_timeout),
        limits=httpx2.Limits(max_connections=max_connections),
    )
    transport = streamable_http_client(f"{url}/mcp", http_client=http)
    async with http, Client(transport) as client:
        yield client


def no_op_result() -> dict[str, Any]:
    return {"status": "completed", "exit_code": 0, "output": "", "duration_ms": 0}


def leased_jobs(structured: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The jobs a `lease_job` reply carries: each grant's job when batched (`jobs`), else the
    single `job`."""
    if not structured:
        return []
    if isinstance(structured.get("jobs"), list):
        grants = [g for g in structured["jobs"] if g]
        return [g["job"] if isinstance(g.get("job"), dict) else g for g in grants]
    job = structured.get("job")
    return [job] if job else []


# ------------------------------------------------------------------------ figures


def pct(values: Sequence[float], p: float) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return float(values[0])
    ordered = sorted(values)
    return float(statistics.quantiles(ordered, n=1000, method="inclusive")[int(p * 10) - 1])


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def latency_line(label: str, seconds: Sequence[float], width: int = 52) -> str:
    values = [s * 1000 for s in seconds]
    if not values:
        return f"{label:<{width}} (no samples)"
    return (
        f"{label:<{width}} p50 {pct(values, 50):8.2f} ms  p99 {pct(values, 99):8.2f} ms  "
        f"max {max(values):8.2f} ms  (n={len(values)})"
    )


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


# ---------------------------------------------------------------------- profiling


class ServerProfile:
    """Sample a server process with py-spy until stopped.

    Only samples of a thread holding the GIL are kept (`--gil`): what the process spends
    CPU on in Python, not where its threads sit waiting for the database or the network.
    """

    def __init__(self, pid: int, out: Path, rate: int = 250) -> None:
        self.out = out
        spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        self.popen: subprocess.Popen[bytes] | None = None
        if Path(spy).exists():
            self.popen = subprocess.Popen(
                [
                    spy,
                    "record",
                    "-p",
                    str(pid),
                    "-r",
                    str(rate),
                    "--gil",
                    "-f",
                    "raw",
                    "-o",
                    str(out),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )

    def stop(self) -> str:
        """Stop sampling and return the hottest frames as text ('' without py-spy)."""
        if self.popen is None:
            return "(py-spy is not installed: `pip install py-spy` to profile the server)"
        self.popen.send_signal(signal.SIGINT)
        try:
            self.popen.wait(30)
        except subprocess.TimeoutExpired:
            self.popen.kill()
        return hot_frames(self.out) if self.out.exists() else "(py-spy wrote no samples)"


def hot_frames(path: Path, top: int = 25) -> str:
    """Summarise py-spy's collapsed stacks: inclusive and self share of the samples per frame."""
    inclusive: dict[str, int] = {}
    own: dict[str, int] = {}
    total = 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        total += count
        frames = [_frame_name(f) for f in stack.split(";")[1:]]  # [0] names the thread
        for frame in set(frames):
            inclusive[frame] = inclusive.get(frame, 0) + count
        if frames:
            own[frames[-1]] = own.get(frames[-1], 0) + count
    if not total:
        return "(no samples)"
    lines = [
        f"{total} samples; inclusive share (self share) of the hottest project/library frames:"
    ]
    ranked = sorted(inclusive.items(), key=lambda kv: -kv[1])
    shown = 0
    for frame, count in ranked:
        if frame.startswith(
            (
                "<module>",
                "run (threading",
                "_bootstrap",
                "run_forever",
                "_run_once",
                "_run (asyncio",
                "worker (concurrent",
            )
        ):
            continue
        lines.append(f"  {count / total:6.1%} ({own.get(frame, 0) / total:6.1%})  {frame}")
        shown += 1
        if shown >= top:
            break
    lines.append("hottest frames by self time:")
    for frame, count in sorted(own.items(), key=lambda kv: -kv[1])[:15]:
        lines.append(f"  {count / total:6.1%}  {frame}")
    return "\n".join(lines)


def _frame_name(frame: str) -> str:
    # "func (path/to/module.py:123)" -> "func (module.py)" with the package kept for context.
    name, _, where = frame.partition(" (")
    where = where.rstrip(")")
    path = where.rsplit(":", 1)[0]
    parts = Path(path).parts
    short = "/".join(parts[-2:]) if len(parts) >= 2 else path
    return f"{name} ({short})"
