"""flaskweb settings: every difference between environments is an environment variable.

Embedded defaults (nothing set): SQLite in var/, a file-system cache and a file-system Celery
broker in var/, so a laptop runs the whole app — web process plus a separate worker process —
with no PostgreSQL or Redis. Set DATABASE_URL and REDIS_URL for production. See .env.example.
"""

from __future__ import annotations

from pathlib import Path

from celery.schedules import crontab

from flaskweb.env import (
    database_from_url,
    embedded_secret_key,
    env_bool,
    env_float,
    env_int,
    env_list,
    env_secret,
    env_str,
)
from flaskweb.metrics_dir import directory_usable

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("FLASKWEB_VAR_DIR", str(BASE_DIR / "var")))

DEBUG = env_bool("DJANGO_DEBUG", False)
# Embedded mode (no DATABASE_URL) is one machine's own install: when no key is given, it
# makes a random one on first use and keeps it in var/secret_key (owner-only), so every
# manage.py command works as written there with DEBUG off. A served deployment (DATABASE_URL
# set) must be given its key: no default, the boot fails without it.
EMBEDDED = not env_str("DATABASE_URL")
_secret_key = env_secret("DJANGO_SECRET_KEY", required=not DEBUG and not EMBEDDED)
if _secret_key:
    SECRET_KEY = _secret_key
elif EMBEDDED:
    SECRET_KEY = embedded_secret_key(VAR_DIR / "secret_key")
else:  # DEBUG on a served database: a development machine
    SECRET_KEY = "insecure-dev-key-only-for-debug"
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["127.0.0.1", "localhost"] if DEBUG else [])
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "flaskweb.admin_config.ThrottledAdminConfig",  # django.contrib.admin, login throttled
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "django_htmx",
    "template_partials.apps.SimpleAppConfig",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI and Redoc assets, served from static (no CDN)
    "annotation",
    "judging",
    "analytics",
    "flaskweb",  # the composition root's commands: seed_demo, rundemo
]

MIDDLEWARE = [
    # /healthz and /readyz, answered before anything else runs (no session, cookie, HTTPS
    # redirect or host check: a load balancer probes the server's own address over HTTP)
    "flaskweb.health.ProbeMiddleware",
    # requests by view, status and latency (docs/OPERATIONS.md), around everything below
    "flaskweb.metrics.MetricsMiddleware",
    # the client's address from a trusted reverse proxy, before anything reads it
    "flaskweb.proxy.ForwardedForMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "flaskweb.security.SecurityHeadersMiddleware",
    # before anything that reads the body (the CSRF middleware reads request.POST)
    "flaskweb.request_limits.RequestSizeLimitMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "annotation.audit.AuditActorMiddleware",
    # a study participant's session reaches its own campaign's pages only (docs/CROWD.md)
    "annotation.study.middleware.StudySessionMiddleware",
    # each page's language: annotator pages by the picker, the study, the browser; staff
    # pages in LANGUAGE_CODE (annotation/languages/middleware.py, docs/LANGUAGES.md)
    "annotation.languages.middleware.AnnotatorLanguageMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "flaskweb.urls"
WSGI_APPLICATION = "flaskweb.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                # LANGUAGE_CODE and LANGUAGE_BIDI for <html lang dir> (annotator pages)
                "django.template.context_processors.i18n",
            ],
            # compiled once per process (the cached loader, which Django only adds by itself
            # when no loaders are listed; runserver's autoreloader resets it when a template
            # changes): parsing the scoring page's templates cost more than rendering them
            "loaders": [
                (
                    "template_partials.loader.Loader",
                    [
                        (
                            "django.template.loaders.cached.Loader",
                            [
                                "django.template.loaders.filesystem.Loader",
                                "django.template.loaders.app_directories.Loader",
                            ],
                        )
                    ],
                )
            ],
            "builtins": ["template_partials.templatetags.partials"],
        },
    }
]

# --- Database -------------------------------------------------------------------------------
DATABASE_URL = env_str("DATABASE_URL")
if DATABASE_URL:
    DATABASES = {"default": database_from_url(DATABASE_URL)}
else:
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": VAR_DIR / "flaskweb.sqlite3",
        }
    }
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # WAL lets the web process read while the worker process holds the import transaction;
    # IMMEDIATE takes the write lock up front so two writers queue instead of deadlocking.
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
        "timeout": 30,
    }
# A connection serves the requests of its thread for a minute instead of one request: opening
# one is a round trip and a session on PostgreSQL; on SQLite it is the file opened, the
# pragmas above run and Django's ~40 SQL functions registered, 16 % of the web process's CPU
# on the annotation API when every request opened its own (bench/README.md, "Third pass").
# `restore` wants the app stopped either way (docs/SERVING.md).
DATABASES["default"]["CONN_MAX_AGE"] = env_int("DATABASE_CONN_MAX_AGE", 60)
if not DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
    if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
        # the same backend, whose health check asks `SELECT 1` only when the connection's
        # socket has something to read (the server ended the session): one round trip less
        # per request (flaskweb/postgresql/base.py)
        DATABASES["default"]["ENGINE"] = "flaskweb.postgresql"
# Prepared statements (PostgreSQL), the one switch: the fixed SQL of the annotation hot path
# (flaskweb/db.py) binds its parameters on the server, so psycopg prepares each statement on
# a connection after its fifth run and PostgreSQL stops planning it. ORM queries keep
# Django's client-side binding: preparing them too gained nothing measurable
# (bench/README.md). Turn it off behind a pooler that cannot keep prepared statements
# (PgBouncer in transaction mode before 1.21, or without max_prepared_statements).
DATABASE_PREPARED_STATEMENTS = env_bool("DATABASE_PREPARED_STATEMENTS", True)
if DATABASE_PREPARED_STATEMENTS and DATABASES["default"]["ENGINE"].endswith("postgresql"):
    # Django opens psycopg connections with prepare_threshold=None, which turns preparing off
    # for every cursor of the connection: without this the fixed SQL was bound on the server
    # but parsed and planned on every run (planning was 2.4 of the 3.1 ms PostgreSQL spent
    # per next + submit, bench/README.md). The ORM's client-side cursors never prepare.
    DATABASES["default"]["OPTIONS"]["prepare_threshold"] = 5
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Cache and Celery -----------------------------------------------------------------------
REDIS_URL = env_str("REDIS_URL")
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": env_str("FLASKWEB_CACHE_PREFIX", "flaskweb"),
        }
    }
    CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", REDIS_URL)
    # kombu's transport options: ints for Redis, folder paths and flags for the file system
    CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {
        "visibility_timeout": env_int("CELERY_BROKER_VISIBILITY_TIMEOUT", 3600)
    }
else:
    # Embedded mode: a cache and a broker on the local file system, shared by the web
    # process and the separate worker process that `manage.py rundemo` starts.
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
            "LOCATION": str(VAR_DIR / "cache"),
        }
    }
    _queue_dir = VAR_DIR / "celery" / "queue"
    _processed_dir = VAR_DIR / "celery" / "processed"
    for _d in (_queue_dir, _processed_dir, VAR_DIR / "celery" / "control"):
        _d.mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_URL = "filesystem://"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_queue_dir),
        "data_folder_out": str(_queue_dir),
        "processed_folder": str(_processed_dir),
        # the exchange tables; kombu's default is ./control in the working directory
        "control_folder": str(VAR_DIR / "celery" / "control"),
        "store_processed": False,
    }

CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_TASK_IGNORE_RESULT = True
CELERY_RESULT_BACKEND = None
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_TASK_ROUTES = {
    "annotation.tasks.dataset_import_task": {"queue": "imports"},
    # bulk rendering of a new campaign's texts: background work beside the imports
    "annotation.tasks.campaign_texts_render_task": {"queue": "imports"},
    "analytics.tasks.export_run_task": {"queue": "imports"},
    "analytics.tasks.score_import_task": {"queue": "imports"},
    "analytics.tasks.preference_import_task": {"queue": "imports"},
    # reports take seconds to minutes: their own queue and worker (docs/ANALYTICS.md)
    "analytics.tasks.report_snapshot_compute_task": {"queue": "analytics"},
    # an exact name wins over the pattern below: imports are not LLM calls
    "judging.tasks.judge_output_import_task": {"queue": "imports"},
    "judging.tasks.*": {"queue": "judging"},
}
# Hard limit well under the Redis visibility timeout (1 h) so a slow task is never
# redelivered while it is still running.
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 1500)
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 1800)
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BEAT_SCHEDULE = {
    # Abandoned annotation leases go back to the pool within a minute of expiring (claims
    # also expire their own campaign's leases first).
    "assignments-expire": {
        "task": "annotation.tasks.assignments_expire_task",
        "schedule": 60.0,
    },
    # A judge run whose worker was killed gets its missing judgments enqueued again once it
    # made no progress for FLASKWEB_JUDGE_REDISPATCH_SECONDS (not after the broker's hour).
    "judge-runs-redispatch": {
        "task": "judging.tasks.judge_runs_redispatch_task",
        "schedule": 60.0,
    },
    # Adaptive overlap (docs/REVIEW.md): complete responses whose annotators disagree get one
    # more annotation, within each campaign's limits; cheap when no campaign has it on.
    "adaptive-overlap": {
        "task": "annotation.tasks.adaptive_overlap_task",
        "schedule": 120.0,
    },
    # An import whose worker died stays "running" forever; fail it after its time limit.
    # Judge runs whose every worker died stop looking "running" forever.
    "judge-runs-health-check": {
        "task": "judging.tasks.judge_runs_health_check_task",
        "schedule": crontab(minute="*/10"),
    },
    "uploads-health-check": {
        "task": "annotation.tasks.uploads_health_check_task",
        "schedule": crontab(minute="*/5"),
    },
    # Score, preference and judge-output imports whose worker died are failed, as dataset
    # imports are.
    "import-jobs-health-check": {
        "task": "analytics.tasks.import_jobs_health_check_task",
        "schedule": crontab(minute="*/5"),
    },
    "judge-output-import-jobs-health-check": {
        "task": "judging.tasks.judge_output_import_jobs_health_check_task",
        "schedule": crontab(minute="*/5"),
    },
    # Report snapshots whose scores changed are marked stale and the default ones computed
    # again (rate limited); snapshots whose worker died are failed.
    "report-snapshots-refresh": {
        "task": "analytics.tasks.report_snapshots_refresh_task",
        "schedule": 60.0,
    },
    # Exports whose worker died are failed; export files past their retention are deleted.
    "export-jobs-health-check": {
        "task": "analytics.tasks.export_jobs_health_check_task",
        "schedule": crontab(minute="*/10"),
    },
}

# --- Auth, i18n, static, media --------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
# Django's database sessions, read with one fixed statement (flaskweb/sessions.py)
SESSION_ENGINE = "flaskweb.sessions"
# Django's cookie-then-session storage, made on first use (flaskweb/messages.py)
MESSAGE_STORAGE = "flaskweb.messages.LazyFallbackStorage"
# Django's ModelBackend, the signed-in user read with one fixed statement
AUTHENTICATION_BACKENDS = ["flaskweb.auth_backend.ModelBackend"]
LOGIN_REDIRECT_URL = "annotation:home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
# The languages annotator pages are translated into (docs/LANGUAGES.md says how to add one):
# one catalogue for the project in locale/<code>/LC_MESSAGES/django.po, compiled to .mo and
# committed. Arabic is the right-to-left layout the browser tests check.
LANGUAGES = [("en", "English"), ("es", "Español"), ("ar", "العربية")]
LOCALE_PATHS = [BASE_DIR / "locale"]
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(env_str("DJANGO_STATIC_ROOT", str(BASE_DIR / "staticfiles")))
MEDIA_URL = "/media/"
MEDIA_ROOT = Path(env_str("DJANGO_MEDIA_ROOT", str(VAR_DIR / "media")))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG
        else "whitenoise.storage.CompressedManifestStaticFilesStorage"
    },
}

# Uploads larger than this spill to a temp file instead of memory; the import reads files
# as streams either way.
FILE_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024
DATA_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024
# Export files are deleted this many days after they were made (the job row stays).
FLASKWEB_EXPORT_RETENTION_DAYS = env_int("FLASKWEB_EXPORT_RETENTION_DAYS", 7)
# Report snapshots (docs/ANALYTICS.md "Report snapshots"): at most this many computing per
# project at once; a stale default snapshot is computed again by beat at most once per
# REFRESH_MIN_SECONDS per project and REFRESH_PER_TICK per minute in all; one pending or
# running longer than STALE_SECONDS lost its worker and is failed.
FLASKWEB_REPORT_MAX_IN_FLIGHT = env_int("FLASKWEB_REPORT_MAX_IN_FLIGHT", 4)
FLASKWEB_REPORT_REFRESH_MIN_SECONDS = env_int("FLASKWEB_REPORT_REFRESH_MIN_SECONDS", 300)
FLASKWEB_REPORT_REFRESH_PER_TICK = env_int("FLASKWEB_REPORT_REFRESH_PER_TICK", 4)
FLASKWEB_REPORT_STALE_SECONDS = env_int("FLASKWEB_REPORT_STALE_SECONDS", 3600)
# Filtered (non-default) and failed snapshots are deleted this many days after they finished.
FLASKWEB_REPORT_KEEP_DAYS = env_int("FLASKWEB_REPORT_KEEP_DAYS", 7)
# Largest request body anywhere but the upload endpoints, refused (413) before it is read
# (flaskweb.request_limits); also the allowance for form fields on the upload endpoints.
FLASKWEB_MAX_BODY_BYTES = env_int("FLASKWEB_MAX_BODY_BYTES", 2 * 1024 * 1024)
# Most bytes of files one upload request may carry through the web or the API, all its files
# together (the CLI has no limit).
FLASKWEB_MAX_UPLOAD_BYTES = env_int("FLASKWEB_MAX_UPLOAD_BYTES", 1024 * 1024 * 1024)
# Longest single line (JSONL) or record (CSV) accepted in an import file.
FLASKWEB_MAX_LINE_BYTES = env_int("FLASKWEB_MAX_LINE_BYTES", 4 * 1024 * 1024)
# A judge run with no progress for this long is marked failed (resume restarts it).
FLASKWEB_JUDGE_STALE_SECONDS = env_int("FLASKWEB_JUDGE_STALE_SECONDS", 6 * 3600)
# A running judge run that recorded nothing for this long has its missing judgments enqueued
# again (a killed worker's messages). Longer than a judge batch's launch time
# (FLASKWEB_JUDGE_TASK_SECONDS, 300 s) plus a call's timeout, so a run that is merely slow
# is left alone.
FLASKWEB_JUDGE_REDISPATCH_SECONDS = env_int("FLASKWEB_JUDGE_REDISPATCH_SECONDS", 600)
# The judging engine (docs/JUDGING.md "How many calls are in flight"): responses per
# judge_batch_task, calls on the wire per worker process at most (also its connection pool),
# how long a batch launches calls before it hands the rest to a follow-up task, how long
# calls on the wire may finish after a pause or cancel, the rate limiter's burst in seconds of
# requests, and the backoff of retryable errors without Retry-After (full jitter).
FLASKWEB_JUDGE_BATCH_SIZE = env_int("FLASKWEB_JUDGE_BATCH_SIZE", 64)
FLASKWEB_JUDGE_MAX_IN_FLIGHT = env_int("FLASKWEB_JUDGE_MAX_IN_FLIGHT", 512)
FLASKWEB_JUDGE_TASK_SECONDS = env_int("FLASKWEB_JUDGE_TASK_SECONDS", 300)
FLASKWEB_JUDGE_STOP_GRACE_SECONDS = env_float("FLASKWEB_JUDGE_STOP_GRACE_SECONDS", 2.0)
FLASKWEB_JUDGE_BURST_SECONDS = env_float("FLASKWEB_JUDGE_BURST_SECONDS", 1.0)
FLASKWEB_JUDGE_BACKOFF_BASE_SECONDS = env_float("FLASKWEB_JUDGE_BACKOFF_BASE_SECONDS", 2.0)
FLASKWEB_JUDGE_BACKOFF_CAP_SECONDS = env_float("FLASKWEB_JUDGE_BACKOFF_CAP_SECONDS", 120.0)
# An upload still "running" after this many seconds is marked failed by the health check.
FLASKWEB_IMPORT_STALE_SECONDS = env_int("FLASKWEB_IMPORT_STALE_SECONDS", 2 * 3600)
# A request that lost the database or Redis answers 503 with this Retry-After (seconds);
# the annotate and review pages wait that long before sending it again (flaskweb/unavailable.py).
FLASKWEB_RETRY_AFTER_SECONDS = env_int("FLASKWEB_RETRY_AFTER_SECONDS", 3)
# A background task that loses the database or the broker (flaskweb/infra.py) closes its
# connections and tries again after a jittered backoff capped at BACKOFF_CAP_SECONDS, for up
# to RETRY_SECONDS of failures in a row; past that it fails and the sweeps take over. A judge
# or metadata batch in a worker's warm shutdown gives its calls on the wire SHUTDOWN_GRACE
# seconds to come back (they are written), then hands the rest to the next worker.
FLASKWEB_INFRA_RETRY_SECONDS = env_int("FLASKWEB_INFRA_RETRY_SECONDS", 300)
FLASKWEB_INFRA_BACKOFF_CAP_SECONDS = env_float("FLASKWEB_INFRA_BACKOFF_CAP_SECONDS", 2.0)
FLASKWEB_JUDGE_SHUTDOWN_GRACE_SECONDS = env_float("FLASKWEB_JUDGE_SHUTDOWN_GRACE_SECONDS", 20.0)

# --- REST API -------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "flaskweb.api_auth.FastTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # JSON bodies nest at most 100 levels and name each key once (a 400 otherwise)
    "DEFAULT_PARSER_CLASSES": [
        "annotation.api_parsers.StrictJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_PAGINATION_CLASS": "flaskweb.api_errors.ApiPagination",
    "PAGE_SIZE": 100,
    "DEFAULT_SCHEMA_CLASS": "flaskweb.api_schema.ApiAutoSchema",
    "EXCEPTION_HANDLER": "flaskweb.api_errors.api_exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "flaskweb API",
    "DESCRIPTION": (
        "Fine-grained (FLASK) evaluation of LLM responses by people and model judges. "
        "Authenticate with `Authorization: Token <key>` (or the browser session). Errors are "
        '`{"detail", "code", "fields"}`; lists are paged with `limit`/`offset`. See docs/API.md.'
    ),
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "TAGS": [
        {
            "name": "annotation",
            "description": "Projects, datasets, the skill catalogue, dataset uploads, and the "
            "annotators' workflow (next task, submit, skip).",
        },
        {
            "name": "judging",
            "description": "Judges, run estimates, runs and their lifecycle, judgments and "
            "scores, and imports of judge outputs made elsewhere.",
        },
        {
            "name": "analytics",
            "description": "The agreement report, the disagreement explorer and "
            "re-annotation, score exports, and long-format score imports.",
        },
    ],
    # what Django's converters accept, so generated clients (and schema tests) stay inside
    "PATH_CONVERTER_OVERRIDES": {
        "int": {"type": "integer", "minimum": 0},
        "slug": {"type": "string", "pattern": "^[-a-zA-Z0-9_]+$"},
    },
    # one name per status set: runs, judgments and export jobs each have a "status"
    "ENUM_NAME_OVERRIDES": {
        "RunStatusEnum": "judging.models.RunStatus",
        "JudgmentStatusEnum": "judging.models.JudgmentStatus",
        "ExportStatusEnum": "analytics.models.ExportStatus",
        "CampaignStatusEnum": "annotation.models.CampaignStatus",
        "CampaignStatusChangeEnum": "annotation.campaigns.apis.STATUS_CHANGES",
        "ProjectRoleEnum": "annotation.models.ProjectRole",
        "ImportJobStatusEnum": "flaskweb.jobs.JobStatus",
        "PairChoiceEnum": "annotation.models.PairChoice",
        "ShownChoiceEnum": "annotation.services.preferences.SHOWN_CHOICES",
        "SelectionSourceEnum": "analytics.models.SelectionSource",
    },
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# --- Production hardening -------------------------------------------------------------------
# `manage.py serve --local` sets this for its own web server and worker only (docs/SERVING.md
# "Trying it on your own machine"): plain HTTP on a loopback address, so no redirect to HTTPS,
# no HSTS and no secure-only cookies (a browser does not send those back over plain HTTP, and
# every POST would fail CSRF). Never set it on a server; it refuses any non-loopback host name.
LOCAL_TRIAL = env_bool("FLASKWEB_LOCAL_TRIAL", False)
if LOCAL_TRIAL and set(ALLOWED_HOSTS) - {"127.0.0.1", "localhost", "::1", "[::1]"}:
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured("FLASKWEB_LOCAL_TRIAL serves loopback host names only")
if not DEBUG:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", True) and not LOCAL_TRIAL
    SESSION_COOKIE_SECURE = not LOCAL_TRIAL
    CSRF_COOKIE_SECURE = not LOCAL_TRIAL
    SECURE_HSTS_SECONDS = (
        0 if LOCAL_TRIAL else env_int("DJANGO_SECURE_HSTS_SECONDS", 60 * 60 * 24 * 30)
    )
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SECURE_CONTENT_TYPE_NOSNIFF = True
    SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
# The health probes are answered before SecurityMiddleware (flaskweb/health.py); should they
# ever reach it, they are still not redirected to HTTPS.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]
# /metrics (docs/OPERATIONS.md): the bearer token Prometheus sends (or _FILE); unset, only a
# signed-in site admin sees the page and everyone else gets 404.
FLASKWEB_METRICS_TOKEN = env_secret("FLASKWEB_METRICS_TOKEN", required=False)
# Several web processes add up their request counters through this directory (gunicorn.conf.py
# and `manage.py serve` set it; flaskweb/metrics_dir.py): made when missing, and left unset,
# each process counting alone, when it cannot be written. Checked here, before
# prometheus_client is imported, as it picks its mode at import.
PROMETHEUS_MULTIPROC_DIR = directory_usable()
# Sign-in throttling (flaskweb.security, for /login/ and the admin's login): failed sign-ins
# per username and per client address within the window, counted in the cache.
LOGIN_FAILURES_PER_USER = env_int("FLASKWEB_LOGIN_FAILURES_PER_USER", 5)
LOGIN_FAILURES_PER_ADDRESS = env_int("FLASKWEB_LOGIN_FAILURES_PER_ADDRESS", 30)
LOGIN_FAILURE_WINDOW = env_int("FLASKWEB_LOGIN_FAILURE_WINDOW", 15 * 60)
# Addresses of the reverse proxies in front (flaskweb.proxy, docs/SERVING.md): from them the
# client's address is read from X-Forwarded-For, so per-address limits count each client.
# Empty: REMOTE_ADDR as the web server saw it. `manage.py serve` on a loopback address sets
# 127.0.0.1,::1 when this is unset.
FLASKWEB_TRUSTED_PROXIES = env_list("FLASKWEB_TRUSTED_PROXIES", [])
# Study links (annotation/study/, docs/CROWD.md): visits per client address and per link
# within the window, counted in the cache (429 past either); the origins MTurk may receive
# a HIT's answer from (turkSubmitTo must be one of them exactly).
FLASKWEB_STUDY_ENTRIES_PER_ADDRESS = env_int("FLASKWEB_STUDY_ENTRIES_PER_ADDRESS", 20)
FLASKWEB_STUDY_ENTRIES_PER_LINK = env_int("FLASKWEB_STUDY_ENTRIES_PER_LINK", 300)
FLASKWEB_STUDY_ENTRY_WINDOW = env_int("FLASKWEB_STUDY_ENTRY_WINDOW", 60)
# A participant's browser is bound to them by a signed cookie (days it lasts); continuing
# on another device needs their resume code, tried at most this often per participant and
# per client address within the window (seconds).
FLASKWEB_STUDY_COOKIE_DAYS = env_int("FLASKWEB_STUDY_COOKIE_DAYS", 120)
FLASKWEB_STUDY_RESUME_ATTEMPTS = env_int("FLASKWEB_STUDY_RESUME_ATTEMPTS", 10)
FLASKWEB_STUDY_RESUME_WINDOW = env_int("FLASKWEB_STUDY_RESUME_WINDOW", 3600)
FLASKWEB_MTURK_SUBMIT_HOSTS = env_list(
    "FLASKWEB_MTURK_SUBMIT_HOSTS", ["https://www.mturk.com", "https://workersandbox.mturk.com"]
)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("DJANGO_LOG_LEVEL", "INFO")},
    # one line per judge HTTP call is noise; failures are recorded on the judgments
    "loggers": {"httpx": {"level": "WARNING"}, "httpcore": {"level": "WARNING"}},
}
