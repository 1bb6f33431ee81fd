"""Bearer secrets: `evk_` API keys and `rnr_` runner tokens, shown once, SHA-256 at rest."""

from __future__ import annotations

import hashlib
import hmac
import secrets

API_KEY_PREFIX = "evk_"
RUNNER_TOKEN_PREFIX = "rnr_"
DISPLAY_PREFIX_LEN = 12


def new_secret(prefix: str) -> str:
    """Return a new secret: the prefix and 32 random bytes, URL-safe."""
    return prefix + secrets.token_urlsafe(32)


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def display_prefix(secret: str) -> str:
    return secret[:DISPLAY_PREFIX_LEN]


def matches(secret: str, stored_digest: str) -> bool:
    """Compare in constant time, so a timing side channel cannot reveal a stored hash."""
    return hmac.compare_digest(digest(secret), stored_digest)
