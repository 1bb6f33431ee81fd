"""The wire contract between the server and the runner: one definition, both sides.

Imports nothing of the server; the server imports it from here. Models the server
receives forbid extra fields, so a runner cannot smuggle in provenance or a score.

Protocol 2 gathers every change of its round in one step: resume and shadow semantics,
`release_job`, `hello.limits`, the case file, `retry_on`, `log_tail` and the fingerprint. A
server whose minimum is 2 answers a protocol-1 runner `update_required` before it ever sees
a spec key it cannot parse.

One module a concern: `limits` (the version and every bound), `env` (what a harness may not
set), `spec` (a harness version and its digest), `jobs` (what a lease grants), `results`
(what the runner reports), `replies` (what the server answers). Every name is here too.
"""

from __future__ import annotations

from runnercli.protocol.env import (
    REFUSED_ENV_NAMES,
    REFUSED_ENV_PREFIXES,
    refused_env_keys,
)
from runnercli.protocol.jobs import (
    CaseJob,
    CaseRef,
    HarnessRef,
    Lease,
    LeaseGrant,
    LeaseReply,
)
from runnercli.protocol.limits import (
    FAIL_MESSAGE_CHARS,
    MAX_ARG_BYTES,
    MAX_CAPABILITIES,
    MAX_CAPABILITY_CHARS,
    MAX_CASE_ENV_BYTES,
    MAX_FAIL_MESSAGE_CHARS,
    MAX_FINGERPRINT_TOOLS,
    MAX_JOBS_PER_LEASE,
    MAX_LOG_LINE_BYTES,
    MAX_LOG_LINES_PER_CALL,
    MAX_LOG_TAIL_LINES,
    MAX_OUTPUT_BYTES,
    MAX_RELEASE_REASON_CHARS,
    MAX_RESULTS_BYTES_PER_CALL,
    MAX_RESULTS_PER_CALL,
    MAX_RUNNER_INFO_CHARS,
    MAX_RUNNERCLI_VERSION_CHARS,
    MAX_STATUS_CHARS,
    MAX_STDERR_TAIL_BYTES,
    MAX_TOOL_VERSION_CHARS,
    MAX_WAIT_MS,
    PROTOCOL_VERSION,
)
from runnercli.protocol.replies import (
    Ack,
    BatchAck,
    HeartbeatAck,
    Hello,
    Limits,
    ToolFailure,
)
from runnercli.protocol.results import (
    CaseResult,
    Fingerprint,
    ResultReport,
    ToolName,
    ToolVersion,
)
from runnercli.protocol.spec import (
    CAPABILITY_RE,
    PLACEHOLDER_RE,
    RUNNER_CONTEXT,
    Capability,
    Grader,
    HarnessSpec,
    RetryOn,
    harness_digest,
)

__all__ = [
    "CAPABILITY_RE",
    "FAIL_MESSAGE_CHARS",
    "MAX_ARG_BYTES",
    "MAX_CAPABILITIES",
    "MAX_CAPABILITY_CHARS",
    "MAX_CASE_ENV_BYTES",
    "MAX_FAIL_MESSAGE_CHARS",
    "MAX_FINGERPRINT_TOOLS",
    "MAX_JOBS_PER_LEASE",
    "MAX_LOG_LINES_PER_CALL",
    "MAX_LOG_LINE_BYTES",
    "MAX_LOG_TAIL_LINES",
    "MAX_OUTPUT_BYTES",
    "MAX_RELEASE_REASON_CHARS",
    "MAX_RESULTS_BYTES_PER_CALL",
    "MAX_RESULTS_PER_CALL",
    "MAX_RUNNERCLI_VERSION_CHARS",
    "MAX_RUNNER_INFO_CHARS",
    "MAX_STATUS_CHARS",
    "MAX_STDERR_TAIL_BYTES",
    "MAX_TOOL_VERSION_CHARS",
    "MAX_WAIT_MS",
    "PLACEHOLDER_RE",
    "PROTOCOL_VERSION",
    "REFUSED_ENV_NAMES",
    "REFUSED_ENV_PREFIXES",
    "RUNNER_CONTEXT",
    "Ack",
    "BatchAck",
    "Capability",
    "CaseJob",
    "CaseRef",
    "CaseResult",
    "Fingerprint",
    "Grader",
    "HarnessRef",
    "HarnessSpec",
    "HeartbeatAck",
    "Hello",
    "Lease",
    "LeaseGrant",
    "LeaseReply",
    "Limits",
    "ResultReport",
    "RetryOn",
    "ToolFailure",
    "ToolName",
    "ToolVersion",
    "harness_digest",
    "refused_env_keys",
]
