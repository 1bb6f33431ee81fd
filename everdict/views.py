"""Pages of the identity app: the home page (my workspaces)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from scorecards.models import Membership


@login_required
def home(request: HttpRequest) -> HttpResponse:
    user: Any = request.user  # an authenticated user, by login_required
    memberships = (
        Membership.objects.filter(user=user).select_related("workspace").order_by("workspace__slug")
    )
    return render(request, "home.html", {"memberships": memberships})
