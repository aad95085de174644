"""The hub's ASGI handler for HTTP: Django's, with one thread hop per synchronous request instead of 8-9.

Under ASGI Django builds its middleware chain in async mode, and each middleware written the classic way
(``MiddlewareMixin``: sessions, CSRF, auth, messages and most of the hub's) then runs its ``process_request`` and
``process_response`` through ``sync_to_async`` (a hop into the request's thread and back: 8-9 a page here,
counted in hub/tests/test_asgi_handler.py), the view one more. Measured in-process through the ASGI app at 100k
jobs (minimum CPU of 60 requests): personal settings 8.5 ms through Django's handler, 6.6 ms with the whole chain
run in one hop; the dashboard 21.5 -> 19.5 ms.

So this handler keeps two chains of the same middleware, built once:

- a **synchronous** chain (as under WSGI and in Django's test client) for synchronous views: the request's whole
  trip through the middleware and the view runs in one ``sync_to_async`` call, in the request's own thread;
- Django's **async** chain for async views (``/v1``'s long waits for a render): they keep running on the event
  loop, holding no thread, and a client that hangs up still cancels them at once.

Which chain serves a request is decided by the view its path resolves to (one URL resolve, ~0.1 ms); a path
that resolves to nothing (a 404) takes the synchronous chain, as would any view Django would adapt anyway.
Everything around the chain (reading the body, request_started/finished, sending and closing the response,
async streaming bodies) is Django's ASGIHandler unchanged.
"""

from __future__ import annotations

from asgiref.sync import iscoroutinefunction, sync_to_async
from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.base import BaseHandler
from django.urls import Resolver404, get_resolver, get_urlconf


class HubASGIHandler(ASGIHandler):
    def __init__(self):
        super().__init__()  # Django's async chain: for async views
        self._sync = BaseHandler()
        self._sync.load_middleware(is_async=False)

    async def get_response_async(self, request):
        if self._is_async_view(request.path_info):
            return await super().get_response_async(request)
        return await sync_to_async(self._sync.get_response, thread_sensitive=True)(request)

    @staticmethod
    def _is_async_view(path: str) -> bool:
        try:
            match = get_resolver(get_urlconf()).resolve(path)
        except Resolver404:
            return False
        return iscoroutinefunction(match.func)


def get_asgi_application() -> HubASGIHandler:
    """Django's ``get_asgi_application()``, with :class:`HubASGIHandler`.

    Django is set up here only if nothing set it up before: a second ``django.setup()`` (a test importing
    ``hub.asgi``) would configure logging again, dropping the handlers the test run had added to it."""
    import django
    from django.apps import apps

    if not apps.ready:
        django.setup(set_prefix=False)
    return HubASGIHandler()
