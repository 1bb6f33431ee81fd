"""What a process keeps of what it verified (`core.kept`): within the bound, only while it
follows announcements, not across an announcement, and verified again in bulk."""

from __future__ import annotations

import time

import pytest
from django.test import override_settings

from core.kept import Kept


@pytest.fixture
def kept() -> Kept[str]:
    return Kept(lambda: True)


def test_a_value_is_kept_within_the_bound_only(kept: Kept[str]) -> None:
    with override_settings(EVERDICT_AUTH_CACHE_S=60):
        kept.put("a", "alice", kept.generation(), time.monotonic())
        kept.put("old", "bob", kept.generation(), time.monotonic() - 61)
        assert kept.get("a") == "alice"
        assert kept.get("old") is None
    with override_settings(EVERDICT_AUTH_CACHE_S=0):
        kept.put("b", "carol", kept.generation(), time.monotonic())
        assert kept.get("b") is None


def test_nothing_is_kept_while_not_following() -> None:
    following = False
    kept: Kept[str] = Kept(lambda: following)
    kept.put("a", "alice", kept.generation(), time.monotonic())
    assert kept.get("a") is None
    following = True
    kept.put("a", "alice", kept.generation(), time.monotonic())
    assert kept.get("a") == "alice"


def test_an_announcement_during_a_lookup_keeps_its_value_out(kept: Kept[str]) -> None:
    generation = kept.generation()
    kept.forget(lambda value: value == "someone else")
    kept.put("a", "alice", generation, time.monotonic())
    assert kept.get("a") is None


def test_forget_forgets_what_it_names_or_everything(kept: Kept[str]) -> None:
    for key in ("a", "b"):
        kept.put(key, key.upper(), kept.generation(), time.monotonic())
    kept.forget(lambda value: value == "A")
    assert (kept.get("a"), kept.get("b"), len(kept)) == (None, "B", 1)
    kept.forget(None)
    assert len(kept) == 0


def test_verified_again_refreshes_the_valid_and_forgets_the_others(kept: Kept[str]) -> None:
    long_ago = time.monotonic() - 30
    for key in ("valid", "revoked", "unasked"):
        kept.put(key, key, kept.generation(), long_ago)
    assert sorted(kept.aged(20)) == ["revoked", "unasked", "valid"]
    began, generation = time.monotonic(), kept.generation()
    answers = {"valid": True, "revoked": False}
    kept.verified(lambda value: answers.get(value), began, generation)
    assert kept.get("revoked") is None
    assert sorted(kept.aged(20)) == ["unasked"]  # "valid" counts as verified at `began`


def test_verified_again_across_an_announcement_refreshes_nothing(kept: Kept[str]) -> None:
    long_ago = time.monotonic() - 30
    kept.put("valid", "valid", kept.generation(), long_ago)
    kept.put("revoked", "revoked", kept.generation(), long_ago)
    began, generation = time.monotonic(), kept.generation()
    kept.forget(lambda value: value == "someone else")  # announced while the query ran
    kept.verified(lambda value: value == "valid", began, generation)
    assert kept.get("revoked") is None  # what the query refused is forgotten all the same
    assert kept.aged(20) == ["valid"]  # but what it found valid may predate the change
