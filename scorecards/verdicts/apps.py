from __future__ import annotations

from django.apps import AppConfig


class VerdictsConfig(AppConfig):
    name = "scorecards.verdicts"
    label = "verdicts"
    verbose_name = "A person's verdicts and regrades"
