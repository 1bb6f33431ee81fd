"""The page a member opens to pair a machine: `/pair/<code>` shows what asks to be paired and
from where, with Approve and Deny; `/pair/` takes a code typed by hand."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.cache import add_never_cache_headers
from django.views.decorators.http import require_GET, require_POST

from accounts.authentication import signed_in
from core.errors import ServiceError
from runners.pairing import device_pairing_decide, device_pairing_open, user_code_normal
from runners.throttles import device_code_wait


def _throttled(request: HttpRequest) -> HttpResponse | None:
    wait = device_code_wait(signed_in(request))
    if wait is None:
        return None
    context = {"error": f"Too many codes tried: wait {int(wait) + 1} s, then try again."}
    response = render(request, "runners/pair.html", context, status=429)
    response["Retry-After"] = str(int(wait) + 1)
    return response


@login_required
@require_GET
def pair_enter(request: HttpRequest) -> HttpResponse:
    typed = request.GET.get("code", "")
    if typed and (code := user_code_normal(typed)):
        return redirect("pair", user_code=code)
    error = "That is not a pairing code (8 letters, such as WDJB-MJHT)." if typed else ""
    return render(request, "runners/pair.html", {"error": error}, status=400 if error else 200)


@login_required
@require_GET
def pair_page(request: HttpRequest, user_code: str) -> HttpResponse:
    if refused := _throttled(request):
        return refused
    try:
        pairing = device_pairing_open(user=signed_in(request), user_code=user_code)
    except ServiceError as exc:
        return render(request, "runners/pair.html", {"error": exc.detail}, status=exc.status)
    context = {"pairing": pairing, "expired": pairing.expires_at <= timezone.now()}
    response = render(request, "runners/pair.html", context)
    add_never_cache_headers(response)
    return response


def _decide(request: HttpRequest, user_code: str, approve: bool) -> HttpResponse:
    if refused := _throttled(request):
        return refused
    try:
        pairing = device_pairing_decide(
            user=signed_in(request), user_code=user_code, approve=approve
        )
    except ServiceError as exc:
        messages.error(request, str(exc.detail))
    else:
        if approve:
            messages.success(request, f"Approved: “{pairing.label}” is pairing as your runner.")
        else:
            messages.success(request, f"Denied: “{pairing.label}” was not paired.")
    return redirect("pair", user_code=user_code)


@login_required
@require_POST
def pair_approve(request: HttpRequest, user_code: str) -> HttpResponse:
    return _decide(request, user_code, approve=True)


@login_required
@require_POST
def pair_deny(request: HttpRequest, user_code: str) -> HttpResponse:
    return _decide(request, user_code, approve=False)
