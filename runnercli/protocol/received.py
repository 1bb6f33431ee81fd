"""What the server receives, and the context the runner parses what it is sent under."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Received(BaseModel):
    """A model the server receives: an unknown field is refused, never ignored."""

    model_config = ConfigDict(extra="forbid")


# The validation context under which the runner parses what the server sends: a spec with a
# refused environment key still parses there, so the runner can refuse the job by name
# (`fail_job`) rather than fail to read the lease it already holds.
RUNNER_CONTEXT = {"received_by": "runner"}
