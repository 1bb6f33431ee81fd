"""Routes of the identity app: sign-in pages, and personal API keys under /api/."""

from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import path

from accounts import api

urlpatterns = [
    path("login/", auth_views.LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
]

api_urlpatterns = [
    path("api-keys", api.ApiKeyListView.as_view(), name="api-keys"),
    path("api-keys/<int:key_id>", api.ApiKeyDetailView.as_view(), name="api-key"),
]
