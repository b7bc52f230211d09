"""specreg settings: one module, driven by environment variables.

Defaults need no running service: SQLite in WAL mode and a filesystem Celery broker under
SPECREG_DATA_DIR. DATABASE_URL switches to PostgreSQL, CELERY_BROKER_URL to Redis or RabbitMQ.
"""

from __future__ import annotations

import os
import re
import secrets
import uuid
from datetime import timedelta
from pathlib import Path

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent


def envbool(name: str, default: str = "False") -> bool:
    value = os.environ.get(name, default)
    if value.lower() in ("1", "true", "yes", "on"):
        return True
    if value.lower() in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"{name}: expected a boolean (true/false), got {value!r}")


def envint(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{name}: expected an integer, got {value!r}") from None


def private_data_dir(path: Path) -> Path:
    """The data folder (database, secret key, downloads), readable by its owner only."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = path.stat()
    if st.st_uid == os.getuid() and st.st_mode & 0o077:
        path.chmod(0o700)
    return path


def installation_key(key_file: Path, make=lambda: secrets.token_urlsafe(50)) -> str:
    """The per-installation secret key, created once even when several processes start together.

    The key is written to a private temporary file (mode 0600 from its creation) and linked into
    place, which fails if another process got there first; everyone then reads the one that won.
    """
    if not key_file.exists():
        tmp = key_file.with_name(f".{key_file.name}.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(make())
            try:
                os.link(tmp, key_file)
            except FileExistsError:
                pass
        finally:
            tmp.unlink(missing_ok=True)
    return key_file.read_text().strip()


DATA_DIR = private_data_dir(Path(os.environ.get("SPECREG_DATA_DIR", BASE_DIR / "var")).resolve())

DEBUG = envbool("DEBUG", "False")
# A per-installation key kept with the data, so a fresh checkout works without set-up and
# login sessions survive restarts.
SECRET_KEY = os.environ.get("SECRET_KEY", "") or installation_key(DATA_DIR / "secret_key")
# Which installation made a record, in exported knowledge bases (registry.kb): public, unlike the
# key, and stable for the data folder's life. Machines sharing one database should share it
# (set it in the environment on every one of them).
SPECREG_INSTALLATION_ID = os.environ.get("SPECREG_INSTALLATION_ID", "").strip() or installation_key(
    DATA_DIR / "installation_id", lambda: str(uuid.uuid4())
)
if not re.fullmatch(r"[A-Za-z0-9._-]{1,64}", SPECREG_INSTALLATION_ID):
    raise ValueError("SPECREG_INSTALLATION_ID: 1 to 64 letters, digits, '.', '_' or '-'")
# Largest knowledge-base file import_kb reads. It is streamed (memory stays about one record), so this bounds
# time: the import is one transaction, whose time grows with the file. 256 MiB holds what real installations
# export, whose size is mostly their distinct vocabularies' token tables. Raise it for more.
# (figures: docs/benchmarks.md, "Figures behind design choices")
SPECREG_KB_MAX_BYTES = envint("SPECREG_KB_MAX_BYTES", 256 * 1024**2)
# One record (a run with its results, a deployment with its samples) is built whole, in memory several times its size.
SPECREG_KB_MAX_RECORD_BYTES = envint("SPECREG_KB_MAX_RECORD_BYTES", 16 * 1024**2)
SPECREG_KB_MAX_RECORD_VALUES = envint("SPECREG_KB_MAX_RECORD_VALUES", 2_000_000)

ALLOWED_HOSTS = os.environ.get("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]").split(",")
CSRF_TRUSTED_ORIGINS = [o for o in os.environ.get("CSRF_TRUSTED_ORIGINS", "").split(",") if o]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "axes",
    "rest_framework",  # the JSON API (registry.web.api_views)
    "knox",  # API tokens, stored as SHA-512 digests only
    "drf_spectacular",  # OpenAPI schema at /api/schema/
    "drf_spectacular_sidecar",  # Swagger UI's files served from here, no CDN
    "inspector",
    "registry",
    "registry.team",  # notes, deployments, production telemetry (its own app: its own migrations)
    "registry.apitokens",  # the token page (names for knox's tokens)
    "runner",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "registry.access.login_throttle.LoginThrottleMiddleware",  # per-address failed-login throttle (429)
    "registry.access.login_required.LoginRequiredMiddleware",  # needs request.user; off unless SPECREG_LOGIN_REQUIRED
    "registry.access.redact.HideServerPathsMiddleware",  # needs request.user
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    "axes.middleware.AxesMiddleware",  # last, as django-axes asks
]

ROOT_URLCONF = "registry.urls"
WSGI_APPLICATION = "registry.wsgi.application"

# The site's templates: the checkout's top-level templates/ folder. An installed wheel has no checkout around
# it (BASE_DIR is then site-packages) and carries a copy as package data, put there by setup.py's build_py.
SITE_TEMPLATES = BASE_DIR / "templates"
if not ((BASE_DIR / "manage.py").is_file() and SITE_TEMPLATES.is_dir()):
    SITE_TEMPLATES = Path(__file__).resolve().parent / "_bundled" / "templates"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [SITE_TEMPLATES],
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

SQLITE_PATH = DATA_DIR / "specreg.sqlite3"
DATABASES = {
    "default": dj_database_url.config(
        env="DATABASE_URL", default=f"sqlite:///{SQLITE_PATH}", conn_max_age=envint("DB_CONN_MAX_AGE", 0)
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    if SQLITE_PATH.exists():
        SQLITE_PATH.chmod(0o600)
    # The web server and a worker write at once: WAL lets readers proceed during a write,
    # and the busy timeout makes a writer wait for the lock instead of failing at once.
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 20,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA busy_timeout=20000;",
    }
if os.environ.get("TEST_DATABASE_NAME"):
    DATABASES["default"]["TEST"] = {"NAME": os.environ["TEST_DATABASE_NAME"]}
elif DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # A file, not Django's in-memory default, so a real worker process can share the test database.
    DATABASES["default"]["TEST"] = {"NAME": str(DATA_DIR / f"test_specreg_{os.getpid()}.sqlite3")}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

# Failed logins: django-axes locks a username *from one address* (the pair, so a stranger cannot lock a
# user out, nor one address every account behind an office NAT); an address that fails many logins
# is throttled instead (registry.access.login_throttle). Both counts live in the database.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = envint("SPECREG_LOGIN_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = timedelta(minutes=envint("SPECREG_LOGIN_COOLOFF_MINUTES", 15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
SPECREG_LOGIN_FAILURES_PER_ADDRESS_PER_MINUTE = envint("SPECREG_LOGIN_FAILURES_PER_ADDRESS_PER_MINUTE", 30)
AXES_RESET_ON_SUCCESS = True
AXES_CLIENT_IP_CALLABLE = "registry.access.client.client_ip"
# Proxies whose X-Forwarded-For is believed (comma-separated addresses); from anyone else the
# header is ignored, so a client cannot choose the address it is counted under.
SPECREG_TRUSTED_PROXIES = [a.strip() for a in os.environ.get("SPECREG_TRUSTED_PROXIES", "").split(",") if a.strip()]

# No inline script or style anywhere; everything comes from this site.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "frame-ancestors": ["'none'"],
        "form-action": ["'self'"],
    }
}

# Private installations (models from private or gated repositories): nothing without signing in.
SPECREG_LOGIN_REQUIRED = envbool("SPECREG_LOGIN_REQUIRED", "False")

# Behind HTTPS (SPECREG_HTTPS=1): redirect to it, secure cookies, HSTS; `check --deploy` is clean.
if envbool("SPECREG_HTTPS", "False"):
    SECURE_SSL_REDIRECT = True
    SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = envint("SPECREG_HSTS_SECONDS", 365 * 24 * 3600)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    if envbool("SPECREG_BEHIND_PROXY", "False"):
        SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# --- The JSON API (Django REST Framework) --------------------------------------------------
# A team's tools send "Authorization: Token …" (knox: only the SHA-512 digest is stored); the browser
# keeps its session, with DRF's CSRF check on writes. Anonymous visitors read, never write: the
# views then apply the site's own rules (registry.access.policy, notes.may_write, deployments.may_set_url…).
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "knox.auth.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticatedOrReadOnly"],
    # JSON only: the browsable API's pages carry inline script, which the CSP above forbids.
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    # JSON with a nesting limit (registry.access.json_limits): a deeply nested body is a 400, not a RecursionError.
    "DEFAULT_PARSER_CLASSES": ["registry.access.json_limits.BoundedJSONParser", "rest_framework.parsers.FormParser"],
    "EXCEPTION_HANDLER": "registry.access.json_limits.api_exception_handler",
    "DEFAULT_SCHEMA_CLASS": "registry.web.api_schema.OpenReadsSchema",  # no padlock on anonymous reads
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
KNOX_TOKEN_MODEL = "knox.AuthToken"  # noqa: S105 - a model name, not a secret; knox's own model (its migrations read this setting)
REST_KNOX = {
    "TOKEN_TTL": None,  # each token's expiry is chosen on the token page (registry.apitokens)
    "TOKEN_PREFIX": "specreg_",  # recognisable in a CI secret store or a leaked log
    "AUTH_HEADER_PREFIX": "Token",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "specreg API",
    "DESCRIPTION": "Draft/target pairs for llama.cpp speculative decoding: read anonymously, write with a token "
    "(Authorization: Token …) made on /accounts/tokens/.",
    "VERSION": "1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI and Redoc from the drf-spectacular-sidecar package: machines may be offline.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
}

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = DATA_DIR / "static"
STATIC_ROOT.mkdir(exist_ok=True)
# Serve straight from the apps' static/ folders too, so pages work before collectstatic.
WHITENOISE_USE_FINDERS = True
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "home"

# --- Celery -------------------------------------------------------------------------------
# The embedded broker is kombu's filesystem transport: queues are folders under DATA_DIR,
# shared by the web server and workers on the same machine, no server needed.
BROKER_DIR = DATA_DIR / "broker"
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "filesystem://localhost/")
CELERY_BROKER_TRANSPORT_OPTIONS: dict = {}
if CELERY_BROKER_URL.startswith("filesystem:"):
    for sub in ("in", "processed", "control"):
        (BROKER_DIR / sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(BROKER_DIR / "in"),
        "data_folder_out": str(BROKER_DIR / "in"),
        "processed_folder": str(BROKER_DIR / "processed"),
        "control_folder": str(BROKER_DIR / "control"),
        "store_processed": False,
    }
CELERY_TASK_IGNORE_RESULT = True  # results live in the database, not in a result backend
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_TIME_LIMIT = envint("CELERY_TASK_TIME_LIMIT", 6 * 3600)
# A prefix keeps several installations (or CI runs) sharing one broker apart.
SPECREG_QUEUE_PREFIX = os.environ.get("SPECREG_QUEUE_PREFIX", "")
CELERY_TASK_DEFAULT_QUEUE = f"{SPECREG_QUEUE_PREFIX}specreg"
CELERY_TASK_ALWAYS_EAGER = envbool("CELERY_TASK_ALWAYS_EAGER", "False")
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_BEAT_SCHEDULE = {
    # Fails runs whose worker died, so nothing stays "running" forever on any broker.
    "sweep-stale-runs": {"task": "runner.tasks.sweep_stale_runs", "schedule": 60.0},
}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True

# --- specreg ------------------------------------------------------------------------------
# Header bytes we are willing to read from any GGUF source before giving up.
SPECREG_MAX_HEADER_BYTES = envint("SPECREG_MAX_HEADER_BYTES", 256 * 1024 * 1024)
# Visitors who may not use the server's token (anonymous ones above all) read smaller headers: enough
# for every common vocabulary (Gemma 4's 262k tokens: 15.8 MB), not for 256 MiB of someone's choosing.
SPECREG_PUBLIC_MAX_HEADER_BYTES = envint("SPECREG_PUBLIC_MAX_HEADER_BYTES", 16 * 1024 * 1024)
# The end of one Hub job (an import of a whole repository or of the curated list, a draft search, a queued
# check) and of `import_hf`: every Hub read it makes stops there, each header read within its own
# SPECREG_HEADER_DEADLINE_SECONDS too. 15 minutes imports dozens of files from a slow Hub.
SPECREG_HUB_JOB_DEADLINE_SECONDS = envint("SPECREG_HUB_JOB_DEADLINE_SECONDS", 15 * 60)
# Checks and header reads per minute (/check/, /api/check, /local/inspect), counted in the database so
# that every web process shares them: per client address for anonymous visitors, per user otherwise.
SPECREG_ANON_CHECKS_PER_MINUTE = envint("SPECREG_ANON_CHECKS_PER_MINUTE", 20)
SPECREG_USER_CHECKS_PER_MINUTE = envint("SPECREG_USER_CHECKS_PER_MINUTE", 120)
# Anonymous header uploads to /local/inspect, per client address: each is parsed in a web process, so
# besides the checks above they are limited in number and weighed (429 past either limit).
SPECREG_UPLOADS_PER_MINUTE = envint("SPECREG_UPLOADS_PER_MINUTE", 10)
SPECREG_UPLOAD_BYTES_PER_HOUR = envint("SPECREG_UPLOAD_BYTES_PER_HOUR", 256 * 1024 * 1024)
SPECREG_MODEL_DIR = Path(os.environ.get("SPECREG_MODEL_DIR", DATA_DIR / "models"))
SPECREG_DISK_BUDGET_BYTES = envint("SPECREG_DISK_BUDGET_BYTES", 100 * 1024**3)
# What one account's jobs may keep in the model folder (adapted drafts, downloads they brought in), so that no one
# user fills the budget for everyone; staff and the command line are held by the budget alone.
SPECREG_USER_QUOTA_BYTES = envint("SPECREG_USER_QUOTA_BYTES", SPECREG_DISK_BUDGET_BYTES // 4)
# expire_model_files: files of the model folder nothing refers to go after this many days unused.
SPECREG_MODEL_FILE_EXPIRY_DAYS = envint("SPECREG_MODEL_FILE_EXPIRY_DAYS", 30)
LLAMA_CPP_BIN_DIR = os.environ.get("LLAMA_CPP_BIN_DIR", "")
# Rendered table pages and counts are kept this long (0: off). Writes drop them at once in the
# writing process; others catch up within the TTL unless CACHE_URL names a shared Redis.
SPECREG_TABLE_CACHE_SECONDS = envint("SPECREG_TABLE_CACHE_SECONDS", 10)
# Functions named by dotted path (registry.hooks): code a lower layer calls without importing the layer above it.
# The pair's full llama.cpp check where none is stored (Pair.result): the catalog's, above the models.
SPECREG_PAIR_FULL_CHECK = os.environ.get("SPECREG_PAIR_FULL_CHECK", "registry.catalog.pairing.full_check")
# Conditions adding pairs to the table's search (each takes the search text, returns a Q or None): the team's notes.
_SEARCH_HOOKS = os.environ.get("SPECREG_TABLE_SEARCH_HOOKS", "registry.team.notes.note_search_q")
SPECREG_TABLE_SEARCH_HOOKS = [p.strip() for p in _SEARCH_HOOKS.split(",") if p.strip()]
# The N of M draft quants of the table's partial rows (stored nowhere: counted per page from the per-class rows).
SPECREG_TABLE_QUANT_COUNTS = os.environ.get(
    "SPECREG_TABLE_QUANT_COUNTS", "registry.catalog.combinations.compatible_quants"
)
# Limits on what one user may ask the benchmark machines for. The process cap counts every
# llama.cpp process a run may start (plain and speculative runs, K extension included); the
# default admits the default benchmark and refuses requests far beyond it.
SPECREG_MAX_ACTIVE_RUNS_PER_USER = envint("SPECREG_MAX_ACTIVE_RUNS_PER_USER", 3)
# run_benchmark --wait: how long a worker that is starting up gets to show itself before "no worker listens".
SPECREG_NO_WORKER_AFTER_SECONDS = envint("SPECREG_NO_WORKER_AFTER_SECONDS", 10)
SPECREG_MAX_PROCESSES_PER_RUN = envint("SPECREG_MAX_PROCESSES_PER_RUN", 4000)
# Concurrent clients a benchmark or a soak may send at once (runner.measure.load, runner.soak), and the soak's
# bounds: its longest duration, the memory growth and error share that stop it early, and how long one request may take.
SPECREG_MAX_CLIENTS = envint("SPECREG_MAX_CLIENTS", 16)
SPECREG_SOAK_MAX_HOURS = float(os.environ.get("SPECREG_SOAK_MAX_HOURS") or 24)
SPECREG_SOAK_MAX_HOURS_USER = float(os.environ.get("SPECREG_SOAK_MAX_HOURS_USER") or 8)  # non-staff accounts
SPECREG_SOAK_MEMORY_GROWTH = float(os.environ.get("SPECREG_SOAK_MEMORY_GROWTH") or 0.5)
SPECREG_SOAK_ERROR_SHARE = float(os.environ.get("SPECREG_SOAK_ERROR_SHARE") or 0.05)
SPECREG_SOAK_REQUEST_TIMEOUT_S = envint("SPECREG_SOAK_REQUEST_TIMEOUT_S", 300)
# Hub jobs (imports, draft searches, queued checks): active ones per user, and queued ones in all.
SPECREG_MAX_ACTIVE_JOBS_PER_USER = envint("SPECREG_MAX_ACTIVE_JOBS_PER_USER", 5)
SPECREG_MAX_QUEUED_JOBS = envint("SPECREG_MAX_QUEUED_JOBS", 500)
# A run still queued this long, with no worker listening on its queue, is failed by the sweep.
SPECREG_QUEUED_TIMEOUT_HOURS = envint("SPECREG_QUEUED_TIMEOUT_HOURS", 24)
# Production telemetry (registry.team.telemetry): how often the beat scrapes every active deployment
# with a URL, and the bounds of one scrape (a slow or huge /metrics answer is a gap, not a hang).
SPECREG_TELEMETRY_INTERVAL_SECONDS = envint("SPECREG_TELEMETRY_INTERVAL_SECONDS", 300)
SPECREG_TELEMETRY_TIMEOUT_SECONDS = envint("SPECREG_TELEMETRY_TIMEOUT_SECONDS", 5)
SPECREG_TELEMETRY_MAX_BYTES = envint("SPECREG_TELEMETRY_MAX_BYTES", 1024 * 1024)
# Beside the sweep, in the one beat schedule (serve's worker runs --beat; see docs/deployment.md).
CELERY_BEAT_SCHEDULE["scrape-deployments"] = {
    "task": "runner.tasks.scrape_deployments",
    "schedule": float(max(10, SPECREG_TELEMETRY_INTERVAL_SECONDS)),
}
# Who listens on a queue (a dotted path to a function of the queue name): the runner records its workers'
# heartbeats. The registry reaches the runner only through this setting; empty means "unknown".
SPECREG_WORKERS_ON = os.environ.get("SPECREG_WORKERS_ON", "runner.models.workers_on")
# Scrapes have a queue of their own (registry.queues.telemetry_queue; serve gives it a worker), so a /metrics server
# that answers slowly never delays a queued check or Hub job on the general queue.
CELERY_TASK_ROUTES = {
    name: {"queue": f"{SPECREG_QUEUE_PREFIX}telemetry"}
    for name in ("runner.tasks.scrape_deployments", "runner.tasks.scrape_deployment")
}
# Crawls of the Hub (import_hf --author/--search) have a queue of their own and a worker that waits on sockets
# with SPECREG_CRAWL_CONCURRENCY threads (serve starts it), so a crawl of thousands of repositories never holds up
# a queued check or import on the general queue.
CELERY_TASK_ROUTES.update(
    {
        name: {"queue": f"{SPECREG_QUEUE_PREFIX}crawl"}
        for name in ("registry.tasks.crawl_list", "registry.tasks.crawl_repo")
    }
)
SPECREG_CRAWL_CONCURRENCY = envint("SPECREG_CRAWL_CONCURRENCY", 4)
# Pairs worth a row per target base model (registry.catalog.listing): its smallest compatible drafts of at most half
# its size, and its smallest incompatible near-misses; every other compatible base model is answered from classes.
SPECREG_LISTED_DRAFTS = envint("SPECREG_LISTED_DRAFTS", 16)
SPECREG_LISTED_MISSES = envint("SPECREG_LISTED_MISSES", 4)
SPECREG_LISTED_MIN_RATIO = float(os.environ.get("SPECREG_LISTED_MIN_RATIO") or 2.0)
# Repositories read from one Hub host at once, by all crawl workers together (rows of HostSlot).
SPECREG_CRAWL_PER_HOST = envint("SPECREG_CRAWL_PER_HOST", 4)
# The most repositories one crawl imports (a search for "gguf" would list the whole Hub), and crawls running at once.
SPECREG_CRAWL_MAX_REPOS = envint("SPECREG_CRAWL_MAX_REPOS", 20_000)
SPECREG_MAX_ACTIVE_CRAWLS = envint("SPECREG_MAX_ACTIVE_CRAWLS", 2)
# How long a repository (or a listing) a crawl worker took stays taken without news; 0: twice
# SPECREG_HEADER_DEADLINE_SECONDS and 30 s. After a worker is killed, its work is taken up once this has passed.
SPECREG_CRAWL_LEASE_SECONDS = envint("SPECREG_CRAWL_LEASE_SECONDS", 0)
# A crawl step (a listing, or one repository) whose worker keeps dying before it ends (killed, out of memory) is given
# up after this many attempts, instead of being handed out again at every sweep and holding its crawl's place.
SPECREG_CRAWL_STEP_ATTEMPTS = envint("SPECREG_CRAWL_STEP_ATTEMPTS", 3)
# Takes up the repositories (and listings) of crawls whose worker was killed, once their lease has run out.
CELERY_BEAT_SCHEDULE["sweep-crawls"] = {"task": "registry.tasks.sweep_crawls", "schedule": 60.0}
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": os.environ["CACHE_URL"]}
    if os.environ.get("CACHE_URL")
    else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"stderr": {"class": "logging.StreamHandler", "stream": "ext://sys.stderr"}},
    "root": {"handlers": ["stderr"], "level": os.environ.get("LOG_LEVEL", "WARNING")},
}
