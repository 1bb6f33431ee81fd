"""Sign-in through the organisation's OpenID provider, on django-allauth's OpenID Connect
provider: what allauth leaves out is added here — a nonce, the ID token's signature checked
against the provider's published keys, and logout at the provider."""
