"""The protocol's version and its bounds: what one call, result or log line may carry."""

from __future__ import annotations

# Protocol 3 adds the case's world (repo, artifacts, trace, screens, services, judges), protocol
# 4 the verifier, budgets, a clean agent configuration and raw uploads: a job needs either only
# through the runner features its harness uses (`protocol.features`).
PROTOCOL_VERSION = 4

MAX_OUTPUT_BYTES = 1024 * 1024
MAX_STDERR_TAIL_BYTES = 64 * 1024
MAX_LOG_LINES_PER_CALL = 500
MAX_LOG_LINE_BYTES = 8 * 1024
MAX_STATUS_CHARS = 200
# How many capabilities a runner may declare (pairing, `hello`, `lease_job`), and how long
# one may be.
MAX_CAPABILITIES = 64
MAX_CAPABILITY_CHARS = 105  # `repo:` and a repo name of up to 100 characters
MAX_PLAIN_CAPABILITY_CHARS = 40
# `fail_job`'s message: what the server accepts, and what the runner sends of a longer one
# (a reason to show on the job, not a log: the log goes through `report_case_log`).
MAX_FAIL_MESSAGE_CHARS = MAX_STDERR_TAIL_BYTES
FAIL_MESSAGE_CHARS = 4000
# `release_job`'s reason (also the runner's pause reason, shown on the roster).
MAX_RELEASE_REASON_CHARS = 200
# The runner's description of itself in each result (its fingerprint).
MAX_RUNNER_INFO_CHARS = 100
MAX_RUNNERCLI_VERSION_CHARS = 50
MAX_FINGERPRINT_TOOLS = 32
MAX_TOOL_VERSION_CHARS = 200
# The lines a result carries for the case's log (its start and outcome lines), so a short
# case needs no `report_case_log` call of its own.
MAX_LOG_TAIL_LINES = 20
# The longest a long-poll may wait; a server may allow less (`hello.limits.max_wait_ms`).
MAX_WAIT_MS = 55_000
MAX_JOBS_PER_LEASE = 32
MAX_RESULTS_PER_CALL = MAX_JOBS_PER_LEASE
# What one `submit_job_results` call may carry in outputs and stderr tails together.
MAX_RESULTS_BYTES_PER_CALL = 4 * 1024 * 1024

# The case as JSON on the harness's environment only up to this size; it is always in the
# case file. Linux refuses a single environment string or argument over 128 KiB.
MAX_CASE_ENV_BYTES = 64 * 1024
MAX_ARG_BYTES = 128 * 1024

# Protocol 3: blobs (artifacts, screens, files a page asks for), per file and per case.
MAX_BLOB_CHUNK_BYTES = 1024 * 1024
# The most a raw upload's chunk (`PUT /uploads/…`, feature `raw_upload`) may be: a server
# names its own chunk (at most this) in each upload grant, a runner sends at most both. And
# the size from which an artifact goes that way rather than inline in `put_blob` calls.
MAX_RAW_CHUNK_BYTES = 16 * 1024 * 1024
RAW_UPLOAD_MIN_BYTES = 256 * 1024
MAX_ARTIFACT_BYTES = 10 * 1024 * 1024
MAX_CASE_ARTIFACT_BYTES = 50 * 1024 * 1024
MAX_ARTIFACTS_PER_RESULT = 200
MAX_ARTIFACT_PATH_CHARS = 1024
# Screens: a frame at most this often, of at most this size.
SCREEN_INTERVAL_MS = 1000
MAX_SCREEN_BYTES = 512 * 1024
# The fs rendezvous: entries in a listing, requests per poll.
MAX_FS_ENTRIES = 1000
MAX_FS_REQUESTS_PER_POLL = 32
