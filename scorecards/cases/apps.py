from __future__ import annotations

from django.apps import AppConfig


class CasesConfig(AppConfig):
    name = "scorecards.cases"
    label = "cases"
    verbose_name = "A case of a run"
