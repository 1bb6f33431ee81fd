"""The demo's service harness: a case that checks a tiny web app its services serve.

The `page` service (a process: Python's own HTTP server in the case's directory) serves what
this case writes there; the `static` service, when the harness has one (a container made on
this machine), serves a page of its own. The case writes its page, fetches it back (and the
container's), and prints `{"result": …}`. Standard library only.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.request


def fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as reply:
        return reply.read().decode().strip()


def main() -> int:
    case = json.loads(os.environ["EVERDICT_CASE"])
    page_url = sys.argv[1]
    with open("index.html", "w", encoding="utf-8") as page:
        page.write(case["input"]["text"])
    print(f"wrote index.html; fetching {page_url}/index.html", file=sys.stderr)
    parts = [fetch(f"{page_url}/index.html")]
    if static_url := os.environ.get("EVERDICT_SERVICE_STATIC_URL"):
        print(f"fetching {static_url}/ from the container", file=sys.stderr)
        parts.append(fetch(f"{static_url}/"))
    print(json.dumps({"result": " | ".join(parts)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
