"""Sign-in pages: the login page (password and/or the OpenID provider), logout, and the admin's
login, which follows EVERDICT_PASSWORD_LOGIN."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import admin
from django.contrib.auth import logout
from django.contrib.auth import views as auth_views
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from accounts.oidc.adapters import ID_TOKEN_SESSION_KEY
from accounts.oidc.logout import provider_logout_url

PASSWORD_CLOSED = "Password sign-in is closed on this server."


class SignInView(auth_views.LoginView):
    redirect_authenticated_user = True

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context["password_login"] = settings.EVERDICT_PASSWORD_LOGIN
        if settings.OIDC_ENABLED:
            context["sso"] = {
                "name": settings.OIDC_PROVIDER_NAME,
                "url": reverse(
                    "openid_connect_login", kwargs={"provider_id": settings.OIDC_PROVIDER_ID}
                ),
            }
        return context

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not settings.EVERDICT_PASSWORD_LOGIN:
            context = self.get_context_data(refused=PASSWORD_CLOSED)
            return render(request, str(self.template_name), context, status=403)
        return super().post(request, *args, **kwargs)


@require_POST
def sign_out(request: HttpRequest) -> HttpResponse:
    """End the local session, then the provider's when this one began there."""
    id_token = request.session.get(ID_TOKEN_SESSION_KEY)
    logout(request)
    if id_token and (url := provider_logout_url(request, id_token)):
        return redirect(url)
    return redirect(settings.LOGOUT_REDIRECT_URL)


def admin_login(request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
    """The admin's own login form while passwords are open; else the login page (and its
    provider), which brings a staff member back to the admin."""
    if settings.EVERDICT_PASSWORD_LOGIN:
        return admin.site.login(request, extra_context)
    return redirect_to_login(request.GET.get("next") or reverse("admin:index"))
