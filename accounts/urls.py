"""Routes of the identity app: sign-in pages, and personal API keys under /api/.

Of django-allauth, only what OpenID Connect sign-in needs is served: the provider's login and
callback, and the pages its flow can end on. None of its local sign-up or password pages.
"""

from __future__ import annotations

from allauth.socialaccount import views as socialaccount_views
from django.urls import path
from django.views.generic import TemplateView

from accounts import api, signin
from accounts.oidc import provider

urlpatterns = [
    path("login/", signin.SignInView.as_view(), name="login"),
    path("logout/", signin.sign_out, name="logout"),
    path("accounts/oidc/<str:provider_id>/login/", provider.login, name="openid_connect_login"),
    path(
        "accounts/oidc/<str:provider_id>/login/callback/",
        provider.callback,
        name="openid_connect_callback",
    ),
    path(
        "accounts/login/cancelled/",
        socialaccount_views.login_cancelled,
        name="socialaccount_login_cancelled",
    ),
    path(
        "accounts/login/error/", socialaccount_views.login_error, name="socialaccount_login_error"
    ),
    path(
        "accounts/inactive/",
        TemplateView.as_view(template_name="account/account_inactive.html"),
        name="account_inactive",
    ),
]

api_urlpatterns = [
    path("api-keys", api.ApiKeyListView.as_view(), name="api-keys"),
    path("api-keys/<int:key_id>", api.ApiKeyDetailView.as_view(), name="api-key"),
]
