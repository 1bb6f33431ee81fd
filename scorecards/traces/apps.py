from __future__ import annotations

from django.apps import AppConfig


class TracesConfig(AppConfig):
    name = "scorecards.traces"
    label = "traces"
    verbose_name = "Traces and screens"

    def ready(self) -> None:
        # The run page's socket shows running cases through the lifecycle's live parts, which
        # its decorator fills: the socket never imports this app.
        from scorecards.traces import live  # noqa: F401
