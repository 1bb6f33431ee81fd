from __future__ import annotations

from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from everdict import api

urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("api-keys", api.ApiKeyListView.as_view(), name="api-keys"),
    path("api-keys/<int:key_id>", api.ApiKeyDetailView.as_view(), name="api-key"),
]
