"""ASGI entry point: HTTP through Django, websockets through Channels.

``get_asgi_application()`` (Django's, with one thread hop per synchronous request: hub.handlers) runs first so
the app registry is ready before routing imports consumers. HTTP passes :class:`hub.bodylimit.BodyLimit` first:
Django reads a whole body before any of its own checks.
"""

from __future__ import annotations

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hub.settings")

from hub.handlers import get_asgi_application

django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from hub.bodylimit import BodyLimit  # noqa: E402
from hub.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        # A body over its route's ceiling is refused before Django reads it.
        "http": BodyLimit(django_asgi_app),
        "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)

# What hub.webserver serves: the connection's own address kept, forwarded headers believed from trusted proxies alone.
from django.conf import settings as _settings  # noqa: E402

from hub.peer import DirectPeer  # noqa: E402

served_application = DirectPeer(application, list(_settings.HUB_TRUSTED_PROXIES))
