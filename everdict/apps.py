from __future__ import annotations

from django.apps import AppConfig


class EverdictConfig(AppConfig):
    name = "everdict"
    verbose_name = "Identity"
