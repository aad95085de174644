"""Who is at the other end of a connection: the peer itself, and the client a trusted proxy names.

:class:`DirectPeer` wraps the served app (hub.webserver): it keeps the connection's own address in
``scope["hub.peer"]`` and then, with ``HUB_TRUSTED_PROXIES``, lets uvicorn's proxy-headers middleware believe
``X-Forwarded-For``/``-Proto`` from those addresses alone (``scope["client"]`` becomes the person's address, as
sign-in throttling wants). The trusted sign-in header must be judged by the peer, not by the forwarded address.
"""

from __future__ import annotations

from django.http import HttpRequest

SCOPE_KEY = "hub.peer"


class DirectPeer:
    def __init__(self, app, trusted: list[str]) -> None:
        from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

        self.inner = ProxyHeadersMiddleware(app, trusted_hosts=trusted) if trusted else app

    async def __call__(self, scope, receive, send):
        if scope["type"] in ("http", "websocket"):
            client = scope.get("client")
            scope[SCOPE_KEY] = client[0] if client else None
        return await self.inner(scope, receive, send)


def direct_peer(request: HttpRequest) -> str | None:
    """The connection's own address: ``hub.peer`` when served by the hub's web server, else REMOTE_ADDR (the test
    client, runserver: nothing there believes a forwarded header, so that is the peer)."""
    scope = getattr(request, "scope", None) or {}
    if SCOPE_KEY in scope:
        return scope[SCOPE_KEY]
    return request.META.get("REMOTE_ADDR") or None
