"""`pair` without a token: the machine asks the server for a code, the member approves it in a
browser where they are signed in, and the machine collects its runner token (RFC 8628's
device authorization flow, over plain HTTP; the contract is `runnercli.protocol.device`)."""

from __future__ import annotations

import os
import platform
import socket
import sys
import time
import webbrowser
from collections.abc import Callable
from typing import Any

import httpx2
from pydantic import ValidationError

from runnercli.config import runnercli_version
from runnercli.protocol.device import (
    GRANT_TYPE,
    DeviceAuthorization,
    DeviceToken,
    DeviceTokenError,
)

SLOW_DOWN_STEP_S = 5
REFUSALS = {
    "access_denied": "the pairing request was denied on the server",
    "expired_token": "the code expired before it was approved — run pair again for a new one",
    "invalid_grant": "the server no longer knows this request (already used?) — run pair again",
    "invalid_request": "the server did not understand the request",
}


class DevicePairingFailed(Exception):
    """Pairing by code did not give a token; the message says why, for the member."""


def default_label() -> str:
    return (socket.gethostname() or platform.node() or "runner")[:100]


def machine_os() -> str:
    return f"{platform.system()} {platform.release()}".strip()[:100]


def display_available() -> bool:
    """Whether a browser can open a window here: never over a bare SSH session or in CI."""
    if sys.platform in ("darwin", "win32"):
        return not os.environ.get("SSH_CONNECTION")
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def device_pair(
    server: str,
    *,
    label: str,
    capabilities: list[str],
    open_browser: bool,
    echo: Callable[[str], Any],
    sleep: Callable[[float], Any] = time.sleep,
) -> DeviceToken:
    """Ask for a code, show it (and open the page when asked), poll until the member decides."""
    headers = {"User-Agent": f"everdict-runner/{runnercli_version()} ({machine_os()})"}
    with httpx2.Client(base_url=server, timeout=30, headers=headers) as http:
        grant = _ask(http, {"label": label, "os": machine_os(), "capabilities": capabilities})
        echo(f"To pair this machine, open {grant.verification_uri_complete}")
        echo(f"and check that the page shows the code {grant.user_code}, then approve it.")
        echo(f"(The code expires in {grant.expires_in // 60 or 1} minutes; Ctrl-C gives up.)")
        if open_browser and display_available():
            webbrowser.open(grant.verification_uri_complete)
        echo("Waiting for approval…")
        return _poll(http, grant, sleep)


def _ask(http: httpx2.Client, body: dict[str, Any]) -> DeviceAuthorization:
    try:
        reply = http.post("/api/device-pairings", json=body)
    except httpx2.HTTPError as exc:
        raise DevicePairingFailed(f"cannot reach server: {exc}") from exc
    if reply.status_code == 429:
        wait = reply.headers.get("Retry-After", "a while")
        raise DevicePairingFailed(
            f"the server refused: too many pairing requests from here; try again in {wait} s"
        )
    if reply.status_code != 200:
        raise DevicePairingFailed(
            f"the server refused the request (HTTP {reply.status_code}): {reply.text[:300]}"
        )
    try:
        return DeviceAuthorization.model_validate(reply.json())
    except (ValueError, ValidationError) as exc:
        raise DevicePairingFailed(f"the server's answer is not a pairing code: {exc}") from exc


def _poll(
    http: httpx2.Client, grant: DeviceAuthorization, sleep: Callable[[float], Any]
) -> DeviceToken:
    deadline = time.monotonic() + grant.expires_in
    interval = float(grant.interval)
    body = {"device_code": grant.device_code, "grant_type": GRANT_TYPE}
    while True:
        sleep(interval)
        if time.monotonic() > deadline:
            raise DevicePairingFailed(REFUSALS["expired_token"])
        try:
            reply = http.post("/api/device-pairings/token", json=body)
        except httpx2.HTTPError:
            continue  # the network or the server is away for a moment: the code still holds
        if reply.status_code == 200:
            return DeviceToken.model_validate(reply.json())
        if reply.status_code == 429 or reply.status_code >= 500:
            interval = max(interval, _seconds(reply.headers.get("Retry-After"), interval))
            continue
        error = _error(reply)
        if error == "slow_down":
            interval += SLOW_DOWN_STEP_S
        elif error != "authorization_pending":
            raise DevicePairingFailed(REFUSALS.get(error, f"the server refused: {error}"))


def _error(reply: httpx2.Response) -> str:
    try:
        return DeviceTokenError.model_validate(reply.json()).error
    except (ValueError, ValidationError):
        return f"HTTP {reply.status_code} {reply.text[:200]}"


def _seconds(value: str | None, default: float) -> float:
    try:
        return float(value) if value else default
    except ValueError:
        return default
