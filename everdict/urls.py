from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest, JsonResponse
from django.urls import include, path


def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"ok": True})


handler404 = "everdict.api_errors.not_found"

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("admin/", admin.site.urls),
    path("api/", include("everdict.api_urls")),
    path("", include("everdict.page_routes")),
]
