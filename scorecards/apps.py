from __future__ import annotations

from django.apps import AppConfig


class ScorecardsConfig(AppConfig):
    name = "scorecards"
    verbose_name = "Scorecards"
