"""Settings, read from the environment (django-environ). One file for every environment."""

from __future__ import annotations

from pathlib import Path

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
    "accounts",
    "runners",
    "scorecards",
    "mcpgateway",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
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
    DATABASES["default"]["CONN_MAX_AGE"] = _int("DB_CONN_MAX_AGE", 60)
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
    DATABASES["default"]["TEST"] = {"NAME": f"test_{DATABASES['default']['NAME']}{_TEST_DB_SUFFIX}"}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

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
    "DEFAULT_SCHEMA_CLASS": "accounts.schema.ErrorDeclaringAutoSchema",
    "DEFAULT_PARSER_CLASSES": ["accounts.parsers.BoundedJSONParser"],
    "EXCEPTION_HANDLER": "accounts.api_errors.exception_handler",
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
EVERDICT_STATUS_TTL_S = _int("EVERDICT_STATUS_TTL_S", 120, minimum=1)
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
