"""Root URLs: each app's pages at the top, its REST API under /api/, and the admin."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest, JsonResponse
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from accounts import urls as accounts_urls
from accounts.signin import admin_login
from runners import urls as runners_urls
from scorecards import urls as scorecards_urls


def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"ok": True})


handler400 = "core.api_errors.bad_request"
handler404 = "core.api_errors.not_found"
handler500 = "core.api_errors.server_error"

api_urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    *accounts_urls.api_urlpatterns,
    *runners_urls.api_urlpatterns,
    *scorecards_urls.api_urlpatterns,
]

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    # Before the admin's own: its login follows EVERDICT_PASSWORD_LOGIN.
    path("admin/login/", admin_login),
    path("admin/", admin.site.urls),
    path("api/", include(api_urlpatterns)),
    path("", include(accounts_urls.urlpatterns)),
    path("", include(runners_urls.urlpatterns)),
    path("", include(scorecards_urls.urlpatterns)),
]
