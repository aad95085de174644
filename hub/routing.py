from __future__ import annotations

from django.urls import path

from hub.consumers import HubConsumer

websocket_urlpatterns = [
    path("ws/hub/", HubConsumer.as_asgi()),
]
