"""The hub's REST API under /api/ (django-ninja; OpenAPI at /api/docs).

One NinjaAPI; each app adds its router (``jobs.api``, ``devices.api``). Scripts authenticate with a personal
token (``Authorization: Bearer …``), the browser with its session (CSRF checked).
"""

from __future__ import annotations

from ninja import NinjaAPI

api = NinjaAPI(title="Tiiny Hub API", version="1", urls_namespace="api")


@api.get("/ping", auth=None, include_in_schema=False)
def ping(request):
    return {"ok": True}
