"""`manage.py create_api_key USERNAME [--name N]`: print a new `evk_` key and nothing else."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.services import api_key_create


class Command(BaseCommand):
    help = "Create a personal API key for USERNAME and print it (only this once)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--name", default="", help="A name to recognise the key by.")

    def handle(self, *args: Any, username: str, name: str, **options: Any) -> None:
        user = get_user_model().objects.filter(username=username, is_active=True).first()
        if user is None:
            raise CommandError(f"No active user named {username!r}.")
        if len(name) > 100:
            raise CommandError("--name must be at most 100 characters.")
        # Only the key on stdout, so scripts can capture it: KEY=$(manage.py create_api_key …).
        self.stdout.write(api_key_create(user=user, name=name).key)
