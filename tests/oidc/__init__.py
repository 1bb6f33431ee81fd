"""A real OpenID provider for sign-in tests: npm's oidc-provider, started by the test.

    port = free_port()
    callback = f"http://127.0.0.1:{port}/accounts/oidc/acme/login/callback/"
    with oidc_provider(tmp_path, redirect_uris=[callback]) as idp:
        with daphne(tmp_path, port=port, **idp.env(name="Acme SSO")) as server:
            ...  # sign in on the provider's page as alice / ALICE.password

`make oidc-deps` installs the package under var/node. Without node or the package the test is
skipped, unless REQUIRE_OIDC is set (CI sets it): then it fails.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.live import ROOT, Proc, spawn, wait_http

NODE_DIR = ROOT / "var" / "node"
PACKAGE = NODE_DIR / "node_modules" / "oidc-provider" / "package.json"
SCRIPT = Path(__file__).resolve().parent / "provider.mjs"
READY_RE = re.compile(r"^oidc-provider ready at (http://127\.0\.0\.1:(\d+))$", re.MULTILINE)


@dataclass(frozen=True)
class Account:
    """An end user of the provider; signs in on its login page with `preferred_username`
    (or `email`) and `password`."""

    sub: str
    email: str
    name: str
    preferred_username: str
    password: str
    email_verified: bool = True


ALICE = Account("u-alice", "alice@example.com", "Alice Example", "alice", "alice-oidc-pw")
BOB = Account("u-bob", "bob@example.com", "Bob Example", "bob", "bob-oidc-pw")
# An address the provider does not vouch for: the app must not treat it as verified.
CHARLIE = Account(
    "u-charlie", "charlie@example.com", "Charlie Example", "charlie", "charlie-oidc-pw", False
)
ACCOUNTS = (ALICE, BOB, CHARLIE)


@dataclass
class Provider:
    """A running provider: its issuer, the one client's credentials and its signing key."""

    issuer: str
    port: int
    client_id: str
    client_secret: str
    private_key: rsa.RSAPrivateKey
    kid: str
    accounts: tuple[Account, ...]
    proc: Proc
    jwk: dict[str, Any] = field(repr=False)  # the private JWK the provider signs with

    @property
    def discovery_url(self) -> str:
        return f"{self.issuer}/.well-known/openid-configuration"

    @property
    def public_jwk(self) -> dict[str, Any]:
        return {k: v for k, v in self.jwk.items() if k in ("kty", "kid", "alg", "use", "n", "e")}

    def discovery(self) -> dict[str, Any]:
        with urllib.request.urlopen(self.discovery_url, timeout=10) as reply:
            return dict(json.load(reply))

    def env(self, *, name: str = "Test SSO") -> dict[str, str]:
        """The settings an Everdict server reads to use this provider."""
        return {
            "OIDC_ISSUER": self.issuer,
            "OIDC_CLIENT_ID": self.client_id,
            "OIDC_CLIENT_SECRET": self.client_secret,
            "OIDC_PROVIDER_NAME": name,
        }

    def mint_id_token(self, **claims: Any) -> str:
        """Sign an ID token with the provider's own key (RS256, its `kid`).

        Defaults: this issuer, audience the client, subject alice, issued now, expiring in
        ten minutes. A keyword overrides a claim; `None` drops it (`exp=None`).
        """
        now = int(time.time())
        payload: dict[str, Any] = {
            "iss": self.issuer,
            "aud": self.client_id,
            "sub": self.accounts[0].sub,
            "iat": now,
            "exp": now + 600,
            **claims,
        }
        payload = {k: v for k, v in payload.items() if v is not None}
        return jwt.encode(payload, self.private_key, algorithm="RS256", headers={"kid": self.kid})


def unavailable_reason() -> str | None:
    if shutil.which("node") is None:
        return "node is not on the PATH"
    if not PACKAGE.exists():
        return "oidc-provider is not installed under var/node: run `make oidc-deps` (needs npm)"
    return None


def require_node_provider() -> None:
    """Skip when the provider cannot run here; fail instead when REQUIRE_OIDC is set."""
    reason = unavailable_reason()
    if reason is None:
        return
    if os.environ.get("REQUIRE_OIDC"):
        pytest.fail(f"{reason} (REQUIRE_OIDC is set, so this is not skipped)")
    pytest.skip(reason)


def signing_key(kid: str) -> tuple[rsa.RSAPrivateKey, dict[str, Any]]:
    private_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = jwt.algorithms.RSAAlgorithm.to_jwk(private_key, as_dict=True)
    # PyJWT marks a private JWK key_ops ["sign"]; the provider would republish that on the
    # public key, where a strict verifier would refuse it.
    jwk.pop("key_ops", None)
    jwk.update(kid=kid, alg="RS256", use="sig")
    return private_key, jwk


@contextmanager
def oidc_provider(
    tmp_path: Path,
    *,
    redirect_uris: Sequence[str],
    post_logout_redirect_uris: Sequence[str] = (),
    accounts: Sequence[Account] = ACCOUNTS,
    client_id: str = "everdict",
    client_secret: str | None = None,
    token_endpoint_auth_method: str = "client_secret_post",
    require_pkce: bool = True,
) -> Iterator[Provider]:
    """Start the provider on a free loopback port; stop its process group on exit."""
    require_node_provider()
    kid = f"test-{secrets.token_hex(4)}"
    private_key, jwk = signing_key(kid)
    client_secret = client_secret or secrets.token_urlsafe(24)
    config = {
        # 0: the provider binds a free port itself and reports it, so no other process can
        # take the port between choosing and binding it.
        "port": 0,
        "client": {
            "client_id": client_id,
            "client_secret": client_secret,
            "redirect_uris": list(redirect_uris),
            "post_logout_redirect_uris": list(post_logout_redirect_uris),
            "token_endpoint_auth_method": token_endpoint_auth_method,
        },
        "require_pkce": require_pkce,
        "jwk": jwk,
        "accounts": [asdict(account) for account in accounts],
        "cookie_key": secrets.token_urlsafe(32),
    }
    stamp = time.monotonic_ns()
    config_path = tmp_path / f"oidc-provider-{stamp}.json"
    config_path.write_text(json.dumps(config, indent=2))
    env = {**os.environ, "OIDC_NODE_DIR": str(NODE_DIR)}
    proc = spawn(["node", str(SCRIPT), str(config_path)], tmp_path / f"oidc-{stamp}.log", env)
    try:
        issuer, port = wait_ready(proc)
        wait_http(f"{issuer}/.well-known/openid-configuration", proc=proc)
        yield Provider(
            issuer=issuer,
            port=port,
            client_id=client_id,
            client_secret=client_secret,
            private_key=private_key,
            kid=kid,
            accounts=tuple(accounts),
            proc=proc,
            jwk=jwk,
        )
    finally:
        proc.stop()


def wait_ready(proc: Proc, timeout: float = 30) -> tuple[str, int]:
    """The issuer from the provider's ready line; fail at once, with its log, if it exits."""
    deadline = time.monotonic() + timeout
    while True:
        found = READY_RE.search(proc.output())
        if found:
            return found.group(1), int(found.group(2))
        if proc.popen.poll() is not None:
            raise RuntimeError(f"oidc-provider exited ({proc.popen.returncode}):\n{proc.output()}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"oidc-provider not ready within {timeout}s:\n{proc.output()}")
        time.sleep(0.05)
