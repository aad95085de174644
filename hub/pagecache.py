"""Pages kept a few seconds for the browser that asked: ``@kept_page`` on the busiest signed-in pages.

The dashboard, the queue page and the gallery cost 10-30 ms of Python each at 100k jobs, and they are asked for
again and again by the same browsers (a reload, a back button, a tab per device) while nothing on them has
changed. ``kept_page`` keeps a page's HTML in the web process and answers the same browser's same request with
it, without drawing it again, while all of these hold:

- **the same browser**: the key is the session and the CSRF cookie (and the path with its query, the time zone
  and the language). A drawing is never shared between two sessions, so never between two people; the CSRF
  token in it is one this browser's cookie accepts.
- **nothing changed since**: :func:`changed` gives the hub a new *generation* (a token in Redis) after every
  change a page may show: any POST, PUT, PATCH or DELETE through the web (:class:`ChangesMiddleware`: every
  form, the REST API and ``/v1``), and every state, event or queue change the engine makes
  (``jobs.live.outbox.pages_changed``). A drawing belongs to the generation read *before* it was drawn, so one drawn
  while a change was being committed is never taken for the new state.
- **it is young**: at most ``HUB_PAGE_CACHE_S`` seconds old (default 5). This bounds what no generation
  follows: times shown relative to now, a device's gauges, a progress tick (ticks don't make a generation:
  one a second while a render runs would keep nothing). Every live part of these pages is sent again whole
  when the page's socket connects (``hub.live``'s snapshot), so a kept page is current again within moments
  of being shown.

Never kept: an htmx request (a fragment), a page with a message to show (it is shown once), an answer other
than a plain 200, or one drawn while Redis, which holds the generation, could not be read. ``HUB_PAGE_CACHE_S=0``
turns it off. Each web process keeps at most ``MAX_PAGES`` drawings (a few MB).
"""

from __future__ import annotations

import functools
import logging
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.utils import timezone, translation
from django.utils.deprecation import MiddlewareMixin

logger = logging.getLogger(__name__)

GENERATION_KEY = "pages:generation"
MAX_PAGES = 256
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})
UNREAD = object()  # the generation could not be read (Redis down): draw, and keep nothing


@dataclass(frozen=True, slots=True)
class Kept:
    generation: str | None
    at: float
    body: bytes
    content_type: str


_pages: OrderedDict[tuple, Kept] = OrderedDict()
_lock = threading.Lock()


def changed() -> None:
    """Something a page may show changed (and is committed): no drawing kept so far is served again."""
    try:
        cache.set(GENERATION_KEY, secrets.token_hex(8), timeout=None)
    except Exception:
        # Redis down: the reads fail too, so nothing is served from the store. If it is back within seconds,
        # the age limit bounds what is served late.
        logger.warning("could not mark the kept pages stale", exc_info=True)


def generation() -> str | None | object:
    try:
        return cache.get(GENERATION_KEY)
    except Exception:  # noqa: BLE001
        return UNREAD


def forget_all() -> None:
    """Empty this process's store (tests)."""
    with _lock:
        _pages.clear()


def max_age() -> float:
    return float(getattr(settings, "HUB_PAGE_CACHE_S", 0))


def _key(view: Callable, request: HttpRequest) -> tuple | None:
    """Whose and which page this is, or None when it must be drawn for this request alone."""
    if request.method != "GET" or getattr(request, "htmx", False):
        return None
    user = getattr(request, "user", None)
    session_key = getattr(getattr(request, "session", None), "session_key", None)
    csrf_cookie = request.COOKIES.get(settings.CSRF_COOKIE_NAME)
    if user is None or not user.is_authenticated or not session_key or not csrf_cookie:
        return None
    messages = getattr(request, "_messages", None)
    if messages is not None and len(messages):  # shown once, so drawn for this request
        return None
    return (
        view.__module__,
        view.__qualname__,
        session_key,
        csrf_cookie,
        user.pk,
        request.get_full_path(),
        timezone.get_current_timezone_name(),
        translation.get_language(),
    )


def kept_page(view: Callable[..., HttpResponseBase]) -> Callable[..., HttpResponseBase]:
    """Serve ``view``'s page from the store while it is the same browser's, nothing changed and it is young."""

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponseBase:
        ttl = max_age()
        key = _key(view, request) if ttl > 0 else None
        if key is None:
            return view(request, *args, **kwargs)
        gen = generation()
        if gen is UNREAD:
            return view(request, *args, **kwargs)
        now = time.monotonic()
        with _lock:
            kept = _pages.get(key)
            if kept is not None:
                _pages.move_to_end(key)
        if kept is not None and kept.generation == gen and now - kept.at < ttl:
            return HttpResponse(kept.body, content_type=kept.content_type)
        response = view(request, *args, **kwargs)
        if _keepable(response):
            with _lock:
                _pages[key] = Kept(gen, now, response.content, response["Content-Type"])
                _pages.move_to_end(key)
                while len(_pages) > MAX_PAGES:
                    _pages.popitem(last=False)
        return response

    return wrapper


def _keepable(response: HttpResponseBase) -> bool:
    return (
        type(response) is HttpResponse
        and response.status_code == 200
        and not response.cookies
        and set(k.lower() for k in response.headers) <= {"content-type"}
    )


class ChangesMiddleware(MiddlewareMixin):
    """After any request that may change something (POST, PUT, PATCH, DELETE), a new generation: the next page
    anyone is served is drawn again. After the view, so after its transaction committed."""

    def process_response(self, request: HttpRequest, response: HttpResponseBase) -> HttpResponseBase:
        if request.method not in SAFE_METHODS:
            changed()
        return response
