"""Sign in on the test provider's own login page over plain HTTP, as a browser would, up to
the redirect back to the app; and a token endpoint in front of the provider's that swaps the
ID token it answers for one the test mints."""

from __future__ import annotations

import json
import re
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.cookiejar import CookieJar
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt

from tests.oidc import Account, Provider

FORM_ACTION_RE = re.compile(r'action="(/interaction/[\w-]+/login)"')


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any) -> None:
        return None


class ProviderSession:
    """The provider's cookies of one browser: signed in there once, not asked again."""

    def __init__(self, app_base: str) -> None:
        self.app_base = app_base
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(CookieJar()), _NoRedirect()
        )

    def _open(self, url: str, form: dict[str, str] | None = None) -> tuple[int, str, str]:
        data = urllib.parse.urlencode(form).encode() if form is not None else None
        try:
            with self.opener.open(url, data=data, timeout=10) as reply:
                return reply.status, "", reply.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.headers.get("Location", ""), exc.read().decode(errors="replace")

    def authorize(self, url: str, account: Account | None = None) -> str:
        """Follow the authorization request; sign in as `account` when the provider asks.
        Returns the URL the provider sends the browser back to (the app's callback)."""
        for _ in range(10):
            status, location, body = self._open(url)
            while status in (302, 303) and not location.startswith(self.app_base):
                url = urllib.parse.urljoin(url, location)
                status, location, body = self._open(url)
            if location.startswith(self.app_base):
                return location
            found = FORM_ACTION_RE.search(body)
            assert status == 200 and found and account is not None, (status, body[:500])
            action = urllib.parse.urljoin(url, found.group(1))
            form = {"login": account.preferred_username, "password": account.password}
            status, location, body = self._open(action, form)
            assert status in (302, 303), (status, body[:500])
            url = urllib.parse.urljoin(action, location)
            account = None  # signed in: never asked twice
        raise AssertionError("the provider never sent the browser back")


@contextmanager
def swapping_token_endpoint(
    idp: Provider, change: Callable[[dict[str, Any]], dict[str, Any] | str]
) -> Iterator[str]:
    """A token endpoint that forwards the code exchange to the provider's and answers its
    reply with the ID token replaced: `change(claims)` gives the claims to sign with the
    provider's key, or a whole token to send as it is."""
    real = idp.discovery()["token_endpoint"]

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            request = urllib.request.Request(
                real, data=body, headers={"Content-Type": self.headers["Content-Type"]}
            )
            with urllib.request.urlopen(request, timeout=10) as reply:
                tokens = json.load(reply)
            claims = jwt.decode(tokens["id_token"], options={"verify_signature": False})
            swapped = change(claims)
            tokens["id_token"] = swapped if isinstance(swapped, str) else mint(idp, swapped)
            payload = json.dumps(tokens).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/token"
    finally:
        server.shutdown()
        server.server_close()


def mint(idp: Provider, claims: dict[str, Any]) -> str:
    """Sign exactly these claims with the provider's key."""
    return jwt.encode(claims, idp.private_key, algorithm="RS256", headers={"kid": idp.kid})
