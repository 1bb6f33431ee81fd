"""The scratch database a benchmark runs against, and this process's Django on it.

A benchmark runs against a database of its own, created empty and migrated with
`manage.py migrate`, and dropped at the end: PostgreSQL by default (database
`everdict_bench` on the server named by `--postgres`, `DATABASE_URL` or the local default),
or a SQLite file under `var/bench/` with `--sqlite`. The benchmark process itself is a
Django process on that database (it seeds and dispatches through the services); the server
under test is a real `daphne` process over the same database (`servers.py`).
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
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
    # The apps' and the feature apps' (`scorecards/<feature>/migrations`) alike.
    for path in sorted([*ROOT.glob("*/migrations/*.py"), *ROOT.glob("*/*/migrations/*.py")]):
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


def pooled_settings(
    settings_dict: dict[str, Any], options: dict[str, Any], *, health_checks: bool = True
) -> dict[str, Any]:
    """A database's settings with a connection pool of these `options`, as the settings make
    one for a server (connections returned to the pool after each request)."""
    return {
        **settings_dict,
        "OPTIONS": {**settings_dict["OPTIONS"], "pool": options},
        "CONN_MAX_AGE": 0,
        "CONN_HEALTH_CHECKS": health_checks,
    }


def _close_django() -> None:
    if "django.db" in sys.modules:
        from django.db import connections

        connections.close_all()
