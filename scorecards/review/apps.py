from __future__ import annotations

from django.apps import AppConfig


class ReviewConfig(AppConfig):
    name = "scorecards.review"
    label = "review"
    verbose_name = "The review queue and the judges' agreement with people"

    def ready(self) -> None:
        # A harness's reply and panel reach the judges' agreement through the lifecycle.
        from scorecards.review import lane  # noqa: F401
