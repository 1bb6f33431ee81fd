"""A harness version's digest, pinned: consent pins it and every fingerprint carries it, so the
same content must keep the same digest across releases."""

from __future__ import annotations

import hashlib

from runnercli.protocol import HarnessSpec, harness_digest

SPEC = {
    "command": ["python", "-c", "print('{input.text}')"],
    "timeout_s": 30,
    "output": "text",
    "grader": {"type": "exact"},
    "capabilities": ["python"],
}
# What it executes, as canonical JSON (keys sorted, no spaces), defaults written out.
CANONICAL = (
    '{"command":["python","-c","print(\'{input.text}\')"],"env":{},'
    '"grader":{"field":null,"type":"exact"},"output":"text","timeout_s":30}'
)
DIGEST = "3340d41010c85fd300cdfe7957aaaec3db0f2264ae4b1faa9949b8c9d69323ae"


def test_the_digest_is_the_sha256_of_what_the_version_executes_as_canonical_json() -> None:
    assert hashlib.sha256(CANONICAL.encode()).hexdigest() == DIGEST
    assert harness_digest(HarnessSpec.model_validate(SPEC)) == DIGEST


def test_capabilities_do_not_change_the_digest_and_the_environment_does() -> None:
    more = HarnessSpec.model_validate({**SPEC, "capabilities": ["python", "gpu"]})
    assert harness_digest(more) == DIGEST
    with_env = HarnessSpec.model_validate({**SPEC, "env": {"NO_COLOR": "1"}})
    assert harness_digest(with_env) != DIGEST


def test_a_spec_digested_again_gives_the_same_digest_and_a_field_set_since_a_new_one() -> None:
    spec = HarnessSpec.model_validate(SPEC)
    assert harness_digest(spec) == harness_digest(spec) == DIGEST
    spec.env = {"A": "1"}
    changed = harness_digest(spec)
    assert changed != DIGEST
    assert changed == harness_digest(HarnessSpec.model_validate({**SPEC, "env": {"A": "1"}}))
