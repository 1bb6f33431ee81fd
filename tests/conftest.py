from __future__ import annotations

import json
import os
import shutil
import tempfile
from typing import Any

import pytest
from django.contrib.auth import get_user_model

# The object store's fixtures (`object_store_process`, `s3_blobs`), for any suite to use.
from tests.objectstore import object_store_process, s3_blobs  # noqa: F401

FAST_HASHERS = [
    "django.contrib.auth.hashers.MD5PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2PasswordHasher",
]


def pytest_configure(config: pytest.Config) -> None:
    # The servers and schedulers the tests start pool their connections as in production.
    # This process does not: its many threads (async tests, consumers, live-server helpers)
    # each keep a connection of their own, so a pool would be held empty by them and, once
    # the database outage test has ended every connection, refuse this process any.
    from django.conf import settings

    settings.DATABASES["default"].get("OPTIONS", {}).pop("pool", None)
    _blob_storage_for_the_session(settings)


def _blob_storage_for_the_session(settings: Any) -> None:
    """Blobs of this test session go to a directory of its own, for this process and the
    servers it starts alike (they inherit the environment), never under var/."""
    location = tempfile.mkdtemp(prefix="everdict-test-blobs-")
    options = {"location": location, "allow_overwrite": True}
    os.environ["EVERDICT_BLOB_STORAGE_OPTIONS"] = json.dumps(options)
    settings.STORAGES["blobs"]["OPTIONS"] = options


# What a test asks for when it touches the database; one that asks for none of them runs the
# same on every engine, so `make test` runs it in the SQLite pass only (marked `once`), unless
# it starts processes of its own on the test run's database (marked `engine`). A browser test
# runs once too: what chromium shows of a page does not depend on the engine, and the services
# and pages behind it are tested on both (their own tests, and the pages through the client).
# `make test` runs the browser tests in the PostgreSQL pass when there is one (marked
# `once_on_postgres` as well), so that its two passes take about as long.
_DATABASE_FIXTURES = frozenset({"db", "transactional_db", "live_server"})


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("engine") or item.get_closest_marker("django_db"):
            continue
        if item.get_closest_marker("browser"):
            item.add_marker(pytest.mark.once)
            item.add_marker(pytest.mark.once_on_postgres)
        elif _DATABASE_FIXTURES.isdisjoint(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.once)


def pytest_unconfigure(config: pytest.Config) -> None:
    from django.conf import settings

    location = settings.STORAGES["blobs"]["OPTIONS"].get("location", "")
    if location and os.path.basename(location).startswith("everdict-test-blobs-"):
        shutil.rmtree(location, ignore_errors=True)


def pytest_runtest_setup(item: pytest.Item) -> None:
    # Before the test's fixtures start servers for it: a test needing a program this machine
    # lacks is skipped, or fails when CI requires the program (tests/required.py).
    from tests.required import NEEDS, skip_or_fail

    for marker, (problem, variable) in NEEDS.items():
        if item.get_closest_marker(marker) is not None:
            skip_or_fail(problem(), variable)


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    # What a test caches is its own: a rolled-back test's run may share its id (and its
    # figures) with the next test's, so a cached figure of one must not answer the other.
    from django.core.cache import caches
    from django.core.cache.backends.locmem import LocMemCache

    if isinstance(caches["default"], LocMemCache):
        caches["default"].clear()  # this process's own memory, never a shared server's


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings: Any) -> None:
    # Fixture users are created per test; the production hasher is slow by design.
    settings.PASSWORD_HASHERS = FAST_HASHERS


@pytest.fixture
def alice(db: Any) -> Any:
    return get_user_model().objects.create_user("alice", password="alice-pw")


@pytest.fixture
def bob(db: Any) -> Any:
    return get_user_model().objects.create_user("bob", password="bob-pw")


@pytest.fixture
def charlie(db: Any) -> Any:
    return get_user_model().objects.create_user("charlie", password="charlie-pw")


@pytest.fixture
def workspace(alice: Any, bob: Any) -> Any:
    """Workspace `acme`: alice owns it, bob is a member, charlie is outside."""
    from scorecards.models import Membership, Role
    from scorecards.services import workspace_create

    ws = workspace_create(user=alice, slug="acme", name="Acme")
    Membership.objects.create(workspace=ws, user=bob, role=Role.MEMBER)
    return ws


@pytest.fixture
def daphne_server(transactional_db: Any, tmp_path: Any) -> Any:
    """A real daphne process on a free port over the test database."""
    from tests.live import daphne

    with daphne(tmp_path, EVERDICT_LEASE_TTL_S=5) as server:
        yield server


@pytest.fixture
def blob_dir(settings: Any, tmp_path: Any) -> Any:
    """This test's own blob storage: a directory under its tmp_path."""
    location = tmp_path / "blobs"
    settings.STORAGES = {
        **settings.STORAGES,
        "blobs": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(location), "allow_overwrite": True},
        },
    }
    return location
