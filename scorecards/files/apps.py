from __future__ import annotations

from django.apps import AppConfig


class FilesConfig(AppConfig):
    name = "scorecards.files"
    label = "files"
    verbose_name = "Files while it runs"
