"""Where a link the hub mails or hands out leads: the one rule for the origin (``scheme://host[:port]``) of
password-reset, invitation and email-confirmation links.

A link built from the request's ``Host`` header goes wherever the sender of that request says. Django's own check
(``ALLOWED_HOSTS``) ignores the port and honours patterns (``.example.com``, ``*``), so a request naming an
allowed host with another port (``hub.lan:6666``, some other service on the same machine) or any subdomain would
get a reset link mailed to the victim that leads to the sender's server. Hence:

1. ``HUB_PUBLIC_URL`` when it is set: the address people open, chosen by whoever runs the hub;
2. else the request's Host, only when it equals an entry of ``ALLOWED_HOSTS`` character for character, the port
   included (``hub.lan:8000`` listed as such; patterns never count), or names a listed host on the very port the
   hub serves on (``HUB_PORT``: ``127.0.0.1:8000`` on a plain ``make up``, where ``127.0.0.1`` is listed);
3. else, for a request, no link at all (:class:`NoLinkOrigin` says why); without a request (the command line)
   the address the hub serves on, which comes from the settings alone.
"""

from __future__ import annotations

import socket

from django.conf import settings
from django.core.exceptions import ValidationError
from django.http import HttpRequest

REFUSAL = (
    "The hub does not know its own web address, so it mails no link that might lead somewhere else. Whoever "
    "runs the hub can set HUB_PUBLIC_URL (e.g. https://hub.example.lan)."
)


class NoLinkOrigin(ValidationError):
    """No origin a link may be built on. ``str()``/``messages`` are for anyone; ``fix`` also names the Host the
    request came with, for the admin pages."""

    def __init__(self, host: str) -> None:
        super().__init__(REFUSAL, code="no_link_origin")
        self.host = host
        self.fix = (
            f"{REFUSAL} Or add “{host}” exactly as written, port included, to HUB_ALLOWED_HOSTS "
            "(keep the name without the port there too: Django checks that one)."
        )


def link_origin(request: HttpRequest | None = None) -> str:
    """The origin for links in mails and on pages, by the rule above; raises :class:`NoLinkOrigin` when a
    request's Host does not qualify."""
    if settings.HUB_PUBLIC_URL:
        return settings.HUB_PUBLIC_URL
    if request is not None:
        host = request.get_host()  # Django's check first: a host it refuses raises DisallowedHost here
        if _listed_exactly(host):
            return f"{request.scheme}://{host}"
        raise NoLinkOrigin(host)
    return served_origin()


def _listed_exactly(host: str) -> bool:
    listed = {
        entry.lower()
        for entry in settings.ALLOWED_HOSTS
        if entry and not entry.startswith((".", "*"))  # patterns: never an address to send people to
    }
    wanted = host.lower()
    name, _, port = wanted.rpartition(":") if not wanted.endswith("]") else (wanted, "", "")
    return wanted in listed or (port == str(settings.HUB_PORT) and name in listed)


def served_origin() -> str:
    """The address the hub serves on (HUB_HOST:HUB_PORT; a wildcard bind gives the machine's name instead,
    which the other machines of a LAN can usually resolve)."""
    host = settings.HUB_HOST
    if host in ("", "0.0.0.0", "::", "[::]"):
        host = socket.gethostname() or "localhost"
    elif ":" in host and not host.startswith("["):
        host = f"[{host}]"
    scheme = "https" if settings.HUB_HTTPS else "http"
    default_port = 443 if settings.HUB_HTTPS else 80
    port = "" if settings.HUB_PORT == default_port else f":{settings.HUB_PORT}"
    return f"{scheme}://{host}{port}"
