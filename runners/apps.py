from __future__ import annotations

from django.apps import AppConfig


class RunnersConfig(AppConfig):
    name = "runners"
    verbose_name = "Runners and lease queue"

    def ready(self) -> None:
        from django.contrib.auth import get_user_model
        from django.db.backends.signals import connection_created
        from django.db.models.signals import post_save

        from accounts.kept import kept_keys
        from core.sqlite import use_sqlite_parameter_limit
        from runners import collectors, wakeup
        from runners.services import owner_deactivated

        # The gauges /metrics reads at scrape time query the models: registered once they
        # are loaded, never at import.
        collectors.register()
        # A batch's rows in one INSERT on SQLite too.
        connection_created.connect(use_sqlite_parameter_limit, dispatch_uid="core.sqlite")

        # The one signal: Django's own User can be deactivated in its admin, which calls no
        # service of ours. Its runners' tokens must stop working at once on every replica.
        post_save.connect(
            owner_deactivated, sender=get_user_model(), dispatch_uid="runners.owner_deactivated"
        )
        # Verified API keys are kept while this process's listener relays the changes to
        # users and keys (`accounts.kept`).
        kept_keys.follow(lambda: wakeup.listener.listening)
