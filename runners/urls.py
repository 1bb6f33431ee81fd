"""Routes of the runners app: the account page and /metrics, and runners under /api/."""

from __future__ import annotations

from django.urls import path

from runners import api, pairing_api, pairing_views, views
from runners.metrics_views import metrics_view

urlpatterns = [
    path("metrics", metrics_view, name="metrics"),
    path("account/", views.account, name="account"),
    path("account/runners/pair", views.runner_pair_view, name="runner-pair"),
    path("account/runners/<int:runner_id>/revoke", views.runner_revoke_view, name="runner-revoke"),
    path("account/api-keys/create", views.api_key_create_view, name="api-key-create"),
    path("account/api-keys/<int:key_id>/revoke", views.api_key_revoke_view, name="api-key-revoke"),
    path("pair/", pairing_views.pair_enter, name="pair-enter"),
    path("pair/<str:user_code>", pairing_views.pair_page, name="pair"),
    path("pair/<str:user_code>/approve", pairing_views.pair_approve, name="pair-approve"),
    path("pair/<str:user_code>/deny", pairing_views.pair_deny, name="pair-deny"),
]

api_urlpatterns = [
    path("runners", api.RunnerListView.as_view(), name="api-runners"),
    path("runners/<int:runner_id>", api.RunnerDetailView.as_view(), name="api-runner"),
    path(
        "device-pairings", pairing_api.DevicePairingCreateView.as_view(), name="api-device-pairings"
    ),
    path(
        "device-pairings/token",
        pairing_api.DevicePairingTokenView.as_view(),
        name="api-device-pairing-token",
    ),
    path(
        "device-pairings/<str:user_code>/approve",
        pairing_api.DevicePairingApproveView.as_view(),
        name="api-device-pairing-approve",
    ),
    path(
        "device-pairings/<str:user_code>/deny",
        pairing_api.DevicePairingDenyView.as_view(),
        name="api-device-pairing-deny",
    ),
]
