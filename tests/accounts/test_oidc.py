"""Sign-in through a real OpenID provider (npm's oidc-provider), in this process's Django:
who a sign-in signs in, and which ID tokens are refused.

The provider's login page is driven over plain HTTP (tests/accounts/oidc_client.py); the
browser tests (tests/browser/test_sign_in.py) drive it in chromium against daphne.
"""

from __future__ import annotations

from typing import Any

import jwt
import pytest
from allauth.socialaccount.models import SocialAccount
from django.contrib.auth import get_user_model
from django.test import Client

from accounts.oidc.idtoken import IdTokenError, verify_id_token
from tests.accounts.conftest import SignIn, use_provider
from tests.accounts.oidc_client import swapping_token_endpoint
from tests.oidc import ALICE, BOB, CHARLIE, Provider, signing_key

pytestmark = [pytest.mark.e2e]

User = get_user_model()


def signed_in(client: Client) -> Any:
    user_id = client.session.get("_auth_user_id")
    return None if user_id is None else User.objects.get(pk=user_id)


def test_the_login_page_offers_the_provider_beside_the_password_form(
    client: Client, idp: Provider
) -> None:
    page = client.get("/login/?next=/account/").content.decode()

    assert "Sign in with Acme SSO" in page
    assert 'action="/accounts/oidc/sso/login/"' in page
    assert 'name="next" value="/account/"' in page
    assert 'id="password-form"' in page


def test_without_a_provider_the_login_page_is_the_password_form_alone(client: Client) -> None:
    page = client.get("/login/").content.decode()

    assert "Sign in with" not in page
    assert 'id="password-form"' in page


def test_a_first_sign_in_creates_a_member_named_by_the_username_claim(
    sign_in: SignIn, idp: Provider
) -> None:
    reply = sign_in(BOB)

    assert reply.status_code == 302 and reply["Location"] == "/"
    user = signed_in(sign_in.client)
    assert (user.username, user.email) == ("bob", BOB.email)
    assert (user.first_name, user.last_name) == ("Bob", "Example")
    assert not user.has_usable_password()
    assert SocialAccount.objects.get(user=user).uid == BOB.sub
    # The authorization request: code flow, PKCE S256, a nonce, the configured scopes.
    query = sign_in.authorize_query
    assert query["response_type"] == ["code"]
    assert query["code_challenge_method"] == ["S256"]
    assert len(query["nonce"][0]) >= 32
    assert set(query["scope"][0].split()) == {"openid", "email", "profile"}


def test_a_second_sign_in_is_the_same_member_with_email_and_name_kept_current(
    sign_in: SignIn, idp: Provider, client: Client
) -> None:
    sign_in(BOB)
    first = signed_in(client)
    User.objects.filter(pk=first.pk).update(email="old@example.com", first_name="Robert")
    client.post("/logout/")
    assert signed_in(client) is None

    sign_in(BOB)

    again = signed_in(client)
    assert again.pk == first.pk
    assert (again.email, again.first_name) == (BOB.email, "Bob")
    assert User.objects.count() == 1


def test_a_verified_email_links_the_local_account_that_has_it(
    sign_in: SignIn, idp: Provider, alice: Any
) -> None:
    User.objects.filter(pk=alice.pk).update(email="ALICE@example.com")

    sign_in(ALICE)

    assert signed_in(sign_in.client).pk == alice.pk
    assert SocialAccount.objects.get(uid=ALICE.sub).user_id == alice.pk
    alice.refresh_from_db()
    assert alice.check_password("alice-pw")  # linking takes nothing away
    assert alice.email == ALICE.email


def test_an_unverified_email_never_links_and_gets_a_distinct_username(
    sign_in: SignIn, idp: Provider, charlie: Any
) -> None:
    User.objects.filter(pk=charlie.pk).update(email=CHARLIE.email)

    sign_in(CHARLIE)

    user = signed_in(sign_in.client)
    assert user.pk != charlie.pk
    assert user.username != "charlie" and user.username.startswith("charlie")
    assert SocialAccount.objects.get(uid=CHARLIE.sub).user_id == user.pk


def test_a_taken_username_without_a_matching_email_gets_a_distinct_one(
    sign_in: SignIn, idp: Provider, alice: Any
) -> None:
    sign_in(ALICE)  # the local alice has no email: nothing says it is the same person

    user = signed_in(sign_in.client)
    assert user.pk != alice.pk and user.username != "alice"


def test_the_username_claim_is_configurable(sign_in: SignIn, idp: Provider, settings: Any) -> None:
    use_provider(settings, idp, username_claim="email")

    sign_in(BOB)

    assert signed_in(sign_in.client).username == BOB.email


def test_allowed_domains_refuse_other_addresses_with_a_reason(
    sign_in: SignIn, idp: Provider, settings: Any
) -> None:
    settings.OIDC_ALLOWED_DOMAINS = ["acme.test"]

    reply = sign_in(BOB)

    assert reply.status_code == 302 and reply["Location"] == "/login/"
    page = sign_in.client.get("/login/").content.decode()
    assert "Sign-in refused: bob@example.com is not an address at acme.test" in page
    assert signed_in(sign_in.client) is None
    assert not User.objects.exists()


def test_allowed_domains_refuse_an_address_the_provider_does_not_vouch_for(
    sign_in: SignIn, idp: Provider, settings: Any
) -> None:
    settings.OIDC_ALLOWED_DOMAINS = ["example.com"]

    sign_in(CHARLIE)
    assert signed_in(sign_in.client) is None
    assert (
        "did not confirm a verified email address" in sign_in.client.get("/login/").content.decode()
    )
    SignIn(sign_in.client)(BOB)  # another person: the provider's cookies are charlie's
    assert signed_in(sign_in.client).username == "bob"


def _other_key_token(idp: Provider, claims: dict[str, Any]) -> str:
    other, _ = signing_key(idp.kid)  # the provider's kid, another key: a forgery
    return jwt.encode(claims, other, algorithm="RS256", headers={"kid": idp.kid})


SWAPS = {
    "wrong audience": (lambda idp, c: {**c, "aud": "someone-else"}, "Audience doesn't match"),
    "expired": (
        lambda idp, c: {**c, "iat": c["iat"] - 7200, "exp": c["iat"] - 3600},
        "Signature has expired",
    ),
    "no expiry": (lambda idp, c: _without(c, "exp"), 'missing the "exp" claim'),
    "another issuer": (lambda idp, c: {**c, "iss": "https://elsewhere.example"}, "Invalid issuer"),
    "another sign-in's nonce": (lambda idp, c: {**c, "nonce": "not-this-one"}, "its nonce"),
    "no nonce": (lambda idp, c: _without(c, "nonce"), "its nonce"),
    "someone else's subject": (lambda idp, c: {**c, "sub": ALICE.sub}, "another subject"),
    "a forged signature": (_other_key_token, "Signature verification failed"),
}


def _without(claims: dict[str, Any], name: str) -> dict[str, Any]:
    return {k: v for k, v in claims.items() if k != name}


@pytest.mark.parametrize("swap", list(SWAPS))
def test_an_id_token_that_fails_a_check_signs_nobody_in(
    sign_in: SignIn, idp: Provider, settings: Any, caplog: Any, swap: str
) -> None:
    change: Any
    change, reason = SWAPS[swap]
    with swapping_token_endpoint(idp, lambda claims: change(idp, claims)) as endpoint:
        use_provider(settings, idp, openid_configuration_overrides={"token_endpoint": endpoint})

        reply = sign_in(BOB)

    assert reply.status_code == 401
    assert "could not sign you in" in reply.content.decode()
    assert reason in caplog.text
    assert signed_in(sign_in.client) is None
    assert not User.objects.exists() and not SocialAccount.objects.exists()


def test_the_same_swap_with_nothing_changed_signs_in(
    sign_in: SignIn, idp: Provider, settings: Any
) -> None:
    # The refusals above are the checks', not the swapping endpoint's.
    with swapping_token_endpoint(idp, lambda claims: claims) as endpoint:
        use_provider(settings, idp, openid_configuration_overrides={"token_endpoint": endpoint})

        reply = sign_in(BOB)

    assert reply.status_code == 302
    assert signed_in(sign_in.client).username == "bob"


def test_logout_ends_the_session_here_and_at_the_provider(
    sign_in: SignIn, idp: Provider, client: Client
) -> None:
    sign_in(BOB)

    reply = client.post("/logout/")

    assert signed_in(client) is None
    end_session = idp.discovery()["end_session_endpoint"]
    assert reply["Location"].startswith(f"{end_session}?id_token_hint=")
    assert "post_logout_redirect_uri=http%3A%2F%2Ftestserver%2Flogin%2F" in reply["Location"]


def test_a_password_member_logs_out_here_only(client: Client, idp: Provider, alice: Any) -> None:
    client.force_login(alice)

    reply = client.post("/logout/")

    assert reply["Location"] == "/login/"
    assert signed_in(client) is None


def test_the_verification_function_refuses_what_the_provider_did_not_sign_for_us(
    idp: Provider,
) -> None:
    discovery = idp.discovery()

    def verify(token: str, nonce: str | None = "n") -> dict[str, Any]:
        return verify_id_token(token, discovery=discovery, client_id=idp.client_id, nonce=nonce)

    assert verify(idp.mint_id_token(nonce="n"))["sub"] == ALICE.sub
    refusals = {
        "wrong audience": idp.mint_id_token(nonce="n", aud="someone-else"),
        "expired": idp.mint_id_token(nonce="n", iat=1, exp=2),
        "no expiry": idp.mint_id_token(nonce="n", exp=None),
        "several audiences, not azp": idp.mint_id_token(nonce="n", aud=[idp.client_id, "x"]),
        "HMAC with the client secret": jwt.encode(
            {
                "iss": idp.issuer,
                "aud": idp.client_id,
                "sub": "s",
                "iat": 1,
                "exp": 2**31,
                "nonce": "n",
            },
            idp.client_secret,
            algorithm="HS256",
            headers={"kid": idp.kid},
        ),
        "unsigned": jwt.encode({"nonce": "n"}, None, algorithm="none"),  # type: ignore[arg-type]
    }
    for what, token in refusals.items():
        with pytest.raises(IdTokenError):
            verify(token)
            pytest.fail(f"accepted: {what}")
    with pytest.raises(IdTokenError):
        verify(idp.mint_id_token(nonce="n"), nonce=None)  # no nonce was sent: nothing matches
    several = idp.mint_id_token(nonce="n", aud=[idp.client_id, "x"], azp=idp.client_id)
    assert verify(several)["azp"] == idp.client_id
