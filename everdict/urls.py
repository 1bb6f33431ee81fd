from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest, JsonResponse
from django.urls import include, path


def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"ok": True})


handler400 = "everdict.api_errors.bad_request"
handler404 = "everdict.api_errors.not_found"
handler500 = "everdict.api_errors.server_error"

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("admin/", admin.site.urls),
    path("api/", include("everdict.api_urls")),
    path("", include("everdict.page_routes")),
]
