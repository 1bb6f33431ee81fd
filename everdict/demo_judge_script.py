"""The demo's judge: a small deterministic script standing in for `claude -p` or `codex exec`.

It reads what it judges from `$EVERDICT_JUDGE_FILE` (the rubric, the case's input, the output
the demo harness gave, the expected answer) and answers the one object a judge answers:
`{"pass": bool, "score": 0..1, "reason": str}`. No network, no login. Standard library only.
"""

from __future__ import annotations

import json
import os
import sys


def _answer_text(output: str) -> str:
    """The demo harness prints `{"result": ...}`; a judge reads what the assistant said."""
    try:
        document = json.loads(output)
    except ValueError:
        return output.strip()
    return str(document.get("result", "")) if isinstance(document, dict) else output.strip()


def judge(judged: dict[str, object]) -> dict[str, object]:
    said = _answer_text(str(judged.get("output", "")))
    expected = str(judged.get("expected", ""))
    if said.strip().lower() == expected.strip().lower():
        return {"pass": True, "score": 1.0, "reason": f"says {expected!r}, as the reference does"}
    if expected.lower() in said.lower():
        return {"pass": True, "score": 0.8, "reason": f"mentions {expected!r} among other words"}
    reason = f"says {said!r}; the reference says {expected!r}"
    return {"pass": False, "score": 0.0, "reason": reason}


def main() -> int:
    with open(os.environ["EVERDICT_JUDGE_FILE"], encoding="utf-8") as handle:
        judged = json.load(handle)
    print(json.dumps(judge(judged)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
