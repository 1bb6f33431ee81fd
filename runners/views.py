"""The account page: my runners (pair, roster, revoke) and my API keys.

Every action is a plain POST form, so the page works without JavaScript. Each POST
redirects (a reload never re-submits it and pairs a second runner); a new token or key
rides in the session just long enough for the next page view, which removes it as it
shows it, so a reload never shows it again.
"""

from __future__ import annotations

import re
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.cache import add_never_cache_headers
from django.views.decorators.http import require_GET, require_POST

from accounts.authentication import signed_in
from accounts.models import ApiKey
from accounts.services import api_key_create, api_key_revoke
from core.errors import NotFound
from runnercli.protocol import MAX_CAPABILITIES, is_capability
from runners.models import PairingMethod
from runners.pairing import device_pairings_waiting
from runners.presence import status_severity
from runners.replies import runner_items
from runners.roster import runners_of
from runners.services import runner_pair, runner_revoke


class RunnerPairForm(forms.Form):
    label = forms.CharField(max_length=100)
    capabilities = forms.CharField(
        required=False,
        help_text="Comma or space separated, e.g. claude, python, node.",
    )

    def clean_capabilities(self) -> list[str]:
        names = [c for c in re.split(r"[\s,]+", self.cleaned_data["capabilities"].lower()) if c]
        bad = [c for c in names if not is_capability(c)]
        if bad:
            raise forms.ValidationError(
                "Not a capability name: %(names)s. Use 1-40 characters of a-z, 0-9, '.', '_' "
                "or '-', starting with a letter or digit.",
                params={"names": ", ".join(bad[:5])},
            )
        if len(names) > MAX_CAPABILITIES:
            raise forms.ValidationError(f"At most {MAX_CAPABILITIES} capabilities.")
        return names


class ApiKeyCreateForm(forms.Form):
    name = forms.CharField(max_length=100, required=False)


def _base_url(request: HttpRequest) -> str:
    return (settings.EVERDICT_PUBLIC_URL or request.build_absolute_uri("/")).rstrip("/")


def _render_account(request: HttpRequest, status: int = 200, **context: Any) -> HttpResponse:
    user = signed_in(request)
    owned = runners_of(user)
    runners = [
        item.data()
        | {
            "severity": status_severity(item.status) if item.status else "",
            "last_seen": runner.last_seen_at,
            "paired_at": runner.connected_at,
            "paired_via": runner.get_paired_via_display(),
            "paused_until": runner.paused_until if runner.is_paused else None,
            "pause_reason": runner.pause_reason,
        }
        for item, runner in zip(runner_items(owned), owned, strict=True)
    ]
    context.setdefault("pair_form", RunnerPairForm())
    context.setdefault("key_form", ApiKeyCreateForm())
    context.update(
        runners=runners,
        api_keys=ApiKey.objects.owned_by(user).active(),
        device_pairings=device_pairings_waiting(user=user),
        base_url=_base_url(request),
    )
    response = render(request, "runners/account.html", context, status=status)
    # A page that may carry a freshly issued secret must not be kept by any cache.
    add_never_cache_headers(response)
    return response


_SHOW_ONCE = "everdict-show-once"


def _show_once(request: HttpRequest, **secret: Any) -> HttpResponse:
    request.session[_SHOW_ONCE] = secret
    return redirect("account")


@login_required
@require_GET
def account(request: HttpRequest) -> HttpResponse:
    return _render_account(request, **request.session.pop(_SHOW_ONCE, {}))


@login_required
@require_POST
def runner_pair_view(request: HttpRequest) -> HttpResponse:
    form = RunnerPairForm(request.POST)
    if not form.is_valid():
        return _render_account(request, status=400, pair_form=form)
    paired = runner_pair(
        owner=signed_in(request),
        label=form.cleaned_data["label"],
        capabilities=form.cleaned_data["capabilities"],
        via=PairingMethod.PAGE,
    )
    return _show_once(
        request, paired={"runner": {"label": paired.runner.label}, "token": paired.token}
    )


@login_required
@require_POST
def runner_revoke_view(request: HttpRequest, runner_id: int) -> HttpResponse:
    try:
        runner = runner_revoke(owner=signed_in(request), runner_id=runner_id)
    except NotFound:
        messages.error(request, "Runner not found.")
    else:
        messages.success(request, f"Runner {runner.label} is revoked: its token stopped working.")
    return redirect("account")


@login_required
@require_POST
def api_key_create_view(request: HttpRequest) -> HttpResponse:
    form = ApiKeyCreateForm(request.POST)
    if not form.is_valid():
        return _render_account(request, status=400, key_form=form)
    issued = api_key_create(user=signed_in(request), name=form.cleaned_data["name"])
    return _show_once(
        request, issued_key={"api_key": {"name": issued.api_key.name}, "key": issued.key}
    )


@login_required
@require_POST
def api_key_revoke_view(request: HttpRequest, key_id: int) -> HttpResponse:
    if api_key_revoke(user=signed_in(request), key_id=key_id):
        messages.success(request, "API key revoked.")
    else:
        messages.error(request, "API key not found.")
    return redirect("account")
