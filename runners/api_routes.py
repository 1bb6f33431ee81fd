from __future__ import annotations

from django.urls import path

from runners import api

urlpatterns = [
    path("runners", api.RunnerListView.as_view(), name="api-runners"),
    path("runners/<int:runner_id>", api.RunnerDetailView.as_view(), name="api-runner"),
]
