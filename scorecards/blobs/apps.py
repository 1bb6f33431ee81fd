from __future__ import annotations

from django.apps import AppConfig


class BlobsConfig(AppConfig):
    name = "scorecards.blobs"
    label = "blobs"
    verbose_name = "Artifacts and blobs"

    def ready(self) -> None:
        # A result's artifacts are checked and recorded as it settles through the run's
        # lifecycle registries, which its decorators fill: settling never imports this app.
        from scorecards.blobs import artifacts  # noqa: F401
