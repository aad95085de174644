"""Sign-in from outside the hub: OpenID Connect (hub.accounts.oidc) and a trusted proxy's header
(hub.accounts.trusted_header). The rules they share live here: which claim values give which role, who is
created, and what a configuration lacks (``problems``, reported by the system checks, hub.accounts.checks).
"""

from __future__ import annotations

import ipaddress

from django.conf import settings

from hub.accounts import audit
from hub.accounts.groups import forget_allowance
from hub.accounts.models import User, UserGroup
from hub.accounts.services import user_create_or_update

#: Strongest first: a person whose claim names several mapped values gets the strongest role.
_ROLE_ORDER = (User.Role.ADMIN, User.Role.MEMBER, User.Role.VIEWER)


class SignInRefused(Exception):
    """An outside sign-in the hub's rules refuse; the message is the person's."""


def oidc_enabled() -> bool:
    return bool(getattr(settings, "HUB_OIDC_CLIENT_ID", ""))


def local_signin_enabled() -> bool:
    return getattr(settings, "HUB_LOCAL_SIGNIN", True)


def parse_role_map(text: str) -> dict[str, str]:
    """``"hub-admins=admin,family=member,guests=viewer"`` -> {claim value: role}. ValueError says what's wrong."""
    mapping: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        value, sep, role = item.rpartition("=")
        value, role = value.strip(), role.strip()
        if not sep or not value:
            raise ValueError(f"{item!r} is not VALUE=ROLE (e.g. hub-admins=admin)")
        if role not in User.Role.values:
            raise ValueError(f"{item!r}: {role!r} is not a role (admin, member or viewer)")
        mapping[value] = role
    return mapping


def claim_values(claims: dict, name: str) -> list[str]:
    """A claim's values: a string, or a list of strings (Authelia, Keycloak and Authentik send ``groups`` as one)."""
    raw = claims.get(name)
    return [raw] if isinstance(raw, str) else [v for v in raw or [] if isinstance(v, str)]


def role_from_claims(claims: dict) -> str | None:
    """The strongest role HUB_OIDC_ROLE_MAP gives one of the values of the HUB_OIDC_ROLE_CLAIM claim, or None.

    The claim may be a string or a list of strings (Authelia, Keycloak and Authentik send ``groups`` as a list).
    """
    mapping = parse_role_map(settings.HUB_OIDC_ROLE_MAP)
    values = claim_values(claims, settings.HUB_OIDC_ROLE_CLAIM)
    roles = {mapping[v] for v in values if v in mapping}
    return next((role for role in _ROLE_ORDER if role in roles), None)


def claim_groups_hook(user: User, claims: dict) -> None:
    """After an OpenID Connect sign-in: with ``HUB_OIDC_GROUPS_CLAIM`` set, the person is in exactly the hub groups
    its values name (by name, any case; a value naming no hub group is left alone, an empty claim takes them out of
    every group). Unset, the hub's groups are the admins' to manage."""
    claim = settings.HUB_OIDC_GROUPS_CLAIM
    if not claim:
        return
    values = claim_values(claims, claim)
    wanted = {v.strip().casefold() for v in values}
    now = {group.pk for group in user.usage_groups.all()}
    named = {group.pk for group in UserGroup.objects.all() if group.name.casefold() in wanted}
    if now == named:
        return
    user.usage_groups.set(named)
    forget_allowance(user)
    audit.record(
        audit.Action.GROUP_MEMBER_ADDED if named - now else audit.Action.GROUP_MEMBER_REMOVED,
        target=user,
        detail="groups from the identity provider",
        data={"groups": sorted(UserGroup.objects.filter(pk__in=named).values_list("name", flat=True))},
    )


def sign_in_outside(*, username: str, role: str | None, create: bool, default_role: str | None) -> User:
    """The person an outside sign-in names, matched by username, made to follow its rules:

    - a known, active person: their role follows ``role`` when it maps one (else stays);
    - a deactivated person: refused (an admin turned them off here; the provider can't turn them on);
    - unknown: created with ``role`` or else ``default_role`` when ``create``; refused otherwise.
    """
    username = (username or "").strip()
    if not username or len(username) > 150:
        raise SignInRefused("The identity provider sent no usable username.")
    user = User.objects.filter(username=username).first()
    if user is not None:
        if not user.is_active:
            raise SignInRefused(f"The account {username} is deactivated on this hub.")
        if role and role != user.role:
            user = user_create_or_update(username=username, role=role).user
        return user
    new_role = role or default_role
    if not create or not new_role:
        raise SignInRefused(f"This hub has no account {username}; ask the person who runs it to add you.")
    user = user_create_or_update(username=username, role=new_role).user
    user.set_unusable_password()  # signs in through the provider only, until an admin gives them a password
    user.save(update_fields=["password"])
    return user


def peer_trusted(address: str | None) -> bool:
    """Is this direct peer (the connection's own address, never a forwarded one) one of HUB_TRUSTED_PROXIES?"""
    if not address:
        return False
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in ipaddress.ip_network(net, strict=False) for net in settings.HUB_TRUSTED_PROXIES)


def problems() -> list[tuple[str, str]]:
    """What the sign-in configuration lacks, as (check id, message); the system checks report them."""
    found: list[tuple[str, str]] = []
    try:
        parse_role_map(settings.HUB_OIDC_ROLE_MAP)
    except ValueError as exc:
        found.append(("accounts.E101", f"HUB_OIDC_ROLE_MAP: {exc}."))
    for name in ("HUB_OIDC_DEFAULT_ROLE", "HUB_TRUSTED_HEADER_CREATE"):
        value = getattr(settings, name)
        if value and value not in User.Role.values:
            found.append(
                (
                    "accounts.E102",
                    f"{name}={value!r} must be admin, member, viewer or empty (no one created).",
                )
            )
    found += _oidc_problems()
    if settings.HUB_TRUSTED_HEADER and not settings.HUB_TRUSTED_PROXIES:
        found.append(("accounts.E107", f"HUB_TRUSTED_HEADER={settings.HUB_TRUSTED_HEADER} is set but HUB_TRUSTED_PROXIES "
                      "is not: name the proxy's address (e.g. 127.0.0.1); the header is honoured from it alone."))  # fmt: skip
    if not local_signin_enabled() and not oidc_enabled() and not settings.HUB_TRUSTED_HEADER:
        found.append(("accounts.E108", "HUB_LOCAL_SIGNIN=off but neither OpenID Connect (HUB_OIDC_CLIENT_ID) nor a "
                      "trusted header (HUB_TRUSTED_HEADER) is set: nobody could sign in."))  # fmt: skip
    return found


def _oidc_problems() -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    if oidc_enabled():
        if not settings.HUB_OIDC_CLIENT_SECRET:
            found.append(("accounts.E103", "HUB_OIDC_CLIENT_ID is set but HUB_OIDC_CLIENT_SECRET is not."))
        endpoints = [settings.HUB_OIDC_AUTHORIZATION_ENDPOINT, settings.HUB_OIDC_TOKEN_ENDPOINT,
                     settings.HUB_OIDC_USERINFO_ENDPOINT, settings.HUB_OIDC_JWKS_ENDPOINT]  # fmt: skip
        if not settings.HUB_OIDC_ISSUER and not all(endpoints):
            found.append(("accounts.E104", "HUB_OIDC_CLIENT_ID is set but the provider is not: set HUB_OIDC_ISSUER "
                          "(e.g. https://auth.example.lan), or all four HUB_OIDC_*_ENDPOINT variables."))  # fmt: skip
        for name in ("HUB_OIDC_ISSUER", "HUB_OIDC_AUTHORIZATION_ENDPOINT", "HUB_OIDC_TOKEN_ENDPOINT",
                     "HUB_OIDC_USERINFO_ENDPOINT", "HUB_OIDC_JWKS_ENDPOINT"):  # fmt: skip
            value = getattr(settings, name)
            if value and not value.startswith(("https://", "http://")):
                found.append(("accounts.E105", f"{name}={value!r} must be an http(s) URL."))
    elif settings.HUB_OIDC_ISSUER or settings.HUB_OIDC_CLIENT_SECRET:
        found.append(
            (
                "accounts.E106",
                "HUB_OIDC_ISSUER or HUB_OIDC_CLIENT_SECRET is set but HUB_OIDC_CLIENT_ID is not.",
            )
        )
    return found
