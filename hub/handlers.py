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

**Lanes: the threads that run requests live as long as the process.** Django's handler gives every request a
thread of its own (asgiref's ``ThreadSensitiveContext()``: a new one-thread executor, then one more thread to
join it at the end), so each request started and joined two threads, and opened and closed its own database
connection: a thread's connection could not outlive it. The hub's handler runs each request's synchronous work
(request_started, the middleware and the view, the response's close) in one of ``HUB_WEB_THREADS`` lanes, each a
thread that lives as long as the process: a request takes the lane with the fewest requests in it. A lane keeps
its SQLite connection from one request to the next (``CONN_MAX_AGE`` in hub.settings, for the web server only;
PostgreSQL's web connections come from their pool). Measured in-process through the ASGI app on SQLite, the
signed-in favicon (session, person, every middleware): 2.9 ms a request with a thread each, 2.7 ms in lanes, 1.7
ms in lanes that keep their connection. Two requests in one lane take turns, call by call, as they would in one
thread; more requests than lanes at once share them.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from asgiref.sync import ThreadSensitiveContext, iscoroutinefunction, sync_to_async
from django.conf import settings
from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.base import BaseHandler
from django.urls import Resolver404, get_resolver, get_urlconf


class Lanes:
    """``size`` threads that live as long as the process; a request takes the one with the fewest requests in it.

    Each lane is a one-thread executor, as asgiref's ``ThreadSensitiveContext(executor=...)`` wants; its thread
    starts with the lane's first request (after the web server's fork). The lock matters only where one app
    serves several event loops (tests); a web worker has one."""

    def __init__(self, size: int) -> None:
        self._executors = [
            ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"hub-lane-{i}") for i in range(size)
        ]
        self._load = [0] * size
        self._lock = threading.Lock()

    def take(self) -> ThreadPoolExecutor:
        with self._lock:
            lane = min(range(len(self._load)), key=self._load.__getitem__)
            self._load[lane] += 1
        return self._executors[lane]

    def give_back(self, executor: ThreadPoolExecutor) -> None:
        with self._lock:
            self._load[self._executors.index(executor)] -= 1

    def load(self) -> list[int]:
        """Requests in each lane now."""
        return list(self._load)


class HubASGIHandler(ASGIHandler):
    def __init__(self):
        super().__init__()  # Django's async chain: for async views
        self._sync = BaseHandler()
        self._sync.load_middleware(is_async=False)
        self.lanes = Lanes(settings.HUB_WEB_THREADS)

    async def __call__(self, scope, receive, send):
        """Django's, with the request's thread-sensitive work in one of the process's lanes (not a new thread)."""
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        lane = self.lanes.take()
        try:
            async with ThreadSensitiveContext(executor=lane):
                await self.handle(scope, receive, send)
        finally:
            self.lanes.give_back(lane)

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
