"""The system checks say what a sign-in configuration lacks (accounts.E1xx), at start-up, clearly."""

from __future__ import annotations

import pytest

from hub.accounts.checks import check_signin_config


def _ids(settings, **values):
    for name, value in values.items():
        setattr(settings, name, value)
    return {message.id: message.msg for message in check_signin_config()}


@pytest.fixture
def clean(settings):
    for name in ("HUB_OIDC_ISSUER", "HUB_OIDC_AUTHORIZATION_ENDPOINT", "HUB_OIDC_TOKEN_ENDPOINT", "HUB_OIDC_USERINFO_ENDPOINT",
                 "HUB_OIDC_JWKS_ENDPOINT", "HUB_OIDC_CLIENT_ID", "HUB_OIDC_CLIENT_SECRET", "HUB_OIDC_ROLE_MAP",
                 "HUB_OIDC_DEFAULT_ROLE", "HUB_TRUSTED_HEADER", "HUB_TRUSTED_HEADER_CREATE"):  # fmt: skip
        setattr(settings, name, "")
    settings.HUB_LOCAL_SIGNIN = True
    settings.HUB_TRUSTED_PROXIES = []
    return settings


def test_the_defaults_are_fine(clean):
    assert _ids(clean) == {}


def test_a_complete_oidc_configuration_is_fine_by_issuer_or_by_endpoints(clean):
    assert (
        _ids(clean, HUB_OIDC_CLIENT_ID="hub", HUB_OIDC_CLIENT_SECRET="s", HUB_OIDC_ISSUER="https://auth.lan")
        == {}
    )
    clean.HUB_OIDC_ISSUER = ""
    endpoints = {
        f"HUB_OIDC_{n}_ENDPOINT": f"https://auth.lan/{n}"
        for n in ("AUTHORIZATION", "TOKEN", "USERINFO", "JWKS")
    }
    assert _ids(clean, **endpoints) == {}


@pytest.mark.parametrize(
    ("values", "check_id", "says"),
    [
        ({"HUB_OIDC_ROLE_MAP": "admins=boss"}, "accounts.E101", "'boss' is not a role"),
        ({"HUB_OIDC_ROLE_MAP": "admins"}, "accounts.E101", "is not VALUE=ROLE"),
        ({"HUB_OIDC_DEFAULT_ROLE": "owner"}, "accounts.E102", "HUB_OIDC_DEFAULT_ROLE='owner'"),
        ({"HUB_TRUSTED_HEADER_CREATE": "yes"}, "accounts.E102", "HUB_TRUSTED_HEADER_CREATE='yes'"),
        ({"HUB_OIDC_CLIENT_ID": "hub", "HUB_OIDC_ISSUER": "https://a.lan"}, "accounts.E103", "HUB_OIDC_CLIENT_SECRET is not"),
        ({"HUB_OIDC_CLIENT_ID": "hub", "HUB_OIDC_CLIENT_SECRET": "s"}, "accounts.E104", "set HUB_OIDC_ISSUER"),
        ({"HUB_OIDC_CLIENT_ID": "h", "HUB_OIDC_CLIENT_SECRET": "s", "HUB_OIDC_ISSUER": "auth.lan"}, "accounts.E105", "http(s) URL"),
        ({"HUB_OIDC_ISSUER": "https://a.lan"}, "accounts.E106", "HUB_OIDC_CLIENT_ID is not"),
        ({"HUB_TRUSTED_HEADER": "Remote-User"}, "accounts.E107", "HUB_TRUSTED_PROXIES is not"),
        ({"HUB_LOCAL_SIGNIN": False}, "accounts.E108", "nobody could sign in"),
    ],
)  # fmt: skip
def test_a_bad_configuration_is_named(clean, values, check_id, says):
    found = _ids(clean, **values)
    assert check_id in found and says in found[check_id], found


def test_the_secret_is_never_in_a_message(clean):
    found = _ids(
        clean, HUB_OIDC_CLIENT_ID="hub", HUB_OIDC_CLIENT_SECRET="very-secret-value", HUB_OIDC_ISSUER="nope"
    )
    assert found and not any("very-secret-value" in msg for msg in found.values())


def test_manage_py_check_stops_on_them(clean):
    from django.core.management import call_command
    from django.core.management.base import SystemCheckError

    clean.HUB_TRUSTED_HEADER = "Remote-User"
    with pytest.raises(SystemCheckError, match="accounts.E107"):
        call_command("check")
