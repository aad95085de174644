"""Tiiny Hub settings. Everything that differs between machines comes from the environment.

See README.md ("Configuration") for the table of variables.
"""

from __future__ import annotations

import datetime as _dt
import os
from pathlib import Path

import dj_database_url
from redis import backoff as redis_backoff
from redis import exceptions as redis_exceptions
from redis.asyncio import retry as redis_retry

from hub import hostport as _hostport
from hub import media_storage as _media_storage
from hub import profile as _hub_profile
from hub.env import (
    SettingError,
    env_bool,
    env_choice,
    env_clock,
    env_float,
    env_int,
    env_list,
    env_networks,
    env_path,
    env_rate,
    env_str,
    env_time_zone,
    env_url,
    load_env_file,
)

BASE_DIR = Path(__file__).resolve().parent.parent
load_env_file(BASE_DIR / ".env")

DEBUG = env_bool("HUB_DEBUG", False)
# Tests and one-off commands may run without a generated key; a served hub never does (see hub.checks).
SECRET_KEY = env_str("HUB_SECRET_KEY", "insecure-dev-key-run-make-up" if DEBUG else None)
SECRET_KEY_FALLBACKS = env_list("HUB_SECRET_KEY_FALLBACKS", [])
ALLOWED_HOSTS = env_list("HUB_ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("HUB_CSRF_TRUSTED_ORIGINS", [])

HUB_HOST = env_str("HUB_HOST", "127.0.0.1")
HUB_PORT = env_int("HUB_PORT", 8000, minimum=1, maximum=65535)
DATA_DIR = env_path("HUB_DATA_DIR", BASE_DIR / "var")
MEDIA_ROOT = DATA_DIR / "media"
MEDIA_URL = "/media/"  # never served directly: results go through an authorizing view
TIME_ZONE = env_time_zone("HUB_TIME_ZONE", "UTC")
USE_TZ = True
LANGUAGE_CODE = "en-us"
USE_I18N = False

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "channels",
    "django_htmx",
    "template_partials",
    "ninja",  # serves /api/docs from its own static files (no CDN on a LAN)
    "axes",  # sign-in throttling: failed attempts per account and per address (see "Sign-in throttling")
    "csp",  # the Content-Security-Policy header (see "Security")
    "django_otp",  # two factors for local accounts (hub.accounts.two_factor)
    "django_otp.plugins.otp_totp",  # authenticator apps
    "django_otp.plugins.otp_static",  # recovery codes
    "hub",
    "hub.accounts",
    "devices",
    "jobs",
    "notify",  # notification channels and deliveries (notify/)
    "backups",  # backups and restore of the database and the result files (backups/)
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "hub.pagecache.ChangesMiddleware",  # a POST, PUT, PATCH or DELETE: pages kept so far are drawn again
    "hub.security.CSPMiddleware",  # django-csp's, plus this host's websocket address (connect-src)
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "hub.accounts.audit.AuditRequestMiddleware",  # the client address the audit log records for this request
    "hub.accounts.trusted_header.TrustedHeaderMiddleware",  # HUB_TRUSTED_HEADER from a trusted proxy signs in
    "hub.accounts.middleware.TimeZoneMiddleware",  # the person's own time zone (personal settings)
    "hub.accounts.middleware.MustChangePasswordMiddleware",  # a one-time password leads to the password page
    "hub.accounts.middleware.SecondFactorMiddleware",  # a password session without its code ends; HUB_ADMIN_2FA
    "hub.security.SecurityHeadersMiddleware",  # Permissions-Policy; private, no-store for signed-in pages
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "axes.middleware.AxesMiddleware",  # last: turns a locked-out sign-in into the lockout page
]

# Threads of each web process that run requests' synchronous work (hub.handlers.Lanes): requests served at once.
HUB_WEB_THREADS = env_int("HUB_WEB_THREADS", 8, minimum=1, maximum=64)

# How long a page drawn for a browser may be shown to it again while nothing changed (hub.pagecache); 0: never.
HUB_PAGE_CACHE_S = env_float("HUB_PAGE_CACHE_S", 5.0, minimum=0)

ROOT_URLCONF = "hub.urls"
ASGI_APPLICATION = "hub.asgi.application"
AUTH_USER_MODEL = "accounts.User"
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard"
LOGOUT_REDIRECT_URL = "login"

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
                "hub.context_processors.hub",
            ],
            # After Django's own: its ``{% url %}`` keeps what it reversed (hub.templatetags.hub_urls).
            "builtins": ["hub.templatetags.hub_urls"],
        },
    },
]

# --- Database -------------------------------------------------------------------------------------
# hub.webserver names itself (its pid) here for its workers: they pool their PostgreSQL connections (below).
WEB_SERVER_PROCESS = os.environ.get("HUB_WEB_SERVER_PROCESS", "")
DATABASE_URL = env_url("DATABASE_URL", None, schemes=("sqlite", "postgres", "postgresql"))
if DATABASE_URL:
    # No persistent PostgreSQL connections (CONN_MAX_AGE 0; the web server pools them, below). Under Django's own
    # ASGI handler each request ran in a thread of its own, so a kept connection was never reused and outlived its
    # thread until the garbage collector came: 20 clients on one web process held 99 connections (the server's
    # limit is 100). The hub's handler runs requests in lanes that live as long as the process (hub.handlers), so
    # on SQLite the web server keeps one connection a lane (below); everywhere else connections close at the end
    # of each request (or Celery task) and are as many as the requests at work.
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=0)}
    if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql" and WEB_SERVER_PROCESS:
        # Who is who in pg_stat_activity: the web server's connections carry its name and pid.
        DATABASES["default"]["OPTIONS"] = {"application_name": f"tiiny-hub web {WEB_SERVER_PROCESS}"}
        if _pool_size := env_int("HUB_DB_POOL", 8, minimum=0, maximum=100):
            # The web server's processes take PostgreSQL connections from a pool of their own: a request's
            # "close" at its end gives the connection back instead of ending a server process that PostgreSQL
            # forked for it (measured: 3.9 ms a request to connect, most of it the fork). Only there (hub.webserver
            # marks them): the worker and beat keep connect-per-use, their threads may end without closing and a
            # pooled connection not given back stays taken.
            DATABASES["default"]["OPTIONS"]["pool"] = {
                "min_size": 1,
                "max_size": _pool_size,
                "timeout": 20,
                "max_idle": 300,
            }
else:
    DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": DATA_DIR / "hub.sqlite3"}}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The web server, several workers and beat all write. WAL lets readers run beside the one writer;
    # IMMEDIATE transactions take the write lock up front (no upgrade deadlock -> "database is locked"),
    # and the busy timeout makes a writer wait its turn instead of failing.
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA busy_timeout=20000;",
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
    }
    # Tests share their database with a real worker and ASGI server in other processes: use a file.
    # (hub.pytest_env gives each test run its own file, so two runs on one machine never collide.)
    DATABASES["default"]["TEST"] = {"NAME": env_str("HUB_TEST_DB", str(DATA_DIR / "test-hub.sqlite3"))}
    if WEB_SERVER_PROCESS:
        # The web server runs requests in lanes, threads that live as long as it does (hub.handlers): each keeps
        # its connection from one request to the next instead of opening it (and its PRAGMAs) for every request.
        DATABASES["default"]["CONN_MAX_AGE"] = None
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Redis: broker, channel layer, cache --------------------------------------------------------------
REDIS_URL = env_url("REDIS_URL", "redis://127.0.0.1:6379/0", schemes=("redis", "rediss", "unix"))
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        # redis-py 8 reads with a 5 s socket timeout by default, the same length as channels-redis's idle
        # blocking pop: every idle socket died on a 5 s beat. A longer read timeout still notices a dead Redis.
        # A command that meets a dead pooled connection (Redis restarted since) is sent again on a new one, up to
        # twice: without it, a websocket opened after a restart got a 500 on its handshake (its group_add).
        "CONFIG": {
            "hosts": [
                {
                    "address": REDIS_URL,
                    "socket_timeout": 15,
                    "socket_connect_timeout": 2,
                    "retry": redis_retry.Retry(redis_backoff.ExponentialBackoff(cap=0.5, base=0.05), 2),
                    "retry_on_error": [redis_exceptions.ConnectionError],
                }
            ],
            "capacity": 500,
            "expiry": 30,
            "prefix": "hub-ws:",
        },
    }
}
CACHES = {
    "default": {
        "BACKEND": "hub.cache.RedisCache",  # connections pooled per process, not per request
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": "hub",
        # (redis-py's synchronous pool checks a connection as it hands it out: one to a Redis restarted since is
        # made again, unlike the channel layer's asyncio pool above; hub/tests/test_channel_layer_redis_restart.py)
        # JSON, never pickle: a pickle read from Redis runs its writer's code (hub.cache.JsonSerializer).
        "OPTIONS": {
            "socket_connect_timeout": 1,
            "socket_timeout": 2,
            "serializer": "hub.cache.JsonSerializer",
        },
    }
}

CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = None  # tasks write their outcome to the database, nobody waits on results
CELERY_TASK_IGNORE_RESULT = True
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_TASK_SOFT_TIME_LIMIT = 120
CELERY_TASK_TIME_LIMIT = 180
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600}
CELERY_TIMEZONE = TIME_ZONE
CELERY_BEAT_SCHEDULE_FILENAME = str(DATA_DIR / "celerybeat-schedule")

# --- Static files -------------------------------------------------------------------------------------
STATIC_URL = "/static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
# After `collectstatic` (make up does it) files are served hashed and compressed from STATIC_ROOT;
# before it (tests, a quick `runserver`) WhiteNoise finds them in the source folders instead.
_COLLECTED = (STATIC_ROOT / "staticfiles.json").is_file()
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"
        if _COLLECTED and not DEBUG
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}
WHITENOISE_USE_FINDERS = DEBUG or not _COLLECTED
# --- Where files live (hub.media_storage): HUB_MEDIA_STORAGE unset or file: = MEDIA_ROOT as always; s3://bucket/prefix
# ?endpoint=...&region=... = an S3-compatible bucket (keys from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or their
# _FILE variables). Every result, input, thumbnail and preview goes through STORAGES["default"] (jobs.files.store).
HUB_MEDIA_STORE, STORAGES["default"] = _media_storage.from_env()
# Uploads (3D source images, start frames) are bounded; see jobs.kinds.forms for per-field limits.
# The web server refuses a larger body before reading any of it (hub.bodylimit): HUB_UPLOAD_MAX_MB on the routes
# that take files, for a person signed in or a live token; HUB_BODY_MAX_KB on every other route and for anyone else.
# 25 MB: the video form's two 10 MB images and its fields, or a 10 MB image as a base64 data URL in /v1's JSON.
HUB_UPLOAD_MAX_MB = env_int("HUB_UPLOAD_MAX_MB", 25, minimum=1, maximum=1024)
HUB_BODY_MAX_KB = env_int("HUB_BODY_MAX_KB", 1024, minimum=64, maximum=1024 * 1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = HUB_UPLOAD_MAX_MB * 1024 * 1024
FILE_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024
# Results, inputs and thumbnails are people's own: the owner's alone on disk (hub.atrest), whatever the umask of the
# process that saves them.
FILE_UPLOAD_PERMISSIONS = 0o600
FILE_UPLOAD_DIRECTORY_PERMISSIONS = 0o700
# Pictures are decoded within a budget (jobs.files.decoding): at most this many megapixels each, and this many at once
# in a process; both by default the profile's (hub.profile: small 16 MP one at a time, standard 40 MP two at a time).
_profile = _hub_profile.choose()
HUB_IMAGE_MAX_MP = env_int("HUB_IMAGE_MAX_MP", _profile.image_max_mp, minimum=1, maximum=80)
HUB_IMAGE_DECODES = env_int("HUB_IMAGE_DECODES", _profile.image_decodes, minimum=1, maximum=64)

# --- Security -------------------------------------------------------------------------------------------
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
# HUB_HTTPS=1 when the hub is served over HTTPS (usually behind a TLS reverse proxy that sets
# X-Forwarded-Proto). Plain HTTP on a home LAN is the default.
HUB_HTTPS = env_bool("HUB_HTTPS", False)
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = HUB_HTTPS
if HUB_HTTPS:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = True
    SECURE_REDIRECT_EXEMPT = [r"^healthz$"]  # probes often speak plain HTTP from inside
    SECURE_HSTS_SECONDS = env_int("HUB_HSTS_SECONDS", 3600, minimum=0)
# A hub lives on one host name of a household's own domain: HSTS preload and includeSubDomains would
# reach far beyond it, so they are deliberately off.
SILENCED_SYSTEM_CHECKS = ["security.W005", "security.W021"]

# Test runs (and the processes they start) hash with MD5 for speed; never set this on a real hub.
if env_bool("HUB_INSECURE_FAST_HASHER", False):
    PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# Run wherever a password is set through a form or command: the password page, the People page, the admin,
# `create_user`. (Services and tests that call set_password directly are not checked.) The cap: 128 is room
# for any passphrase or password manager; beyond it a "password" is a paste accident or an abuse.
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 10}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
    {"NAME": "hub.accounts.validators.MaximumLengthValidator", "OPTIONS": {"max_length": 128}},
]

# --- Sign-in throttling (django-axes): per account and per address --------------------------------------
# After HUB_SIGNIN_FAILURES failed sign-ins for one username (from anywhere), or HUB_SIGNIN_ADDRESS_FAILURES from
# one address (whatever usernames), that username (or address) is refused for HUB_SIGNIN_COOLOFF_MIN minutes, even
# with the right password; the login page says until when. A good sign-in clears only its own username's failures
# from its own address (hub.accounts.lockout has the rules). An admin unlocks a person earlier on the People page,
# or with `manage.py axes_reset_username NAME` / `axes_reset_ip ADDRESS`. HUB_SIGNIN_FAILURES=0 turns it off.
HUB_SIGNIN_FAILURES = env_int("HUB_SIGNIN_FAILURES", 5, minimum=0, maximum=1000)
# Higher than a username's: a household behind one NAT address must not be locked out by one person's typos.
HUB_SIGNIN_ADDRESS_FAILURES = max(
    env_int("HUB_SIGNIN_ADDRESS_FAILURES", 4 * max(HUB_SIGNIN_FAILURES, 1), minimum=1, maximum=10_000),
    max(HUB_SIGNIN_FAILURES, 1),
)
HUB_SIGNIN_COOLOFF_MIN = env_int("HUB_SIGNIN_COOLOFF_MIN", 15, minimum=1, maximum=7 * 24 * 60)
# The audit log (hub.accounts.audit: admin actions and security events) keeps this many days; a daily beat task prunes.
HUB_AUDIT_DAYS = env_int("HUB_AUDIT_DAYS", 365, minimum=1, maximum=100 * 365)
AUTHENTICATION_BACKENDS = [
    "hub.accounts.backends.SignInThrottleBackend",  # first: refuses a locked-out sign-in before the password
    "django.contrib.auth.backends.ModelBackend",
]
AXES_ENABLED = HUB_SIGNIN_FAILURES > 0
AXES_FAILURE_LIMIT = max(HUB_SIGNIN_FAILURES, 1)
AXES_COOLOFF_TIME = _dt.timedelta(minutes=HUB_SIGNIN_COOLOFF_MIN)
AXES_HANDLER = "hub.accounts.lockout.SignInLockoutHandler"  # the two limits, and what a good sign-in clears
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]  # either one reaching its limit locks
AXES_RESET_ON_SUCCESS = True  # a good sign-in forgets its own earlier typos (only those: see above)
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False  # "try again at 11:47" stays true while they retry
AXES_LOCKOUT_CALLABLE = "hub.accounts.views_signin.lockout_response"  # the login page with "try again at …"
AXES_HTTP_RESPONSE_CODE = 429
AXES_CLIENT_IP_CALLABLE = "hub.accounts.backends.signin_address"  # REMOTE_ADDR, never X-Forwarded-For
AXES_VERBOSE = False

# --- Signing in from outside the hub: OpenID Connect, a trusted proxy's header (hub.accounts.sso) ---------------
# OpenID Connect (mozilla-django-oidc): on when HUB_OIDC_CLIENT_ID is set. The provider is found from
# HUB_OIDC_ISSUER (its /.well-known/openid-configuration), or named endpoint by endpoint. The hub's redirect URI at
# the provider: <hub address>/oidc/callback/. Problems are reported by the system checks (accounts.E1xx).
HUB_OIDC_ISSUER = env_str("HUB_OIDC_ISSUER", "").rstrip("/")
HUB_OIDC_AUTHORIZATION_ENDPOINT = env_str("HUB_OIDC_AUTHORIZATION_ENDPOINT", "")
HUB_OIDC_TOKEN_ENDPOINT = env_str("HUB_OIDC_TOKEN_ENDPOINT", "")
HUB_OIDC_USERINFO_ENDPOINT = env_str("HUB_OIDC_USERINFO_ENDPOINT", "")
HUB_OIDC_JWKS_ENDPOINT = env_str("HUB_OIDC_JWKS_ENDPOINT", "")
HUB_OIDC_CLIENT_ID = env_str("HUB_OIDC_CLIENT_ID", "")
HUB_OIDC_CLIENT_SECRET = env_str("HUB_OIDC_CLIENT_SECRET", "")  # never logged nor shown
HUB_OIDC_NAME = env_str("HUB_OIDC_NAME", "single sign-on")  # the button: "Sign in with <name>"
HUB_OIDC_SCOPES = env_str("HUB_OIDC_SCOPES", "openid profile email groups")
HUB_OIDC_USERNAME_CLAIM = env_str("HUB_OIDC_USERNAME_CLAIM", "preferred_username")  # matched to hub usernames
# The claim whose values give roles, and which: "hub-admins=admin,family=member,guests=viewer" (strongest wins).
HUB_OIDC_ROLE_CLAIM = env_str("HUB_OIDC_ROLE_CLAIM", "groups")
HUB_OIDC_ROLE_MAP = env_str("HUB_OIDC_ROLE_MAP", "")
# The claim whose values name hub groups (issue 38): when set, a person signed in through the provider is in exactly
# the hub groups named there (matched by name, any case) after each sign-in. Empty (the default): groups stay the hub's.
HUB_OIDC_GROUPS_CLAIM = env_str("HUB_OIDC_GROUPS_CLAIM", "")
# Someone the hub doesn't know: created (with the mapped role, else HUB_OIDC_DEFAULT_ROLE; empty: only when mapped).
HUB_OIDC_CREATE_USERS = env_bool("HUB_OIDC_CREATE_USERS", True)
HUB_OIDC_DEFAULT_ROLE = env_str("HUB_OIDC_DEFAULT_ROLE", "")
# A reverse proxy that signs people in (Authelia, Authentik, oauth2-proxy) names them in this header, honoured only
# from HUB_TRUSTED_PROXIES (the connection's own address). A name the hub doesn't know gets no session unless
# HUB_TRUSTED_HEADER_CREATE names the role to create it with.
HUB_TRUSTED_HEADER = env_str("HUB_TRUSTED_HEADER", "")
HUB_TRUSTED_HEADER_CREATE = env_str("HUB_TRUSTED_HEADER_CREATE", "")
# Two factors (hub.accounts.two_factor): on, every admin who signs in with a password must use an authenticator
# app (one without is sent to set it up before anything else). Members and viewers may turn it on for themselves.
HUB_ADMIN_2FA = env_bool("HUB_ADMIN_2FA", False)
OTP_TOTP_ISSUER = env_str("HUB_2FA_ISSUER", "Tiiny Hub")  # the name authenticator apps show
# off: the sign-in page has no password form and passwords are refused (recover: docs/admin.md, "Single sign-on").
HUB_LOCAL_SIGNIN = env_bool("HUB_LOCAL_SIGNIN", True)
# mozilla-django-oidc's own settings (its client id, secret, scopes and endpoints: hub.accounts.oidc.oidc_setting).
OIDC_RP_SIGN_ALGO = env_str("HUB_OIDC_SIGN_ALGO", "RS256")
OIDC_USE_PKCE = True
OIDC_TIMEOUT = 10
OIDC_CREATE_USER = True  # hub.accounts.oidc decides, by HUB_OIDC_CREATE_USERS
OIDC_AUTHENTICATE_CLASS = "hub.accounts.oidc.SignInStart"
OIDC_CALLBACK_CLASS = "hub.accounts.oidc.SignInCallback"
# Passwords pass the gate (refused while HUB_LOCAL_SIGNIN is off), then Django's check. The two outside doors
# are always listed (their sessions stay valid when one is turned off and on again) and act only when configured.
AUTHENTICATION_BACKENDS.insert(1, "hub.accounts.backends.LocalSignInGate")
AUTHENTICATION_BACKENDS += [
    "hub.accounts.oidc.HubOIDCBackend",
    "hub.accounts.trusted_header.TrustedHeaderBackend",
]

# --- Content-Security-Policy (django-csp 4) and Permissions-Policy (hub.security) -------------------------
# Scripts come only from our own static files: no inline <script>, no on*= handlers, no eval. Styles allow
# 'unsafe-inline' because templates set a few style attributes (bar widths, aspect ratios) and htmx and
# model-viewer inject <style>; a style can't run code. The websocket goes to this host only: 'self' covers it in
# Chromium and Firefox, and each answer adds ws:// and wss:// of the host asked (hub.security.CSPMiddleware) for
# older Safari; never ws: or wss:, which let a script talk to any host. model-viewer decodes glTF in blob: workers
# and textures, and compiles its bundled meshopt decoder to WebAssembly: 'wasm-unsafe-eval' allows WebAssembly
# compilation only (still no eval() or new Function() of JavaScript, and no inline script).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'", "'wasm-unsafe-eval'"],
        "style-src": ["'self'", "'unsafe-inline'"],
        "img-src": ["'self'", "data:", "blob:"],
        "media-src": ["'self'", "blob:"],
        "font-src": ["'self'", "data:"],
        "connect-src": ["'self'", "blob:", "data:"],
        "worker-src": ["'self'", "blob:"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}

# --- /healthz: anyone learns "ok" or "failing"; admins and these addresses also get each check's detail ----
# IPs or CIDRs, comma-separated; "none" = admins only.
HUB_HEALTH_ALLOW = env_networks("HUB_HEALTH_ALLOW", ["127.0.0.1", "::1"])

# --- Behind a reverse proxy: the proxies whose X-Forwarded-For / X-Forwarded-Proto the web server believes ----
# IPs or CIDRs, comma-separated (e.g. 127.0.0.1 for nginx or Caddy on this machine). Empty (the default): the
# client's address is the connection's own and those headers are ignored, since anyone can write them. The web
# server (hub.webserver) reads the same variable; sign-in throttling then counts each person's own address.
HUB_TRUSTED_PROXIES = env_networks("HUB_TRUSTED_PROXIES", [], example="127.0.0.1 or 10.0.0.0/24")

# --- Logging: one line per event; device API keys never reach a log (see devices.crypto) ----------------
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "filters": {
        "no_due_task_lines": {"()": "hub.logfilters.DropDueTaskLines"},
        "mask_tokens": {
            "()": "hub.logfilters.MaskTokens"
        },  # share, invitation, reset and API tokens: never logged
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": "plain", "filters": ["mask_tokens"]}
    },
    "root": {"handlers": ["console"], "level": "INFO"},
    "loggers": {
        "django": {"level": "INFO"},
        "httpx": {"level": "WARNING"},
        "httpcore": {"level": "WARNING"},
        "axes": {"level": "WARNING"},  # failed sign-ins and lockouts; not a line for every good one
        # Celery's line for every task received, succeeded and sent by beat: the periodic sweeps run every few
        # seconds, ~30 MB a day of "succeeded in 0.01s" that would push a month of real lines out of the rotated logs
        "celery.app.trace": {"level": "WARNING"},
        "celery.worker.strategy": {"level": "WARNING"},
        "celery.beat": {
            "filters": ["no_due_task_lines"]
        },  # (its "beat: Starting" stays: supervisors wait for it)
    },
}
# Loggers to run at DEBUG, comma-separated (e.g. HUB_DEBUG_LOGGERS=jobs: the engine's step timings).
for _name in filter(None, (n.strip() for n in env_str("HUB_DEBUG_LOGGERS", "").split(","))):
    LOGGING["loggers"].setdefault(_name, {})["level"] = "DEBUG"

# The device the run command starts: "emulator" (the default) or "none".
HUB_DEVICE = env_str("HUB_DEVICE", "emulator")
if HUB_DEVICE not in ("emulator", "none"):
    raise SettingError(f"HUB_DEVICE={HUB_DEVICE!r} must be one of: emulator, none")

# --- Job engine (jobs/): intervals in real seconds; tests shorten them through the workers' environment -------
JOBS_POLL_INTERVAL_S = env_float(
    "JOBS_POLL_INTERVAL_S", 2.0, minimum=0.01
)  # poll a render this often while nothing says when it ends; errors back off from it
JOBS_POLL_MIN_S = env_float("JOBS_POLL_MIN_S", 0.15, minimum=0.01)  # poll this often near a render's end
JOBS_POLL_MAX_S = env_float("JOBS_POLL_MAX_S", 20.0, minimum=0.01)  # far from the end, or stalled: at most
JOBS_LEASE_TTL_S = env_float(
    "JOBS_LEASE_TTL_S", 90.0, minimum=0.01
)  # a dead worker's lease lapses after this
JOBS_DEVICE_POLL_S = env_float(
    "JOBS_DEVICE_POLL_S", 0.25, minimum=0.01
)  # client: poll `running` while a model loads (its end is noticed within this)
JOBS_LOAD_GRACE_S = env_float(
    "JOBS_LOAD_GRACE_S", 10.0, minimum=0.01
)  # client: the readiness window after a load (xh2a, 502), from the moment it is ready
JOBS_RECONCILE_S = env_float("JOBS_RECONCILE_S", 5.0, minimum=0.01)  # beat: how often reconcile repairs
JOBS_SENDFILE = env_choice("JOBS_SENDFILE", "", ("", "x-accel", "x-sendfile"))  # "" = Django streams the file
JOBS_SENDFILE_PREFIX = env_str("JOBS_SENDFILE_PREFIX", "/protected-media/")  # nginx internal location

# --- API tokens and rate limits (hub.accounts.tokens, hub.ratelimit) ----------------------------------------
# Submissions through /api/ and /v1/ per token (per person for a browser session): N/s, N/m or N/h; 0 = no limit.

HUB_API_SUBMIT_RATE = env_rate("HUB_API_SUBMIT_RATE", "30/m")
# Summaries under the new-job form (/jobs/new/admission/) per person: each one decodes the form's uploads. A page
# asks one at a time (htmx queues them), at most about one a second as a person types; 0 = no limit.
HUB_PREVIEW_RATE = env_rate("HUB_PREVIEW_RATE", "2/s")
# Password guesses on one share link (jobs.core.share_links), counted per link and per address: N/s, N/m or N/h.
HUB_SHARE_PASSWORD_RATE = env_rate("HUB_SHARE_PASSWORD_RATE", "5/m")

# --- Zips (jobs.files.zips): the most jobs one "Download all" / selection / album zip gathers ------------------
HUB_ZIP_MAX_JOBS = env_int("HUB_ZIP_MAX_JOBS", 1000, minimum=1, maximum=100000)

# --- Metrics (GET /metrics, Prometheus text format; hub.metrics) --------------------------------------------
# Client addresses (IPs or CIDRs) that may scrape without a token; anyone else needs an admin API token.
# "none" = tokens only. A request carrying X-Forwarded-For/Forwarded/X-Real-IP never passes by address alone.

HUB_METRICS_ALLOW = env_networks("HUB_METRICS_ALLOW", ["127.0.0.1", "::1"])
# The render-time histogram covers the jobs finished in this many days.
HUB_METRICS_RENDER_DAYS = env_int("HUB_METRICS_RENDER_DAYS", 30, minimum=1, maximum=3650)
# Deleted results wait this many days in the trash (restorable) before the daily task removes them for good.
HUB_TRASH_DAYS = env_int("HUB_TRASH_DAYS", 30, minimum=0, maximum=3650)
if HUB_HTTPS:  # a scraper on the inside speaks plain HTTP, like the /healthz probe
    SECURE_REDIRECT_EXEMPT = [*SECURE_REDIRECT_EXEMPT, r"^metrics$"]

# --- /v1: the OpenAI-compatible routes (jobs/v1.py) ----------------------------------------------------------
# images.generate and audio.speech.create wait inside the HTTP call for their turn and result, at most this long;
# then the answer is a 504 naming the job (it stays queued; fetch it from /api/jobs/<id>).
HUB_V1_WAIT_S = env_float("HUB_V1_WAIT_S", 900.0, minimum=1.0)

# --- The hub's public address (share links; jobs.queue.services.share_link_url) ------------------------------------
# e.g. https://hub.example.lan or http://192.168.1.20:8000. When set, read-only share links are built on it
# instead of the address the request came in on (127.0.0.1 on the hub's own machine, or a proxy's inside).
from urllib.parse import urlsplit as _urlsplit  # noqa: E402 - this block stays at the end of the file

HUB_PUBLIC_URL = (env_url("HUB_PUBLIC_URL", "", schemes=("http", "https")) or "").rstrip("/")
if HUB_PUBLIC_URL and not _urlsplit(HUB_PUBLIC_URL).netloc:
    raise SettingError(f"HUB_PUBLIC_URL={HUB_PUBLIC_URL!r} names no host (e.g. https://hub.example.lan)")

# --- Email (password resets by email; notifications) --------------------------------------------------------
# Unset, mail is printed to the console (nothing leaves the machine) and people reset passwords through an admin's
# one-time password. Set EMAIL_HOST (and usually EMAIL_HOST_USER/EMAIL_HOST_PASSWORD, EMAIL_USE_TLS) to send by
# SMTP; EMAIL_BACKEND names any other Django backend. Reset by email is offered when mail really leaves the hub.
EMAIL_HOST = env_str("EMAIL_HOST", "")
EMAIL_BACKEND = env_str(
    "EMAIL_BACKEND",
    "django.core.mail.backends.smtp.EmailBackend"
    if EMAIL_HOST
    else "django.core.mail.backends.console.EmailBackend",
)
EMAIL_PORT = env_int("EMAIL_PORT", 587 if env_bool("EMAIL_USE_TLS", False) else 25, minimum=1, maximum=65535)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_USE_SSL = env_bool("EMAIL_USE_SSL", False)
if EMAIL_USE_TLS and EMAIL_USE_SSL:
    raise SettingError(
        "EMAIL_USE_TLS and EMAIL_USE_SSL are exclusive: STARTTLS (usually port 587) or SSL (465)"
    )
EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT", 10, minimum=1, maximum=300)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "Tiiny Hub <hub@localhost>")
SERVER_EMAIL = DEFAULT_FROM_EMAIL
PASSWORD_RESET_TIMEOUT = env_int("HUB_PASSWORD_RESET_HOURS", 24, minimum=1, maximum=7 * 24) * 3600

# --- Notifications (notify/; mail goes through the EMAIL_* settings above) -------------------------------------
# A failed delivery is tried again after each of these delays (seconds); then it is recorded as failed.
_delays = env_list("NOTIFY_RETRY_DELAYS_S", ["10", "60", "300"])
try:
    NOTIFY_RETRY_DELAYS_S = [max(float(x), 0.0) for x in _delays]
except ValueError:
    raise SettingError("NOTIFY_RETRY_DELAYS_S: seconds, comma-separated (e.g. 10,60,300)") from None
# A job's news that the hand-over after its commit did not prepare within this (its process died) is the sweep's.
NOTIFY_NOTICE_GRACE_S = env_float("NOTIFY_NOTICE_GRACE_S", 30.0, minimum=0.0)
# A delivery left "sending" this long (its worker died mid-send) is sent again, under the same delivery id; one left
# pending this long past its last retry's delay has lost its task and is queued again (beat's sweep).
NOTIFY_CLAIM_STALE_S = env_float("NOTIFY_CLAIM_STALE_S", 300.0, minimum=1.0)
NOTIFY_SWEEP_AFTER_S = env_float("NOTIFY_SWEEP_AFTER_S", 120.0, minimum=0.0)
NOTIFY_TIMEOUT_S = env_float("NOTIFY_TIMEOUT_S", 10.0, minimum=0.1)  # one webhook/Apprise/push call at most
# Private hosts every channel may reach (host or host:port, comma-separated: the household's Home Assistant, a LAN
# ntfy). Any other target on this machine or the private network is refused (notify.targets); admins add more on
# the Private hosts page.
HUB_NOTIFY_PRIVATE_HOSTS = env_list("HUB_NOTIFY_PRIVATE_HOSTS", [])
for _entry in HUB_NOTIFY_PRIVATE_HOSTS:
    try:
        _hostport.parse_entry(_entry)
    except ValueError:
        raise SettingError(
            f"HUB_NOTIFY_PRIVATE_HOSTS: {_entry!r} is not a host or host:port (e.g. ha.lan:8123,192.168.1.20)"
        ) from None
# Web Push (VAPID): `make up` writes the private key to .env once; without one, the hub makes one on first use and
# keeps it in the data dir (vapid-private.key). The contact ("sub") push services may write to about abuse.
NOTIFY_VAPID_PRIVATE_KEY = env_str("HUB_VAPID_PRIVATE_KEY", "")
NOTIFY_VAPID_SUBJECT = env_str("HUB_VAPID_SUBJECT", "mailto:admin@localhost")
# Apprise logs through its own logger, and its lines may name a channel's URL (tokens included) or repeat what the
# far end answered: they never reach the hub's log, nor a delivery's reason.
LOGGING["loggers"]["apprise"] = {"level": "WARNING", "handlers": [], "propagate": False}

# --- Backups (backups/; manage.py backup / restore) ------------------------------------------------------------
# Set HUB_BACKUP_DIR and beat takes a backup every day at HUB_BACKUP_AT (the household's time zone), keeping the
# newest HUB_BACKUP_KEEP there. The default time is in the afternoon, outside any device's night window (23:00-07:00
# by default): renders queued for tonight run, and write their results, at night, and a failed backup is told to
# the household channels while people are awake to act on it. Unset, no backup is taken unless by hand.
HUB_BACKUP_DIR = env_str("HUB_BACKUP_DIR", "")
HUB_BACKUP_KEEP = env_int("HUB_BACKUP_KEEP", 14, minimum=1, maximum=10000)

HUB_BACKUP_AT = env_clock("HUB_BACKUP_AT", "13:30")  # (hour, minute)

# --- A full disk (hub.disk): free space under the data folder -------------------------------------------------
# Below this many MB free under MEDIA_ROOT (results, uploads), new renders are refused at admission and the health
# page's disk check fails; 0 turns both off. A result download that finds the disk full waits for space and tries
# again every JOBS_DISK_RETRY_S seconds (the device keeps the result meanwhile).
HUB_MIN_FREE_MB = env_int("HUB_MIN_FREE_MB", 500, minimum=0)
JOBS_DISK_RETRY_S = env_float("JOBS_DISK_RETRY_S", 60.0, minimum=0.01)
# The pool (jobs.queue.pool): a render in flight on a device that has been away this long is given up and its job
# ("any device") re-queued to the others. Until then the device may come back and finish it.
JOBS_DEVICE_LOST_S = env_float("JOBS_DEVICE_LOST_S", 600.0, minimum=0.01)
