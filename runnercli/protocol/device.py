"""The wire contract of device pairing (the OAuth 2.0 device authorization grant's shape,
RFC 8628): what `pair` without a token sends and receives, defined once for both sides.

    POST /api/device-pairings        DeviceAuthorizationRequest → DeviceAuthorization
    POST /api/device-pairings/token  DeviceTokenRequest → DeviceToken | 400 DeviceTokenError
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

# RFC 8628 §6.1: no vowels (no words), nothing that reads as a digit or another letter.
USER_CODE_ALPHABET = "BCDFGHJKLMNPQRSTVWXZ"
USER_CODE_RE = re.compile(f"^[{USER_CODE_ALPHABET}]{{4}}-[{USER_CODE_ALPHABET}]{{4}}$")
DEVICE_CODE_PREFIX = "dvc_"
GRANT_TYPE: Literal["urn:ietf:params:oauth:grant-type:device_code"] = (
    "urn:ietf:params:oauth:grant-type:device_code"
)

DeviceTokenErrorCode = Literal[
    # Keep polling: nobody has decided yet.
    "authorization_pending",
    # Keep polling, 5 s more apart than before.
    "slow_down",
    # Stop: the code expired before the machine collected its token.
    "expired_token",
    # Stop: the member denied the request.
    "access_denied",
    # Stop: no such request, or its token was already collected.
    "invalid_grant",
    # Stop: the body is not a token request.
    "invalid_request",
]
FINAL_ERRORS = frozenset({"expired_token", "access_denied", "invalid_grant", "invalid_request"})


class DeviceAuthorization(BaseModel):
    """A pairing request just made: the code to show the member, the secret to poll with."""

    device_code: str = Field(description="The secret the machine polls with; never shown.")
    user_code: str = Field(description="What the member checks on the page, e.g. WDJB-MJHT.")
    verification_uri: str
    verification_uri_complete: str
    interval: int = Field(description="Seconds to wait between two polls.")
    expires_in: int = Field(description="Seconds the codes stay valid.")


class DeviceTokenRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    device_code: str = Field(max_length=200)
    grant_type: Literal["urn:ietf:params:oauth:grant-type:device_code"] = GRANT_TYPE


class DeviceToken(BaseModel):
    """The approved machine's runner: its token, given this once."""

    runner_id: int
    token: str = Field(description="The runner token, shown this once: only its hash is kept.")


class DeviceTokenError(BaseModel):
    error: DeviceTokenErrorCode
    error_description: str = ""
