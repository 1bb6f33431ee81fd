"""A `lease_job` reply read grant by grant: one job this runner cannot read spoils no other."""

from __future__ import annotations

from typing import Any

from runnercli.client.grants import parse_lease_reply
from tests.runnercli.conftest import make_job


def grant(job_id: int, **spec_changes: Any) -> dict[str, Any]:
    job = make_job(["python", "-c", "print(1)"]).model_dump(mode="json")
    job["job_id"] = job_id
    job["lease_epoch"] = 3
    job["harness"]["spec"].update(spec_changes)
    lease = {"job_id": job_id, "lease_epoch": 3, "lease_ttl_ms": 60_000, "heartbeat_ms": 20_000}
    return {"job": job, "lease": lease}


def test_a_grant_it_cannot_read_is_set_apart_with_its_fence_and_reason() -> None:
    good, newer, refused = grant(1), grant(2, sandbox="strict"), grant(3, env={"PATH": "/x"})
    batch = parse_lease_reply(
        {"job": good["job"], "lease": good["lease"], "jobs": [good, newer, refused]}
    )
    # A job setting a refused environment key is read, so that the runner refuses it by name
    # before anything runs (consent's check, tested end to end in test_consent_wire.py).
    assert [g.job.job_id for g in batch.grants()] == [1, 3]
    assert [(u.job_id, u.lease_epoch) for u in batch.unparsed] == [(2, 3)]
    assert "harness.spec.sandbox: Extra inputs are not permitted" in batch.unparsed[0].reason


def test_the_single_job_reply_and_an_empty_one_read_as_before() -> None:
    one = grant(7)
    batch = parse_lease_reply({"job": one["job"], "lease": one["lease"], "update_required": False})
    assert batch.job is not None and batch.job.job_id == 7
    assert batch.lease is not None and batch.lease.lease_epoch == 3
    empty = parse_lease_reply({"job": None, "lease": None, "update_required": True})
    assert (empty.grants(), empty.unparsed, empty.update_required) == ([], [], True)


def test_a_grant_without_a_readable_fence_is_still_set_apart() -> None:
    batch = parse_lease_reply({"jobs": [{"job": "garbage"}, grant(4)]})
    assert [g.job.job_id for g in batch.grants()] == [4]
    assert (batch.unparsed[0].job_id, batch.unparsed[0].lease_epoch) == (None, None)


def test_the_grants_of_one_harness_share_it_read_once_and_another_gets_its_own() -> None:
    batch = parse_lease_reply(
        {"jobs": [grant(1), grant(2), grant(3, env={"A": "1"}), grant(4), grant(5, env={"A": "1"})]}
    )
    harnesses = [g.job.harness for g in batch.grants()]
    assert [g.job.job_id for g in batch.grants()] == [1, 2, 3, 4, 5]
    assert harnesses[0] is harnesses[1] is harnesses[3]
    assert harnesses[2] is harnesses[4] and harnesses[2] is not harnesses[0]
    assert harnesses[2].spec.env == {"A": "1"} and harnesses[0].spec.env == {}


def test_a_harness_shared_with_a_refused_grant_is_still_read_on_its_own() -> None:
    # The first grant is unreadable for another reason than its harness: the next one with
    # the same harness is read whole, not taken from the failed one.
    bad = grant(1)
    bad["job"]["timeout_s"] = "never"
    batch = parse_lease_reply({"jobs": [bad, grant(2), grant(3, sandbox="strict")]})
    assert [g.job.job_id for g in batch.grants()] == [2]
    assert [u.job_id for u in batch.unparsed] == [1, 3]
