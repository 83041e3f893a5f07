"""Loopwarden settings. Every value comes from the environment (and a `.env` file under it);
see .env.example."""

from __future__ import annotations

import os
import re
from datetime import timedelta
from pathlib import Path

import dj_database_url
from kombu.transport import TRANSPORT_ALIASES

from loopwarden.env import (
    ConfigError,
    env_bool,
    env_choice,
    env_emails,
    env_int,
    env_list,
    env_networks,
    env_rate,
    env_str,
    env_url,
    folder_made,
    read_env_file,
)

read_env_file()

BASE_DIR = Path(__file__).resolve().parent.parent
# A relative folder is the repository's (`./var`, as .env.example says, is the default's place),
# not the working directory's: a program started elsewhere finds the same database.
DATA_DIR = (BASE_DIR / env_str("LOOPWARDEN_DATA_DIR", "var")).resolve()
folder_made("LOOPWARDEN_DATA_DIR", DATA_DIR)

DEBUG = env_bool("DEBUG", False)
REQUIRE_SECRET_KEY = env_bool("LOOPWARDEN_REQUIRE_SECRET_KEY", False)
SECRET_KEY = env_str("SECRET_KEY", "")
if not SECRET_KEY:
    if REQUIRE_SECRET_KEY:
        raise ConfigError(
            "SECRET_KEY must be set (LOOPWARDEN_REQUIRE_SECRET_KEY=true): a long random string"
        )
    # Development fallback: stable per data directory so sessions survive restarts. Readable
    # by its owner only from the first byte, like the demo agent's token.
    key_file = DATA_DIR / "secret_key"
    if not key_file.exists():
        import secrets

        try:
            fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another process of the same start wrote it first
            pass
        else:
            with os.fdopen(fd, "w") as key_out:
                key_out.write(secrets.token_urlsafe(50))
    SECRET_KEY = key_file.read_text().strip()

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])
SITE_URL = env_url("SITE_URL", "http://127.0.0.1:8000")

# The production switch: served over HTTPS behind a proxy that terminates TLS and sets
# X-Forwarded-Proto (and strips any the client sent). Production (LOOPWARDEN_REQUIRE_SECRET_KEY)
# implies it; `manage.py check --deploy` is clean under it.
HTTPS = env_bool("LOOPWARDEN_HTTPS", REQUIRE_SECRET_KEY)
# One year by default; a first deployment may start lower, since browsers remember it.
HSTS_SECONDS = env_int("HSTS_SECONDS", 31_536_000, minimum=1)
if HTTPS:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = True
    # Prometheus scrapes each web machine directly, inside the network, over HTTP (README).
    SECURE_REDIRECT_EXEMPT = [r"^metrics$"]
    SECURE_HSTS_SECONDS = HSTS_SECONDS
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
# Proxies in front of the app that append the client's address to X-Forwarded-For: sign-in
# throttling counts failures per address, and behind a proxy REMOTE_ADDR is the proxy's.
TRUSTED_PROXIES = env_int("TRUSTED_PROXIES", 1 if HTTPS else 0)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    # Before agents: its permissions exist when agents' post_migrate gives the admins theirs.
    "axes",
    "agents",
    "ledger",
    "console",
]

MIDDLEWARE = [
    # First: every later middleware may read the host (a bad one answers 400 here, in the
    # API's envelope) or the body (a chunked one is read here, or refused 411; a bad
    # Content-Length is refused).
    "loopwarden.middleware.RefuseDisallowedHostMiddleware",
    "loopwarden.middleware.BodyFramingMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "loopwarden.middleware.RefuseUnstorableUrlMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Last, as django-axes asks: turns a locked-out sign-in into its lockout page.
    "axes.middleware.AxesMiddleware",
]

# Developer tools (the `devtools` app: `seed_demo`, `simulate`, `bench`, `measure_render`, the
# bench's baseline endpoint), installed only when asked: `./dev run` and the bench's server set
# it, the tests that use them install it themselves. Production leaves it off: no such commands,
# no benchmark route.
DEVTOOLS = env_bool("LOOPWARDEN_DEVTOOLS", False)
if DEVTOOLS:
    INSTALLED_APPS.append("devtools")
    # Only under `manage.py bench` (it removes itself otherwise): counts each request's SQL.
    MIDDLEWARE.insert(0, "devtools.server.StatementCountMiddleware")

# The one currency the console shows amounts in (5.00 USD): an ISO 4217 code. Costs are
# stored as numbers in the currency of the price table; this names it, it converts nothing.
LOOPWARDEN_CURRENCY = env_str("LOOPWARDEN_CURRENCY", "USD").strip().upper()
if not re.fullmatch(r"[A-Z]{3}", LOOPWARDEN_CURRENCY):
    raise ConfigError(
        f"LOOPWARDEN_CURRENCY={LOOPWARDEN_CURRENCY!r} is not a three-letter currency code (USD)"
    )

# Sign-in throttling (django-axes): after SIGNIN_FAILURE_LIMIT failed sign-ins for one username,
# or from one address, that username or address is locked out for SIGNIN_LOCKOUT_MINUTES
# (0: until an admin lifts it on the console's Sign-in lockouts page). Failures are not
# forgotten on a successful sign-in: that would let anyone with an account reset the count of
# the address they share with an attacker.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
SIGNIN_FAILURE_LIMIT = env_int("SIGNIN_FAILURE_LIMIT", 5, minimum=1)
SIGNIN_LOCKOUT_MINUTES = env_int("SIGNIN_LOCKOUT_MINUTES", 15)
AXES_FAILURE_LIMIT = SIGNIN_FAILURE_LIMIT
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]  # each on its own: per user, per address
AXES_COOLOFF_TIME = timedelta(minutes=SIGNIN_LOCKOUT_MINUTES) if SIGNIN_LOCKOUT_MINUTES else None
AXES_RESET_ON_SUCCESS = False
AXES_HANDLER = "axes.handlers.database.AxesDatabaseHandler"  # the lockouts page reads its rows
AXES_LOCKOUT_CALLABLE = "console.views_signin.locked_out"  # the console's page, 429
AXES_CLIENT_IP_CALLABLE = "loopwarden.proxy.client_address"

ROOT_URLCONF = "loopwarden.urls"
WSGI_APPLICATION = "loopwarden.wsgi.application"

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


# How long a request waits for the embedded database's write lock before it answers 503
# DATABASE_UNAVAILABLE with Retry-After: well inside the thin client's timeout (30 s), so the
# client hears that answer and sends the request again, instead of giving up on a request the
# server is still working on (README, "Timeouts").
DB_LOCK_WAIT_SECONDS = 20


def _database() -> dict:
    url = env_str("DATABASE_URL", f"sqlite:///{DATA_DIR / 'loopwarden.sqlite3'}")
    conn_max_age = env_int("DB_CONN_MAX_AGE", 0)
    try:
        config = dj_database_url.parse(url, conn_max_age=conn_max_age)
    except Exception:  # dj_database_url raises several kinds
        raise ConfigError(
            f"DATABASE_URL={_without_password(url)!r} is not a database URL: use "
            "postgres://user:password@host:5432/dbname, or unset it for the embedded SQLite file"
        ) from None
    if config["ENGINE"] == "django.db.backends.sqlite3":
        # Embedded default: several processes (web, worker, simulated agent) share the file.
        # WAL lets readers run beside the writer, IMMEDIATE takes the write lock at BEGIN so a
        # transaction that locks the task row never fails half-way on a lock upgrade.
        config["OPTIONS"] = {
            "timeout": DB_LOCK_WAIT_SECONDS,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
        config.setdefault("TEST", {})["NAME"] = str(DATA_DIR / "test.sqlite3")
    elif config["ENGINE"] not in (
        "django.db.backends.postgresql",
        "django.db.backends.postgresql_psycopg2",
    ):
        raise ConfigError(
            f"DATABASE_URL: {config['ENGINE'].rsplit('.', 1)[-1]} is not supported: use "
            "PostgreSQL (postgres://user:password@host:5432/dbname) or unset it for SQLite"
        )
    elif not config.get("NAME"):
        raise ConfigError(
            f"DATABASE_URL={_without_password(url)!r} names no database: end it with /dbname, "
            "as in postgres://user:password@host:5432/dbname"
        )
    elif DB_PREPARED_STATEMENTS:
        # The hot path's prepared statements (agents.db.prepared.hot_cursor) are fixed-shape
        # lookups and writes by key: one generic plan each, made once per connection, rather
        # than a plan made again at every execution. Only prepared statements are concerned,
        # and nothing else prepares (Django's default): a startup option, no statement sent.
        config.setdefault("OPTIONS", {})["options"] = "-c plan_cache_mode=force_generic_plan"
    return config


def _without_password(url: str) -> str:
    """A URL fit for an error message: the password, if any, is masked."""
    return re.sub(r"^([^:/]+://[^:/@]*:)[^@]*@", r"\1***@", url)


# PostgreSQL with persistent connections (DB_CONN_MAX_AGE not 0): the guard's hot-path
# statements run as prepared statements (agents.db.prepared.hot_cursor). Off behind a pooler that
# cannot keep them (PgBouncer in transaction mode before 1.21).
DB_PREPARED_STATEMENTS = env_bool("DB_PREPARED_STATEMENTS", True)
DATABASES = {"default": _database()}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS: list[dict] = []
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = DATA_DIR / "staticfiles"


def _cache() -> dict:
    """The cache counts API calls per token (agents/api/throttles.py). Per process by default;
    with several web processes, point CACHE_URL at Redis so they count together."""
    url = env_str("CACHE_URL", "")
    if not url:
        return {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    if url.startswith(("redis://", "rediss://", "unix://")):
        return {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": url}
    raise ConfigError(
        f"CACHE_URL={_without_password(url)!r}: use redis://host:6379/1 (or leave it empty)"
    )


CACHES = {"default": _cache()}

LOGIN_URL = "/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/login/"

# Request bodies. Larger than LOOPWARDEN_MAX_BODY_BYTES answers 413 (the API's error envelope);
# JSON nested deeper than LOOPWARDEN_MAX_JSON_DEPTH (the body itself is level 1) answers 400.
# The depth has a ceiling: what the parser admits is later walked recursively (serializers,
# the fingerprint, the database driver's JSON encoder), and must stay far from Python's
# recursion limit.
LOOPWARDEN_MAX_BODY_BYTES = env_int("LOOPWARDEN_MAX_BODY_BYTES", 2_621_440, minimum=1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = LOOPWARDEN_MAX_BODY_BYTES
LOOPWARDEN_MAX_JSON_DEPTH_CEILING = 200
LOOPWARDEN_MAX_JSON_DEPTH = env_int("LOOPWARDEN_MAX_JSON_DEPTH", 64, minimum=2)
if LOOPWARDEN_MAX_JSON_DEPTH > LOOPWARDEN_MAX_JSON_DEPTH_CEILING:
    raise ConfigError(
        f"LOOPWARDEN_MAX_JSON_DEPTH={LOOPWARDEN_MAX_JSON_DEPTH} must be <= "
        f"{LOOPWARDEN_MAX_JSON_DEPTH_CEILING}"
    )

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["agents.api.auth.BearerTokenAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["agents.api.renderers.FaithfulJSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["agents.api.parsers.GuardedJSONParser"],
    "EXCEPTION_HANDLER": "agents.api.errors.exception_handler",
    "DEFAULT_THROTTLE_CLASSES": ["agents.api.throttles.TokenRateThrottle"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": None,
}
# Calls per API token and window (second, minute, hour or day); `off` turns it off. Far above
# what an agent's loop does: it stops a client gone wrong, the guard paces the rest.
API_THROTTLE_RATE = env_rate("API_THROTTLE_RATE", "3000/minute")
SPECTACULAR_SETTINGS = {
    "TITLE": "Loopwarden runner API",
    "DESCRIPTION": "Ask before every paid model call and tool execution; report what happened.",
    "VERSION": "1",
    # Request and response schemas apart: a request states what the server accepts
    # (minLength on required text), an answer what it sends.
    "COMPONENT_SPLIT_REQUEST": True,
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "agents.api.schema.describe_the_api",
    ],
    "ENUM_NAME_OVERRIDES": {
        "TaskStateEnum": "agents.guard.terms.TASK_STATES",
        "TerminalStateEnum": "agents.api.responses.TERMINAL_STATES",
        "OperationStateEnum": "agents.guard.terms.OPERATION_STATES",
        "ReasonEnum": "agents.guard.terms.REASONS",
        "DecisionEnum": "agents.guard.terms.DECISIONS",
        # One decision or row type each: the variants of the oneOf answers.
        **{
            f"{value.title().replace('_', '')}Enum": [value]
            for value in (
                "ALLOW",
                "EXECUTE",
                "REUSE",
                "BLOCK",
                "WAIT",
                "STOP",
                "CONTINUE",
                "model_call",
                "tool_call",
                "event",
            )
        },
        # A reconcile's verdicts, and the one its result comes with (ReconcileIn.only_with).
        "VerdictEnum": ["COMMITTED", "NOT_COMMITTED", "UNKNOWN"],
        "CommittedVerdictEnum": ["COMMITTED"],
    },
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SERVE_AUTHENTICATION": [],
    # Swagger UI from local static files, no CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# Celery. The embedded default is the filesystem transport: no server to run.
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "filesystem://")
# Each URL (several are separated by ";") names a transport kombu knows: a typo stops every
# program at start, not the worker with a traceback and the web at its first notification.
for _broker_url in CELERY_BROKER_URL.split(";"):
    _scheme, _sep, _ = _broker_url.strip().partition("://")
    if not _sep or _scheme.split("+")[0] not in TRANSPORT_ALIASES:
        raise ConfigError(
            f"CELERY_BROKER_URL={_without_password(_broker_url.strip())!r} names no broker: "
            "use redis://host:6379/0 or amqp://user:password@host:5672//, or unset it for "
            "the embedded filesystem://"
        )
_broker_dir = DATA_DIR / "broker"
if CELERY_BROKER_URL.startswith("filesystem://"):
    for sub in ("queue", "processed", "control"):
        folder_made("LOOPWARDEN_DATA_DIR", _broker_dir / sub)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "queue"),
        "data_folder_out": str(_broker_dir / "queue"),
        "processed_folder": str(_broker_dir / "processed"),
        "control_folder": str(_broker_dir / "control"),
        "store_processed": False,
        # The worker lists the folder this often; each poll takes one message per free slot.
        "polling_interval": 0.2,
    }
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_TASK_IGNORE_RESULT = True
CELERY_BEAT_SCHEDULE_FILENAME = str(DATA_DIR / "celerybeat-schedule")
# One queue name for web, worker and beat; tests give each real worker a queue of its own.
CELERY_TASK_DEFAULT_QUEUE = env_str("CELERY_TASK_DEFAULT_QUEUE", "celery")
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Jobs are idempotent, so a job lost with its worker is better run twice than never.
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Enqueueing happens after a request committed: give up fast rather than hold the request.
CELERY_TASK_PUBLISH_RETRY_POLICY = {"max_retries": 2, "interval_start": 0, "interval_step": 0.5}
CELERY_TIMEZONE = "UTC"
SWEEP_INTERVAL_SECONDS = env_int("SWEEP_INTERVAL_SECONDS", 15, minimum=1)
RESERVATION_TIMEOUT_SECONDS = env_int("RESERVATION_TIMEOUT_SECONDS", 600, minimum=1)
ROLLUP_INTERVAL_SECONDS = env_int("ROLLUP_INTERVAL_SECONDS", 300, minimum=1)
# Retention (agents.services.retention): the trace of tasks ended more than this many days ago
# is removed by the prune job. 0 keeps everything forever. At least 2 otherwise: the rollup job
# rebuilds yesterday from the trace.
RETENTION_DAYS = env_int("RETENTION_DAYS", 0)
if RETENTION_DAYS == 1:
    raise ConfigError("RETENTION_DAYS is 1: use 0 (keep forever) or 2 or more days")
PRUNE_INTERVAL_SECONDS = env_int("PRUNE_INTERVAL_SECONDS", 3600, minimum=1)

# Reconcilers: HTTP endpoints of tool policies asked about UNKNOWN operations.
RECONCILE_TIMEOUT_SECONDS = env_int("RECONCILE_TIMEOUT_SECONDS", 10, minimum=1)
RECONCILE_MAX_CHECKS = env_int("RECONCILE_MAX_CHECKS", 4, minimum=1)
RECONCILE_BACKOFF_SECONDS = env_int("RECONCILE_BACKOFF_SECONDS", 5, minimum=1)

# Near-duplicate similarity by embeddings (tool policies with provider "embedding"): any
# OpenAI-compatible POST {url}/embeddings. Asked before the task row is locked; slower than the
# timeout or failing, the decision falls back to the lexical provider and the miss is logged.
EMBEDDINGS_URL = env_url("LOOPWARDEN_EMBEDDINGS_URL", "")
EMBEDDINGS_MODEL = env_str("LOOPWARDEN_EMBEDDINGS_MODEL", "text-embedding-3-small")
EMBEDDINGS_KEY = env_str("LOOPWARDEN_EMBEDDINGS_KEY", "")
EMBEDDINGS_TIMEOUT_MS = env_int("LOOPWARDEN_EMBEDDINGS_TIMEOUT_MS", 300, minimum=1)

# Notifications (NEEDS_HUMAN, spend cap pauses).
NOTIFY_WEBHOOK_URL = env_url("NOTIFY_WEBHOOK_URL", "")
NOTIFY_EMAILS = env_emails("NOTIFY_EMAILS")
EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "loopwarden@localhost")
NOTIFY_TIMEOUT_SECONDS = env_int("NOTIFY_TIMEOUT_SECONDS", 10, minimum=1)
NOTIFY_MAX_RETRIES = env_int("NOTIFY_MAX_RETRIES", 5)
NOTIFY_BACKOFF_SECONDS = env_int("NOTIFY_BACKOFF_SECONDS", 10, minimum=1)

# Prometheus metrics at /metrics (see agents/metrics.py). Every web worker and Celery process
# writes its counters to files in one shared folder, which any web worker sums at a scrape
# (prometheus_client's multiprocess mode). The client reads the folder from the environment,
# so it is put there before anything imports it; subprocesses inherit it. The gunicorn master
# empties it at start (loopwarden/gunicorn_metrics.py).
PROMETHEUS_MULTIPROC_DIR = (
    BASE_DIR / env_str("PROMETHEUS_MULTIPROC_DIR", str(DATA_DIR / "prometheus"))
).resolve()
folder_made("PROMETHEUS_MULTIPROC_DIR", PROMETHEUS_MULTIPROC_DIR)
os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(PROMETHEUS_MULTIPROC_DIR)
# Who may scrape: a bearer token, client addresses, or both (both must then match). With
# neither set the endpoint answers 404: metrics are never served unprotected by accident.
METRICS_TOKEN = env_str("METRICS_TOKEN", "")
if METRICS_TOKEN and len(METRICS_TOKEN) < 16:
    raise ConfigError(  # the token itself is never printed
        f"METRICS_TOKEN is {len(METRICS_TOKEN)} characters long: use 16 or more, e.g. "
        "python -c 'import secrets; print(secrets.token_urlsafe(32))'"
    )
METRICS_ALLOWED_ADDRESSES = env_networks("METRICS_ALLOWED_ADDRESSES")

LOG_LEVEL = env_choice("LOG_LEVEL", "INFO", ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"))
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "loggers": {
        "loopwarden.decisions": {"handlers": ["console"], "level": LOG_LEVEL, "propagate": False},
        "loopwarden.jobs": {"handlers": ["console"], "level": LOG_LEVEL, "propagate": False},
        "django": {"handlers": ["console"], "level": "WARNING"},
        # Failed sign-ins and lockouts, one line each.
        "axes": {"handlers": ["console"], "level": "WARNING", "propagate": False},
    },
}
