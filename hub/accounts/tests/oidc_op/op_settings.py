"""A real OpenID Connect provider for the hub's single sign-on tests: django-oauth-toolkit, as a tiny Django
project of its own (hub/accounts/tests/oidc_provider.py starts it on loopback). Nothing here is the hub's."""

import os
from pathlib import Path

HERE = Path(__file__).resolve().parent
SECRET_KEY = "oidc-test-provider-only"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "oauth2_provider",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]
ROOT_URLCONF = "op_urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [HERE / "templates"],
        "OPTIONS": {"context_processors": ["django.template.context_processors.request"]},
    }
]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.environ["OP_DB"]}}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
LOGIN_URL = "/login/"
# Cookies are per host, not per port: a browser holding the hub's (127.0.0.1, another port) keeps both apart.
SESSION_COOKIE_NAME = "op_sessionid"
CSRF_COOKIE_NAME = "op_csrftoken"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
OAUTH2_PROVIDER = {
    "OIDC_ENABLED": True,
    "OIDC_RSA_PRIVATE_KEY": Path(os.environ["OP_KEY"]).read_text(),
    "PKCE_REQUIRED": True,
    "SCOPES": {"openid": "OpenID Connect", "profile": "Profile", "email": "Email", "groups": "Groups"},
    "OAUTH2_VALIDATOR_CLASS": "op_validator.Validator",
}
