"""The `Redact` stage: the member's `redact` patterns applied to the result before it leaves.

It comes after `Collect`, so the result it redacts is the one reported: the output (which the
server grades: it judges what the member let leave), the stderr tail and the verifier's
tails. Redaction can make a text longer; each is cut to its bound again (the output keeps
its head, the tails their end). The case's log lines are redacted as they are added
(`runnercli.case.log`), text artifacts by the stage that uploads them.
"""

from __future__ import annotations

from runnercli.case.pipeline import CaseContext, Given, Stage
from runnercli.protocol import MAX_OUTPUT_BYTES, MAX_STDERR_TAIL_BYTES
from runnercli.protocol.verifying import MAX_VERIFY_TAIL_BYTES
from runnercli.text.redact import Redactor
from runnercli.text.utf8 import clip_utf8


class Redact(Stage):
    name = "redact"
    needs = frozenset({Given.RESULT})

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor

    async def finish(self, case: CaseContext) -> None:
        result = case.result
        if result is None or not self.redactor:
            return
        output = clip_utf8(self.redactor.text(result.output), MAX_OUTPUT_BYTES)
        stderr_tail = clip_utf8(
            self.redactor.text(result.stderr_tail), MAX_STDERR_TAIL_BYTES, keep_tail=True
        )
        update: dict[str, object] = {"output": output, "stderr_tail": stderr_tail}
        if result.verify is not None:
            tails = {
                name: clip_utf8(
                    self.redactor.text(getattr(result.verify, name)),
                    MAX_VERIFY_TAIL_BYTES,
                    keep_tail=True,
                )
                for name in ("stdout_tail", "stderr_tail")
            }
            update["verify"] = result.verify.model_copy(update=tails)
        case.result = result.model_copy(update=update)
