from __future__ import annotations

from django.apps import AppConfig


class SearchConfig(AppConfig):
    name = "scorecards.search"
    label = "search"
    verbose_name = "Search across outputs, reasons and traces"
