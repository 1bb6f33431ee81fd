"""The case page's services panel: each service of the run's harness, what it is, and the
lines of its log the runner put in the case's log (`[service NAME] …`)."""

from __future__ import annotations

from typing import Any

from django import template

register = template.Library()

PREFIX = "[service {name}] "


@register.simple_tag
def case_services(spec: dict[str, Any], logs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """[{name, what, scope, lines}] for each service of `spec`, in name order."""
    panels = []
    for name, service in sorted((spec.get("services") or {}).items()):
        prefix = PREFIX.format(name=name)
        lines = [log["line"][len(prefix) :] for log in logs if log["line"].startswith(prefix)]
        if service.get("image"):
            what = f"container {service['image']}"
        else:
            what = "process " + " ".join(service.get("run") or [])
        panels.append(
            {"name": name, "what": what, "scope": service.get("scope", "version"), "lines": lines}
        )
    return panels
