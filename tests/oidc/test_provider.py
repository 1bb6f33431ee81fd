"""The test OpenID provider on its own, without the Django app: what sign-in tests rely on.

A real authorization-code + PKCE flow: Debian's chromium signs in on the provider's own login
page and is sent to a redirect URI served here; the code is exchanged at the token endpoint and
the ID token checked against the published keys.
"""

from __future__ import annotations

import base64
import hashlib
import json
import queue
import secrets
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jwt
import pytest

from tests.browser.test_run_page import CHROMIUM_ARGS, Console
from tests.oidc import ALICE, Provider, oidc_provider
from tests.required import CHROMIUM

pytestmark = [pytest.mark.e2e, pytest.mark.once]


class RelyingParty:
    """A redirect URI and a post-logout one on a loopback port; keeps each query it receives."""

    def __init__(self) -> None:
        self.received: queue.Queue[tuple[str, dict[str, str]]] = queue.Queue()
        received = self.received

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                url = urllib.parse.urlsplit(self.path)
                if url.path == "/favicon.ico":
                    self.send_response(204)
                    self.end_headers()
                    return
                received.put((url.path, dict(urllib.parse.parse_qsl(url.query))))
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.end_headers()
                self.wfile.write(b"<!DOCTYPE html><title>RP</title><p>received</p>")

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.callback = f"{self.url}/callback"
        self.logged_out = f"{self.url}/logged-out"

    def next(self, path: str) -> dict[str, str]:
        got_path, query = self.received.get(timeout=10)
        assert got_path == path, (got_path, query)
        return query


@pytest.fixture
def rp() -> Iterator[RelyingParty]:
    relying_party = RelyingParty()
    thread = threading.Thread(target=relying_party.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield relying_party
    finally:
        relying_party.server.shutdown()
        relying_party.server.server_close()


@pytest.fixture
def idp(tmp_path: Path, rp: RelyingParty) -> Iterator[Provider]:
    with oidc_provider(
        tmp_path, redirect_uris=[rp.callback], post_logout_redirect_uris=[rp.logged_out]
    ) as provider:
        yield provider


@pytest.fixture
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


def pkce_pair() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(64)
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def authorize_url(idp: Provider, rp: RelyingParty, **params: str) -> str:
    query = {
        "client_id": idp.client_id,
        "response_type": "code",
        "scope": "openid email profile",
        "redirect_uri": rp.callback,
        **params,
    }
    return f"{idp.discovery()['authorization_endpoint']}?{urllib.parse.urlencode(query)}"


def post_form(url: str, form: dict[str, str]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url, data=urllib.parse.urlencode(form).encode())
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return reply.status, json.load(reply)
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)


def verify_id_token(idp: Provider, token: str) -> dict[str, Any]:
    """Check the signature against the published JWKS, the audience, the issuer and expiry."""
    keys = jwt.PyJWKClient(idp.discovery()["jwks_uri"])
    return jwt.decode(
        token,
        keys.get_signing_key_from_jwt(token).key,
        algorithms=["RS256"],
        audience=idp.client_id,
        issuer=idp.issuer,
        options={"require": ["iss", "aud", "sub", "exp", "iat"]},
    )


def userinfo(idp: Provider, access_token: str) -> dict[str, Any]:
    request = urllib.request.Request(
        idp.discovery()["userinfo_endpoint"], headers={"Authorization": f"Bearer {access_token}"}
    )
    with urllib.request.urlopen(request, timeout=10) as reply:
        return dict(json.load(reply))


def sign_in(page: Any, login: str, password: str) -> None:
    page.fill("#login", login)
    page.fill("#password", password)
    page.click("#sign-in")


def test_discovery_lists_the_endpoints_pkce_s256_and_the_clients_auth_method(
    idp: Provider,
) -> None:
    discovery = idp.discovery()

    assert discovery["issuer"] == idp.issuer
    for endpoint in ("authorization", "token", "userinfo", "end_session"):
        assert discovery[f"{endpoint}_endpoint"].startswith(f"{idp.issuer}/")
    assert discovery["jwks_uri"].startswith(f"{idp.issuer}/")
    assert discovery["code_challenge_methods_supported"] == ["S256"]
    assert discovery["token_endpoint_auth_methods_supported"] == ["client_secret_post"]
    assert discovery["id_token_signing_alg_values_supported"] == ["RS256"]
    assert {"openid", "email", "profile"} <= set(discovery["scopes_supported"])
    with urllib.request.urlopen(discovery["jwks_uri"], timeout=10) as reply:
        assert json.load(reply)["keys"] == [idp.public_jwk]


def test_an_authorization_request_without_pkce_is_refused(idp: Provider, rp: RelyingParty) -> None:
    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any) -> None:
            return None

    opener = urllib.request.build_opener(NoRedirect)
    with pytest.raises(urllib.error.HTTPError) as refused:
        opener.open(authorize_url(idp, rp, state="s1"), timeout=10)

    location = urllib.parse.urlsplit(refused.value.headers["Location"])
    query = dict(urllib.parse.parse_qsl(location.query))
    assert f"{location.scheme}://{location.netloc}{location.path}" == rp.callback
    assert query["error"] == "invalid_request"
    assert "PKCE" in query["error_description"]
    assert query["state"] == "s1"


@pytest.mark.browser
def test_a_user_signs_in_on_the_providers_page_and_the_code_yields_a_verified_id_token(
    idp: Provider, rp: RelyingParty, browser: Any
) -> None:
    console = Console()
    verifier, challenge = pkce_pair()
    state, nonce = secrets.token_urlsafe(16), secrets.token_urlsafe(16)
    pkce = {"code_challenge": challenge, "code_challenge_method": "S256"}
    page = console.watch(browser.new_page())
    page.goto(authorize_url(idp, rp, state=state, nonce=nonce, **pkce))

    sign_in(page, "alice", "not-her-password")
    assert page.inner_text("#login-error") == "Wrong username or password."
    sign_in(page, ALICE.email, ALICE.password)
    page.wait_for_url(f"{rp.callback}?*")
    redirect = rp.next("/callback")
    assert (redirect["state"], redirect["iss"]) == (state, idp.issuer)

    exchange = {
        "grant_type": "authorization_code",
        "code": redirect["code"],
        "redirect_uri": rp.callback,
        "client_id": idp.client_id,
        "client_secret": idp.client_secret,
        "code_verifier": verifier,
    }
    token_endpoint = idp.discovery()["token_endpoint"]
    status, tokens = post_form(token_endpoint, exchange)
    assert status == 200, tokens
    claims = verify_id_token(idp, tokens["id_token"])
    assert claims["nonce"] == nonce
    assert jwt.get_unverified_header(tokens["id_token"])["kid"] == idp.kid
    assert {k: claims[k] for k in ALICE_CLAIMS} == ALICE_CLAIMS
    assert userinfo(idp, tokens["access_token"]) == ALICE_CLAIMS
    # A code is good once.
    assert post_form(token_endpoint, exchange)[1]["error"] == "invalid_grant"

    # Signed in at the provider (its session cookie kept): a second request needs no password.
    page.goto(authorize_url(idp, rp, state="again", **pkce))
    page.wait_for_url(f"{rp.callback}?*")
    assert rp.next("/callback")["state"] == "again"

    log_out(page, idp, rp, tokens["id_token"])
    page.goto(authorize_url(idp, rp, state="after", **pkce))
    page.wait_for_selector("#login")
    assert console.errors == []


ALICE_CLAIMS = {
    "sub": "u-alice",
    "email": "alice@example.com",
    "email_verified": True,
    "name": "Alice Example",
    "preferred_username": "alice",
}


def log_out(page: Any, idp: Provider, rp: RelyingParty, id_token: str) -> None:
    """RP-initiated logout: confirm on the provider's page, land on the post-logout URI."""
    query = {"id_token_hint": id_token, "post_logout_redirect_uri": rp.logged_out, "state": "bye"}
    page.goto(f"{idp.discovery()['end_session_endpoint']}?{urllib.parse.urlencode(query)}")
    page.click("#logout-yes")
    page.wait_for_url(f"{rp.logged_out}?*")
    assert rp.next("/logged-out") == {"state": "bye"}


def test_a_minted_id_token_verifies_against_the_published_keys(idp: Provider) -> None:
    claims = verify_id_token(idp, idp.mint_id_token(email="alice@example.com"))
    assert claims["sub"] == ALICE.sub
    assert claims["email"] == "alice@example.com"

    with pytest.raises(jwt.InvalidAudienceError):
        verify_id_token(idp, idp.mint_id_token(aud="someone-else"))
    with pytest.raises(jwt.ExpiredSignatureError):
        verify_id_token(idp, idp.mint_id_token(exp=1))
    with pytest.raises(jwt.MissingRequiredClaimError):
        verify_id_token(idp, idp.mint_id_token(exp=None))
