"""Many ids in one filter: one array parameter on PostgreSQL, chunks of `IN` elsewhere, the
same rows either way."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext

from runners.lookups import CHUNK, by_ids
from runners.models import JobStatus, Runner, RunnerJob
from runners.wakeup import owners_with_queued_jobs
from tests.suites import pair, start, suite

pytestmark = pytest.mark.django_db


def test_thousands_of_ids_find_the_same_rows_in_one_statement_on_postgresql() -> None:
    User = get_user_model()
    users = User.objects.bulk_create([User(username=f"u{i}") for i in range(50)])
    wanted = {u.pk for u in users[::3]}
    # Ids that match nothing, enough to need several chunks where ids are placeholders.
    asked = wanted | set(range(10**6, 10**6 + 2 * CHUNK + 5))
    with CaptureQueriesContext(connection) as queries:
        found = {
            pk
            for chunk in by_ids(User.objects.all(), "pk", asked)
            for pk in chunk.values_list("pk", flat=True)
        }
    assert found == wanted
    if connection.vendor == "postgresql":
        assert len(queries) == 1
        assert "= ANY(" in queries[0]["sql"]
    else:
        assert len(queries) == 3


def test_no_ids_asks_nothing() -> None:
    with CaptureQueriesContext(connection) as queries:
        assert list(by_ids(Runner.objects.all(), "pk", [])) == []
    assert len(queries) == 0


def test_the_recheck_names_only_owners_with_claimable_queued_jobs(
    alice: Any, bob: Any, workspace: Any
) -> None:
    suite(alice, cases=2)
    run = start(alice, pair(alice))
    assert RunnerJob.objects.filter(run=run, status=JobStatus.QUEUED).exists()
    strangers = list(range(10**6, 10**6 + 3000))
    assert owners_with_queued_jobs([alice.pk, bob.pk, *strangers]) == {alice.pk}
    RunnerJob.objects.filter(run=run).update(status=JobStatus.CANCELED)
    assert owners_with_queued_jobs([alice.pk, bob.pk]) == set()
