"""System checks for signing in from outside (``accounts.E1xx``): what hub.accounts.sso.problems finds in the
HUB_OIDC_*, HUB_TRUSTED_HEADER* and HUB_LOCAL_SIGNIN settings, said at start-up rather than at someone's sign-in."""

from __future__ import annotations

from django.core import checks

from hub.accounts.sso import problems


def check_signin_config(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    return [checks.Error(message, id=check_id) for check_id, message in problems()]
