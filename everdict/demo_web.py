"""The demo's service harnesses over three pages: `demo-web`, whose `page` service is a process
serving the case's directory, and `demo-web-docker`, which adds a container service (an image
made on this machine when Docker answers) — "needs docker" on the run form where none does."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

WEB_HARNESS = "demo-web"
WEB_DOCKER_HARNESS = "demo-web-docker"
WEB_DATASET = "demo-pages"
# Made on this machine (`everdict.demo_image`) when Docker answers: nothing is pulled.
STATIC_IMAGE = "everdict-demo/static:1"
STATIC_PAGE = "served from a container"
WEB_CASES: list[dict[str, Any]] = [
    {"key": f"page-{word}", "input": {"text": f"a page about {word}"},
     "expected": f"a page about {word}"}
    for word in ("cats", "tea", "rain")
]  # fmt: skip


def web_harness_spec(*, docker: bool) -> dict[str, Any]:
    """The demo's service harness: a process service serving the case's directory (and, for
    the docker variant, a container service) and a case that fetches from them."""
    script = Path(__file__).resolve().parent / "demo_web_harness.py"
    page = {
        "scope": "case",
        "cwd": "case",
        "run": [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", "{port}"],
        "ready": {"http": "/", "timeout_s": 30},
    }
    services: dict[str, Any] = {"page": page}
    if docker:
        services["static"] = {
            "image": STATIC_IMAGE,
            "command": ["/bin/httpd", "-f", "-v", "-p", "8080", "-h", "/www"],
            "ports": [8080],
            "ready": {"http": "/", "port": 8080, "timeout_s": 30},
        }
    return {
        "command": [sys.executable, str(script), "{service.page.url}"],
        "env": {"PYTHONUNBUFFERED": "1"},
        "timeout_s": 60,
        "capabilities": ["python"],
        "output": "json",
        "grader": {"type": "contains", "field": "result"},
        "services": services,
    }


def web_spec() -> dict[str, Any]:
    return web_harness_spec(docker=False)


def web_docker_spec() -> dict[str, Any]:
    return web_harness_spec(docker=True)


def demo_static_image() -> str | None:
    """Make the container service's image when Docker answers; None when it can, else why
    `demo-web-docker` cannot run here."""
    import asyncio

    from runnercli.case.services.daemon import daemon_problem

    if (problem := asyncio.run(daemon_problem())) is not None:
        return problem
    try:
        from everdict.demo_image import busybox_image

        busybox_image(STATIC_IMAGE, STATIC_PAGE)
    except Exception as exc:
        return f"cannot make {STATIC_IMAGE}: {exc}"
    return None
