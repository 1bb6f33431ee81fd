"""Settings, read from the environment (django-environ). One file for every environment."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import environ
from django.core.exceptions import ImproperlyConfigured

from everdict.secret import embedded_secret_key

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()

# Where the embedded default keeps its files (SQLite database, generated secret key, logs).
VAR_DIR = Path(env.str("EVERDICT_VAR_DIR", default=str(BASE_DIR / "var"))).resolve()


def _int(name: str, default: int, *, minimum: int = 0, maximum: int | None = None) -> int:
    try:
        value = env.int(name, default=default)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be an integer") from exc
    if value < minimum:
        raise ImproperlyConfigured(f"{name} must be >= {minimum}")
    if maximum is not None and value > maximum:
        raise ImproperlyConfigured(f"{name} must be <= {maximum}")
    return value


def _bool(name: str, default: bool) -> bool:
    raw = env.str(name, default=str(default)).strip().lower()
    if raw in {"1", "true", "yes", "on"}:
        return True
    if raw in {"0", "false", "no", "off", ""}:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (1/0, true/false)")


DEBUG = _bool("DEBUG", False)
# Production sets SECRET_KEY (every replica the same); the embedded default keeps its own.
SECRET_KEY = env.str("SECRET_KEY", default="") or embedded_secret_key(VAR_DIR)
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    # Swagger UI and Redoc assets served locally: the docs page works offline.
    "drf_spectacular_sidecar",
    "channels",
    # Sign-in through the organisation's OpenID provider (allauth's OpenID Connect provider,
    # with the ID token checks of accounts/oidc); only the routes that flow needs are served.
    "allauth",
    "allauth.account",
    "allauth.socialaccount",
    "allauth.socialaccount.providers.openid_connect",
    "accounts",
    "runners",
    "scorecards",
    # The features of a case's world, each an app of its own beside the runs they serve.
    "scorecards.blobs",
    "scorecards.traces",
    "scorecards.files",
    "scorecards.judging",
    "scorecards.verdicts",
    "scorecards.review",
    "scorecards.search",
    "scorecards.cases",
    "mcpgateway",
]

# Django's own, with their hooks run on the event loop under ASGI (`core.middleware`).
MIDDLEWARE = [
    "core.middleware.SecurityMiddleware",
    "core.middleware.SessionMiddleware",
    "core.middleware.CommonMiddleware",
    "core.middleware.CsrfViewMiddleware",
    "core.middleware.AuthenticationMiddleware",
    "core.middleware.MessageMiddleware",
    "core.middleware.XFrameOptionsMiddleware",
    "allauth.account.middleware.AccountMiddleware",
]

ROOT_URLCONF = "everdict.urls"
ASGI_APPLICATION = "everdict.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# The embedded default is a SQLite file set up for concurrent use: WAL, writers
# take the lock at BEGIN (no upgrade deadlocks), and a busy timeout so a burst
# waits instead of failing with "database is locked".
# How long a SQLite writer waits for the write lock before "database is locked" (which the
# MCP tools answer as a retryable error).
EVERDICT_SQLITE_BUSY_TIMEOUT_S = _int("EVERDICT_SQLITE_BUSY_TIMEOUT_S", 30, minimum=1)
_SQLITE_OPTIONS = {
    "transaction_mode": "IMMEDIATE",
    "timeout": EVERDICT_SQLITE_BUSY_TIMEOUT_S,
    "init_command": (
        "PRAGMA journal_mode=WAL;PRAGMA synchronous=NORMAL;"
        f"PRAGMA busy_timeout={EVERDICT_SQLITE_BUSY_TIMEOUT_S * 1000};PRAGMA foreign_keys=ON;"
    ),
}
try:
    DATABASES = {
        "default": env.db_url("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'everdict.sqlite3'}")
    }
except (ValueError, ImproperlyConfigured) as exc:
    raise ImproperlyConfigured(f"DATABASE_URL is not a valid database URL: {exc}") from exc
# Lets several test sessions share a machine without sharing a test database.
_TEST_DB_SUFFIX = env.str("EVERDICT_TEST_DB_SUFFIX", default="")
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"].setdefault("OPTIONS", {}).update(_SQLITE_OPTIONS)
    # A file, not :memory:, so end-to-end tests' server processes see the same data.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"test{_TEST_DB_SUFFIX}.sqlite3")}
    VAR_DIR.mkdir(exist_ok=True)
elif DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # A pool per process: under ASGI each request's sync code closes its connection at the
    # end, so without one every page, API call and tool call pays a connection set-up.
    # Size it so replicas times EVERDICT_DB_POOL_MAX (+ schedulers) stays under the server's
    # max_connections; 0 turns pooling off (then DB_CONN_MAX_AGE applies).
    _POOL_MAX = _int("EVERDICT_DB_POOL_MAX", 10)
    if _POOL_MAX:
        DATABASES["default"]["CONN_MAX_AGE"] = 0  # Django requires it with a pool
        DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
            "min_size": min(2, _POOL_MAX),
            "max_size": _POOL_MAX,
            # How long a request waits for a connection before it is refused as the
            # server's passing trouble (a runner's call is then retried).
            "timeout": env.float("EVERDICT_DB_POOL_TIMEOUT_S", default=10.0),
            # The pool retries a failed connection with a doubling delay; ending each round
            # of retries after 5 s lets the next request start afresh, so the pool is back
            # within seconds of the database, not after a delay grown during the outage.
            "reconnect_timeout": 5,
        }
    else:
        DATABASES["default"]["CONN_MAX_AGE"] = _int("DB_CONN_MAX_AGE", 60)
    # Django's backend, but a connection leaving the pool is checked by its socket: a round
    # trip only when something arrived on it while idle (`core.pooling`), where Django's
    # pool sends an empty query for every request that touches the database.
    DATABASES["default"]["ENGINE"] = "core.postgresql"
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
    # Only the hot paths' statements (`core.prebuilt.cursor`) are ever prepared: from their
    # second run on a connection. Django's own cursors bind on the client and prepare nothing.
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault("prepare_threshold", 1)
    DATABASES["default"]["TEST"] = {"NAME": f"test_{DATABASES['default']['NAME']}{_TEST_DB_SUFFIX}"}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

EVERDICT_DB_PREPARE = env.bool("EVERDICT_DB_PREPARE", default=True)

REDIS_URL = env.str("REDIS_URL", default="")
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL]},
        }
    }
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

AUTH_PASSWORD_VALIDATORS: list[dict[str, str]] = []
# Overridable so test suites can use a fast hasher for their fixture users.
PASSWORD_HASHERS = env.list(
    "PASSWORD_HASHERS",
    default=[
        "django.contrib.auth.hashers.PBKDF2PasswordHasher",
        "django.contrib.auth.hashers.PBKDF2SHA1PasswordHasher",
        "django.contrib.auth.hashers.ScryptPasswordHasher",
    ],
)
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "accounts.authentication.BearerKeyAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "core.schema.ErrorDeclaringAutoSchema",
    "DEFAULT_PARSER_CLASSES": ["core.parsers.BoundedJSONParser"],
    "EXCEPTION_HANDLER": "core.api_errors.exception_handler",
    "UNAUTHENTICATED_USER": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Everdict API",
    "DESCRIPTION": "Workspaces, harnesses, datasets, scorecard runs and self-hosted runners.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    "loggers": {"django.channels.server": {"level": "WARNING"}},
}

# Queue and presence knobs (seconds). Tests shorten them through the environment.
EVERDICT_LEASE_TTL_S = _int("EVERDICT_LEASE_TTL_S", 60, minimum=1)
# Presence writes are throttled: an idle long-polling runner touches its row at most this often.
EVERDICT_PRESENCE_WRITE_S = _int("EVERDICT_PRESENCE_WRITE_S", 15)
# A queued job fails `no_runner` once no runner that could take it has been active for this
# long. Activity is read from `last_seen_at`, written at most every EVERDICT_PRESENCE_WRITE_S:
# a timeout not above that interval would take a runner that polls for an absent one.
EVERDICT_QUEUE_IDLE_TIMEOUT_S = _int("EVERDICT_QUEUE_IDLE_TIMEOUT_S", 300, minimum=1)
if EVERDICT_QUEUE_IDLE_TIMEOUT_S <= EVERDICT_PRESENCE_WRITE_S:
    raise ImproperlyConfigured(
        f"EVERDICT_QUEUE_IDLE_TIMEOUT_S ({EVERDICT_QUEUE_IDLE_TIMEOUT_S}) must be above "
        f"EVERDICT_PRESENCE_WRITE_S ({EVERDICT_PRESENCE_WRITE_S}): presence is written that "
        "coarsely, so a shorter timeout would fail jobs of a runner that is polling"
    )
EVERDICT_MAX_ATTEMPTS = _int("EVERDICT_MAX_ATTEMPTS", 3, minimum=1)
EVERDICT_PRESENCE_WINDOW_S = _int("EVERDICT_PRESENCE_WINDOW_S", 90, minimum=1)
EVERDICT_MIN_RUNNER_PROTOCOL = _int("EVERDICT_MIN_RUNNER_PROTOCOL", 2)
# The longest a runner's long-poll waits (reported in `hello`; keep a load balancer's idle
# timeout above it).
# At most the protocol's MAX_WAIT_MS (55,000), which every runner's read timeout allows for.
EVERDICT_MAX_WAIT_MS = _int("EVERDICT_MAX_WAIT_MS", 55_000, minimum=0, maximum=55_000)
# How long a job whose last attempt's lease expired stays resumable by its holder alone.
EVERDICT_RESUME_WINDOW_S = _int("EVERDICT_RESUME_WINDOW_S", 1800)
# Per-job log bounds: past them, one "… N lines dropped" marker.
EVERDICT_MAX_LOG_LINES_PER_JOB = _int("EVERDICT_MAX_LOG_LINES_PER_JOB", 10_000, minimum=1)
EVERDICT_MAX_LOG_BYTES_PER_JOB = _int("EVERDICT_MAX_LOG_BYTES_PER_JOB", 2 * 1024 * 1024, minimum=1)
# A refused late result kept on its attempt, at most this big.
EVERDICT_SHADOW_MAX_BYTES = _int("EVERDICT_SHADOW_MAX_BYTES", 1024 * 1024)
# How often each process re-checks the queue for the owners of its parked long-polls even
# without a wake-up: a lost notification costs at most this much latency, never a job.
EVERDICT_WAKE_RECHECK_S = env.float("EVERDICT_WAKE_RECHECK_S", default=5.0)
# How long a page waits for the runner to answer a request for a running case's files.
EVERDICT_FS_ANSWER_TIMEOUT_S = env.float("EVERDICT_FS_ANSWER_TIMEOUT_S", default=30.0)
EVERDICT_STATUS_TTL_S = _int("EVERDICT_STATUS_TTL_S", 120, minimum=1)
# The case's world (protocol 3). Artifacts: per file the protocol's by default (a server may
# take larger ones: `hello` tells each runner its limit, and raw uploads stream them), per case
# at most the protocol's.
EVERDICT_MAX_ARTIFACT_BYTES = _int(
    "EVERDICT_MAX_ARTIFACT_BYTES", 10 * 1024 * 1024, minimum=1, maximum=1024 * 1024 * 1024
)
EVERDICT_MAX_CASE_ARTIFACT_BYTES = _int(
    "EVERDICT_MAX_CASE_ARTIFACT_BYTES", 50 * 1024 * 1024, minimum=1, maximum=50 * 1024 * 1024
)
# How long an upload URL minted by `begin_upload` is good for (each chunk is checked).
EVERDICT_UPLOAD_URL_TTL_S = _int("EVERDICT_UPLOAD_URL_TTL_S", 900, minimum=1, maximum=86400)
# A raw upload's chunk (`PUT /uploads/…`): a blob up to this size goes in one request, with
# nothing staged; the server holds about two chunks above idle while it receives a blob.
EVERDICT_UPLOAD_CHUNK_BYTES = _int(
    "EVERDICT_UPLOAD_CHUNK_BYTES", 8 * 1024 * 1024, minimum=64 * 1024, maximum=16 * 1024 * 1024
)
# A request body past this size is spooled to a temporary file as it arrives rather than
# held in memory (Django's default is 2.5 MiB): a raw upload's chunk then holds little
# more than the chunk itself in the server's memory.
FILE_UPLOAD_MAX_MEMORY_SIZE = 512 * 1024
# Blobs (artifacts, screen frames, files a page asks for): where their bytes are kept, through
# Django's storage API. EVERDICT_BLOB_STORAGE is a storage class (default: a directory under
# var/), EVERDICT_BLOB_STORAGE_OPTIONS a JSON object of its options (for django-storages' S3:
# bucket_name, region_name, …). Several replicas need one shared backend: uploads in progress
# are staged in it too, so any replica resumes what another one started.
EVERDICT_BLOB_STORAGE = env.str(
    "EVERDICT_BLOB_STORAGE", default="django.core.files.storage.FileSystemStorage"
)
try:
    EVERDICT_BLOB_STORAGE_OPTIONS = json.loads(
        env.str("EVERDICT_BLOB_STORAGE_OPTIONS", default="") or "null"
    ) or {"location": str(VAR_DIR / "blobs"), "allow_overwrite": True}
except ValueError as exc:
    raise ImproperlyConfigured("EVERDICT_BLOB_STORAGE_OPTIONS must be a JSON object") from exc
if not isinstance(EVERDICT_BLOB_STORAGE_OPTIONS, dict):
    raise ImproperlyConfigured("EVERDICT_BLOB_STORAGE_OPTIONS must be a JSON object")
if EVERDICT_BLOB_STORAGE.startswith("storages.backends.s3"):
    # A commit streams the staged chunks to the store: 5 MiB parts sent one at a time hold
    # about 2.5 parts in memory (boto3's default holds up to ten 8 MiB parts). Python objects,
    # so not among the JSON options; `storages.backends.s3` reads it when it is built.
    from boto3.s3.transfer import TransferConfig

    AWS_S3_TRANSFER_CONFIG = TransferConfig(
        multipart_threshold=5 * 1024 * 1024, multipart_chunksize=5 * 1024 * 1024, use_threads=False
    )
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    "blobs": {"BACKEND": EVERDICT_BLOB_STORAGE, "OPTIONS": EVERDICT_BLOB_STORAGE_OPTIONS},
}
# Off by default: with N days, `manage.py blobs_gc` also removes the artifacts, frames and
# traces of runs older than that (their results stay).
EVERDICT_RETENTION_DAYS = _int("EVERDICT_RETENTION_DAYS", 0)
# A trace kept per case: past either bound, one "… N events dropped" event.
EVERDICT_MAX_TRACE_EVENTS = _int("EVERDICT_MAX_TRACE_EVENTS", 20_000, minimum=1, maximum=20_000)
EVERDICT_MAX_TRACE_BYTES = _int(
    "EVERDICT_MAX_TRACE_BYTES", 16 * 1024 * 1024, minimum=1, maximum=16 * 1024 * 1024
)
# The newest runner release `hello` tells runners of (`doctor` and the status line say how to
# update to it); empty: this server's own package version.
EVERDICT_RUNNER_LATEST = env.str("EVERDICT_RUNNER_LATEST", default="")
# How long /mcp keeps a verified runner token (PostgreSQL only). A revocation, or an owner
# deactivated through the ORM or admin, is heard at once on every replica; this bounds only
# changes made behind the application's back (plain SQL). Above the 30 s long-poll, so an
# idle runner's polls are answered without a lookup. 0: never kept.
EVERDICT_AUTH_CACHE_S = env.float("EVERDICT_AUTH_CACHE_S", default=60.0)
# Public base URL shown in the pairing command on the account page (default: the request's).
EVERDICT_PUBLIC_URL = env.str("EVERDICT_PUBLIC_URL", default="")
# /metrics: "loopback" (only 127.0.0.1/::1, and never a request relayed by a proxy), "open",
# or a bearer token required to read it.
EVERDICT_METRICS = env.str("EVERDICT_METRICS", default="loopback")

# Sign-in. Password sign-in is the embedded default; EVERDICT_PASSWORD_LOGIN=0 closes it
# everywhere (the login page, the admin, anything that authenticates a password), which needs
# an OpenID provider to sign in with instead.
EVERDICT_PASSWORD_LOGIN = _bool("EVERDICT_PASSWORD_LOGIN", True)
AUTHENTICATION_BACKENDS = [
    "django.contrib.auth.backends.ModelBackend"
    if EVERDICT_PASSWORD_LOGIN
    else "accounts.backends.PasswordClosedBackend"
]
OIDC_PROVIDER_ID = "sso"  # in the redirect URI: /accounts/oidc/sso/login/callback/
_OIDC_REQUIRED = ("OIDC_ISSUER", "OIDC_CLIENT_ID", "OIDC_CLIENT_SECRET", "OIDC_PROVIDER_NAME")
_oidc = {name: env.str(name, default="").strip() for name in _OIDC_REQUIRED}
OIDC_ENABLED = any(_oidc.values())
OIDC_PROVIDER_NAME = _oidc["OIDC_PROVIDER_NAME"]
if OIDC_ENABLED and (missing := [name for name, value in _oidc.items() if not value]):
    raise ImproperlyConfigured(
        f"{', '.join(missing)} must be set too: OpenID Connect sign-in needs "
        f"{', '.join(_OIDC_REQUIRED)}"
    )
if not EVERDICT_PASSWORD_LOGIN and not OIDC_ENABLED:
    raise ImproperlyConfigured(
        "EVERDICT_PASSWORD_LOGIN=0 needs OIDC_ISSUER (and its client) set: nobody could sign in"
    )
OIDC_SCOPES = env.str("OIDC_SCOPES", default="openid email profile").split()
OIDC_USERNAME_CLAIM = env.str("OIDC_USERNAME_CLAIM", default="preferred_username").strip()
OIDC_ALLOWED_DOMAINS = [d.strip().lower() for d in env.list("OIDC_ALLOWED_DOMAINS", default=[])]
if OIDC_ENABLED:
    _issuer = urlsplit(_oidc["OIDC_ISSUER"])
    if _issuer.scheme != "https" and not (
        _issuer.scheme == "http" and _issuer.hostname in ("127.0.0.1", "localhost", "::1")
    ):
        raise ImproperlyConfigured("OIDC_ISSUER must be an https:// URL (http only on loopback)")
    if "openid" not in OIDC_SCOPES:
        raise ImproperlyConfigured("OIDC_SCOPES must include openid")
    if not re.fullmatch(r"[A-Za-z0-9_.:-]{1,100}", OIDC_USERNAME_CLAIM):
        raise ImproperlyConfigured("OIDC_USERNAME_CLAIM must be a claim name, e.g. email")
    if bad := [d for d in OIDC_ALLOWED_DOMAINS if not re.fullmatch(r"[a-z0-9.-]+\.[a-z]+", d)]:
        raise ImproperlyConfigured(f"OIDC_ALLOWED_DOMAINS: not a domain name: {bad[0]!r}")


def oidc_providers(
    *, issuer: str, client_id: str, secret: str, name: str, scopes: list[str], username_claim: str
) -> dict[str, Any]:
    """allauth's provider settings for one OpenID provider."""
    app = {
        "provider_id": OIDC_PROVIDER_ID,
        "name": name,
        "client_id": client_id,
        "secret": secret,
        "settings": {
            "server_url": issuer,
            "scope": scopes,
            "oauth_pkce_enabled": True,
            "username_claim": username_claim,
        },
    }
    # allauth's documented way to customise a provider: the ID token checks it leaves out
    # (signature, nonce) and the username claim (accounts/oidc/provider.py).
    provider_class = "accounts.oidc.provider.EverdictOIDCProvider"
    return {"openid_connect": {"provider_class": provider_class, "APPS": [app] if issuer else []}}


SOCIALACCOUNT_PROVIDERS = oidc_providers(
    issuer=_oidc["OIDC_ISSUER"],
    client_id=_oidc["OIDC_CLIENT_ID"],
    secret=_oidc["OIDC_CLIENT_SECRET"],
    name=OIDC_PROVIDER_NAME,
    scopes=OIDC_SCOPES,
    username_claim=OIDC_USERNAME_CLAIM,
)
SOCIALACCOUNT_ADAPTER = "accounts.oidc.adapters.SocialAccountAdapter"
ACCOUNT_ADAPTER = "accounts.oidc.adapters.AccountAdapter"
SOCIALACCOUNT_AUTO_SIGNUP = True
SOCIALACCOUNT_EMAIL_VERIFICATION = "none"
SOCIALACCOUNT_STORE_TOKENS = False
ACCOUNT_EMAIL_VERIFICATION = "none"
# An address the provider does not vouch for may equal a local account's: that person gets an
# account of their own, never that one (accounts/oidc/adapters.py links only verified ones).
ACCOUNT_UNIQUE_EMAIL = False
SOCIALACCOUNT_REQUESTS_TIMEOUT = 10


def _rate(name: str, default: str) -> str:
    value = env.str(name, default=default).strip()
    if not re.fullmatch(r"[1-9][0-9]*/(s|sec|m|min|h|hour|d|day)", value):
        raise ImproperlyConfigured(f"{name} must be a rate such as 20/hour or 10/min")
    return value


# Device pairing (RFC 8628's shape): how long a code lives, how often the CLI may poll, and the
# throttles on asking for codes (per address), on polling (per address) and on typing codes
# (per member, whether on the page, the API or MCP).
EVERDICT_DEVICE_PAIRING_TTL_S = _int("EVERDICT_DEVICE_PAIRING_TTL_S", 600, minimum=1)
EVERDICT_DEVICE_PAIRING_INTERVAL_S = _int("EVERDICT_DEVICE_PAIRING_INTERVAL_S", 5, minimum=1)
EVERDICT_THROTTLE_RATES = {
    "device_pairing": _rate("EVERDICT_DEVICE_PAIRING_RATE", "20/hour"),
    "device_token": _rate("EVERDICT_DEVICE_TOKEN_RATE", "60/min"),
    "device_code": _rate("EVERDICT_DEVICE_CODE_RATE", "20/min"),
}
