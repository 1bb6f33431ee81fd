"""Runner features: what a runner of protocol 3 can do beyond protocol 2, and what a job needs.

A runner declares the features it implements in `hello` and `lease_job`; the server stores
them, and leases a job only to a runner with every feature the job needs. So each feature
ships on its own, and a runner without it keeps serving the harnesses that do not use it —
it never receives a spec key it cannot parse.
"""

from __future__ import annotations

from typing import Literal, get_args

from runnercli.protocol.spec import STREAM_OUTPUTS, HarnessSpec

Feature = Literal[
    "repo",
    "artifacts",
    "trace",
    "screens",
    "services",
    "judge",
    "slots",
    "files",
    # Protocol 4: the verifier (with protected paths and hidden files), budgets, a clean
    # agent configuration, raw bytes beside the MCP call.
    "verify",
    "limits",
    "agent_config",
    "raw_upload",
]
FEATURES: tuple[str, ...] = get_args(Feature)
MAX_FEATURES = 32


def spec_features(spec: HarnessSpec) -> list[str]:
    """The features a runner needs to run a case of this harness: one per protocol-3 key it
    sets (`repo`, `artifacts`, a streamed `output` → `trace`, `services`, `slots`) and
    protocol-4 key (`verify` or `protect` → `verify`, `limits`, `agent_config: clean`). A case
    with hidden files needs `verify` too (the job says so)."""
    needed = []
    if spec.repo is not None:
        needed.append("repo")
    if spec.artifacts is not None:
        needed.append("artifacts")
    if spec.output in STREAM_OUTPUTS:
        needed.append("trace")
    if spec.services is not None:
        needed.append("services")
    if spec.slots is not None:
        needed.append("slots")
    if spec.verify is not None or spec.protect is not None:
        needed.append("verify")
    if spec.limits is not None:
        needed.append("limits")
    if spec.agent_config == "clean":
        needed.append("agent_config")
    return sorted(needed)


# What a judge job (`kind: judge`) needs, whatever its harness.
JUDGE_FEATURES = ["judge"]


# The features this runner implements, declared in every `hello` and `lease_job`: a feature is
# listed once the runner really does it, and each is added both to `Feature` and here.
# `repo`, `artifacts`, `trace`, `screens`, `services`, `files`: the stages that do them
# (`runnercli.case.<feature>`); `judge`: the pipeline of a judge job; `slots`: a case takes
# its harness's slots of `--max-concurrent` (`runnercli.slots`); `verify`: the verifier,
# protected paths and hidden files (`runnercli.case.verify`); `limits`: a case's budgets read
# from its agent's stream (`runnercli.case.limits`); `raw_upload`: large artifacts sent by
# `PUT` when the server's `hello` offers it too (`runnercli.case.artifacts.upload`).
RUNNER_FEATURES: tuple[str, ...] = (
    "agent_config",
    "artifacts",
    "files",
    "judge",
    "repo",
    "screens",
    "services",
    "slots",
    "trace",
    "verify",
    "limits",
    "raw_upload",
)

# What this server does beyond the protocol's calls, said in its `hello`: `raw_upload`, a
# blob's bytes sent by plain HTTP `PUT`s beside the MCP call (`begin_upload`); `upload_batch`,
# the upload URLs of several blobs in one call (`begin_uploads`); `fs_answers`, a runner's
# answers to file requests carried by its next `poll_case_fs_requests` (`answers`). A runner
# uses one only when the server names it.
SERVER_FEATURES: tuple[str, ...] = ("raw_upload", "upload_batch", "fs_answers")
