from __future__ import annotations

from allauth.socialaccount.models import SocialApp, SocialToken
from django.contrib import admin
from django.http import HttpRequest

from accounts.models import ApiKey


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    # key_hash is never shown: it is not secret on its own, but it has no use to an operator.
    list_display = ["prefix", "user", "name", "created_at", "last_used_at", "revoked_at"]
    list_filter = [("revoked_at", admin.EmptyFieldListFilter)]
    search_fields = ["prefix", "name", "user__username"]
    list_select_related = ["user"]
    fields = ["prefix", "user", "name", "created_at", "last_used_at", "revoked_at"]
    readonly_fields = ["prefix", "user", "created_at", "last_used_at"]
    date_hierarchy = "created_at"

    def has_add_permission(self, request: HttpRequest) -> bool:
        # A key is issued by its owner (account page, API, create_api_key), shown once.
        return False


# Sign-in is configured from the environment (OIDC_*), never in the admin: an app added here
# would make the provider ambiguous, and tokens are not kept at all.
admin.site.unregister(SocialApp)
admin.site.unregister(SocialToken)
