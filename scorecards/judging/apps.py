from __future__ import annotations

from django.apps import AppConfig


class JudgingConfig(AppConfig):
    name = "scorecards.judging"
    label = "judging"
    verbose_name = "Judges"

    def ready(self) -> None:
        # Starting, settling and summing up a run reach judges through the lifecycle's
        # registries, which its decorators fill: the runs never import this app.
        from scorecards.judging import lane  # noqa: F401
