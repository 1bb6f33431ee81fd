"""The demo harness: a tiny, deterministic "assistant" that answers one case.

It reads the case from `EVERDICT_CASE` (as every harness may), narrates its steps on
stderr (they stream to the run page's live log), and prints one JSON object on stdout:
`{"result": ..., "usage": {...}, "total_cost_usd": ...}`. It has three blind spots on
purpose, so the demo's scorecard shows failures too. Standard library only.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

STEP_S = float(os.environ.get("DEMO_STEP_S", "0.3"))

CAPITALS = {
    "France": "Paris",
    "Japan": "Tokyo",
    # Wrong on purpose: the demo's "assistant" falls for the usual mix-up.
    "Australia": "Sydney",
}
WORDS = {"hello": "bonjour", "thank you": "merci", "cheese": "fromage"}


def _add(case: dict[str, Any]) -> str:
    return str(case["a"] + case["b"])


def _power(case: dict[str, Any]) -> str:
    # A classic bug, kept on purpose: `^` is XOR in Python, not a power.
    return str(case["base"] ^ case["exponent"])


def _reverse(case: dict[str, Any]) -> str:
    return str(case["text"])[::-1]


def _upper(case: dict[str, Any]) -> str:
    return str(case["text"]).upper()


def _vowels(case: dict[str, Any]) -> str:
    return str(sum(ch in "aeiou" for ch in str(case["text"]).lower()))


def _sort(case: dict[str, Any]) -> str:
    return " ".join(sorted(str(case["text"]).split()))


def _capital(case: dict[str, Any]) -> str:
    return CAPITALS.get(case["country"], "I don't know")


def _translate(case: dict[str, Any]) -> str:
    return WORDS.get(str(case["text"]).lower(), "I don't know")


def _trivia(case: dict[str, Any]) -> str:
    return "I don't know"  # it knows no trivia: this case fails by design


TASKS: dict[str, Callable[[dict[str, Any]], str]] = {
    "add": _add,
    "power": _power,
    "reverse": _reverse,
    "upper": _upper,
    "vowels": _vowels,
    "sort": _sort,
    "capital": _capital,
    "translate": _translate,
    "trivia": _trivia,
}


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
    time.sleep(STEP_S)


def main() -> int:
    case = json.loads(os.environ.get("EVERDICT_CASE") or "{}")
    given = case.get("input") or {}
    prompt = str(given.get("prompt", ""))
    say(f"reading case {case.get('key', '?')}: {prompt}")
    task = TASKS.get(str(given.get("task")))
    if task is None:
        print(f"unknown task {given.get('task')!r}", file=sys.stderr)
        return 2
    say(f"thinking ({given['task']})…")
    answer = task(given)
    say(f"answer: {answer}")
    tokens_in, tokens_out = len(prompt.split()) * 4, len(answer.split()) * 4
    print(
        json.dumps(
            {
                "result": answer,
                "usage": {"input_tokens": tokens_in, "output_tokens": tokens_out},
                "total_cost_usd": round((tokens_in + 3 * tokens_out) * 1e-6, 6),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
