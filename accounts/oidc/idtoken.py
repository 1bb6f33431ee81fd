"""The ID token checks of OpenID Connect Core 1.0 §3.1.3.7, with PyJWT."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import jwt

# Public-key algorithms only: never `none`, never an HMAC keyed with something public.
ASYMMETRIC = {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512"}
REQUIRED_CLAIMS = ["iss", "sub", "aud", "exp", "iat"]
# Clock skew tolerated between this server and the provider.
LEEWAY_S = 60


class IdTokenError(Exception):
    """The ID token is not one this server may accept; the message says why."""


@lru_cache(maxsize=8)
def _keys(jwks_uri: str) -> jwt.PyJWKClient:
    # One client per key set: it keeps the keys, and fetches them again for an unknown `kid`
    # (the provider rotated its key).
    return jwt.PyJWKClient(jwks_uri, cache_keys=True, lifespan=3600, timeout=10)


def verify_id_token(
    token: str, *, discovery: dict[str, Any], client_id: str, nonce: str | None
) -> dict[str, Any]:
    """Check the token's signature against the provider's keys (`jwks_uri`), its issuer, its
    audience (and `azp` when there are several), its expiry and issue time, and that its
    nonce is the one sent with this sign-in. Return its claims."""
    algorithms = sorted(
        set(discovery.get("id_token_signing_alg_values_supported") or ["RS256"]) & ASYMMETRIC
    )
    try:
        key = _keys(discovery["jwks_uri"]).get_signing_key_from_jwt(token)
        claims: dict[str, Any] = jwt.decode(
            token,
            key.key,
            algorithms=algorithms,
            audience=client_id,
            issuer=discovery["issuer"],
            leeway=LEEWAY_S,
            options={"require": REQUIRED_CLAIMS},
        )
    except (jwt.PyJWTError, KeyError) as exc:
        raise IdTokenError(f"the ID token was refused: {exc}") from exc
    audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
    if len(audiences) > 1 and claims.get("azp") != client_id:
        raise IdTokenError("the ID token was refused: it names other audiences, not as azp")
    if nonce is None or claims.get("nonce") != nonce:
        raise IdTokenError("the ID token was refused: its nonce is not this sign-in's")
    return claims
