"""Routes of the review queue: its page and the page's actions, and the same under /api/."""

from __future__ import annotations

from django.urls import path

from scorecards.review import api, views

urlpatterns = [
    path("w/<slug:slug>/review", views.review_page, name="review"),
    path("w/<slug:slug>/review/<int:result_id>", views.review_act_view, name="review-act"),
]

api_urlpatterns = [
    path("workspaces/<slug:slug>/review", api.ReviewQueueView.as_view(), name="api-review"),
    path("results/<int:result_id>/review", api.ReviewActView.as_view(), name="api-review-act"),
]
