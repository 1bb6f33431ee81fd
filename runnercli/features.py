"""The protocol-3 features this runner implements, declared in every `hello` and `lease_job`.

A feature is listed here once the runner really does it (a stage of the case pipeline, or
a part of the loop); the server leases a job needing a feature only to a runner declaring it.
"""

from __future__ import annotations

# `repo`, `artifacts`, `trace`, `screens`, `services`: the stages that do them; `judge`: the
# pipeline of a judge job (`runnercli.case.judge`); `files`: the fs rendezvous
# (`runnercli.casefiles`, with the `Files` stage); `slots`: a case takes its harness's slots
# of `--max-concurrent` (`runnercli.slots`).
RUNNER_FEATURES: tuple[str, ...] = (
    "artifacts",
    "files",
    "judge",
    "repo",
    "screens",
    "services",
    "slots",
    "trace",
)
