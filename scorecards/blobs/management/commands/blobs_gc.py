"""Remove blobs no result (nor frame, nor anything else) names, stale staged uploads, and with
EVERDICT_RETENTION_DAYS the artifacts, frames and traces of older runs."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from scorecards.blobs.gc import blobs_gc


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--dry-run", action="store_true", help="Say what would be removed; remove nothing."
        )

    def handle(self, *args: Any, dry_run: bool = False, **options: Any) -> None:
        swept = blobs_gc(dry_run=dry_run)
        verb = "would remove" if dry_run else "removed"
        self.stdout.write(
            f"{verb} {swept.blobs} blob(s) ({swept.blob_bytes} bytes), "
            f"{swept.uploads} stale upload(s), {swept.staged} stray staged chunk(s); "
            f"retention {'would forget' if dry_run else 'forgot'} {swept.forgotten} row(s)"
        )
