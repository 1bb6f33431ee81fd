"""Routes of the runners app: the account page and /metrics, and runners under /api/."""

from __future__ import annotations

from django.urls import path

from runners import api, views
from runners.metrics import metrics_view

urlpatterns = [
    path("metrics", metrics_view, name="metrics"),
    path("account/", views.account, name="account"),
    path("account/runners/pair", views.runner_pair_view, name="runner-pair"),
    path("account/runners/<int:runner_id>/revoke", views.runner_revoke_view, name="runner-revoke"),
    path("account/api-keys/create", views.api_key_create_view, name="api-key-create"),
    path("account/api-keys/<int:key_id>/revoke", views.api_key_revoke_view, name="api-key-revoke"),
]

api_urlpatterns = [
    path("runners", api.RunnerListView.as_view(), name="api-runners"),
    path("runners/<int:runner_id>", api.RunnerDetailView.as_view(), name="api-runner"),
]
