from __future__ import annotations

from django.apps import AppConfig


class ReviewConfig(AppConfig):
    name = "scorecards.review"
    label = "review"
    verbose_name = "The review queue and the judges' agreement with people"
