"""An API key is looked up in one statement, and what it loads is what the ORM would load."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from accounts.models import ApiKey
from accounts.services import api_key_authenticate, api_key_create, api_key_revoke

pytestmark = pytest.mark.django_db


def fields(instance: Any) -> dict[str, Any]:
    return {f.attname: getattr(instance, f.attname) for f in instance._meta.concrete_fields}


def test_the_key_and_its_user_load_as_the_orm_loads_them_in_one_statement(alice: Any) -> None:
    issued = api_key_create(user=alice, name="ci")
    alice.last_login = timezone.now()
    alice.save()
    api_key_authenticate(issued.key)  # writes last_used_at (at most once a minute)

    with CaptureQueriesContext(connection) as queries:
        found = api_key_authenticate(issued.key)

    assert found is not None
    assert len(queries.captured_queries) == 1
    expected = ApiKey.objects.select_related("user").get(pk=issued.api_key.pk)
    # Every column, converted as the ORM converts it (datetimes, booleans on SQLite too).
    assert fields(found) == fields(expected)
    assert fields(found.user) == fields(expected.user)
    assert found.user.is_active is True
    assert isinstance(found.user.date_joined, type(timezone.now()))
    assert found.last_used_at is not None and found.last_used_at.tzinfo is not None


def test_a_revoked_key_or_an_inactive_member_is_refused_at_once(alice: Any, bob: Any) -> None:
    revoked = api_key_create(user=alice)
    assert api_key_authenticate(revoked.key) is not None
    assert api_key_revoke(user=alice, key_id=revoked.api_key.pk)
    assert api_key_authenticate(revoked.key) is None

    bobs = api_key_create(user=bob)
    assert api_key_authenticate(bobs.key) is not None
    bob.is_active = False
    bob.save()
    assert api_key_authenticate(bobs.key) is None
    assert api_key_authenticate("evk_" + "x" * 43) is None
