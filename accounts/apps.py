from __future__ import annotations

from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    # The label these tables and migrations were created under: an existing database keeps
    # its `everdict_apikey` table and its migration history, and upgrades with `migrate` alone.
    label = "everdict"
    verbose_name = "Identity"

    def ready(self) -> None:
        from django.contrib.auth import get_user_model
        from django.db.models.signals import post_delete, post_save

        from accounts import kept
        from accounts.models import ApiKey

        # A user or a key changed outside our services (the admin's pages, a sign-in's
        # save): the processes that keep the user's keys verify them again.
        user = get_user_model()
        for signal, name in ((post_save, "saved"), (post_delete, "deleted")):
            signal.connect(kept.user_changed, sender=user, dispatch_uid=f"kept.user_{name}")
            signal.connect(kept.key_changed, sender=ApiKey, dispatch_uid=f"kept.key_{name}")
