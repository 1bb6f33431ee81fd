from __future__ import annotations

from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    # The label these tables and migrations were created under: an existing database keeps
    # its `everdict_apikey` table and its migration history, and upgrades with `migrate` alone.
    label = "everdict"
    verbose_name = "Identity"
