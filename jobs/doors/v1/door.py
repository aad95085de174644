"""/v1's door: the methods a route answers, the token and its scope, and every failure in OpenAI's shape."""

from __future__ import annotations

import asyncio
from functools import wraps

from asgiref.sync import sync_to_async
from django.http import HttpRequest
from django.views.decorators.csrf import csrf_exempt

from hub.accounts.tokens import TokenInvalid
from hub.api_auth import NOT_SIGNED_IN, READ_ONLY, authenticate_request
from jobs.doors.v1.errors import V1Error, translate


def enter(request: HttpRequest, scopes: dict[str, str]) -> None:
    if request.method not in scopes:
        raise V1Error(
            405, f"{request.method} is not allowed here; use {', '.join(scopes)}.", code="method_not_allowed"
        )
    request.api_token = None
    if "Authorization" in request.headers:
        token = authenticate_request(request)  # sets request.user
        if not token.has_scope(scopes[request.method]):
            raise V1Error(403, READ_ONLY, code="insufficient_scope")
    elif not (request.method == "GET" and getattr(request.user, "is_authenticated", False)):
        # A signed-in browser may read (e.g. open an image URL); writes need a token.
        raise TokenInvalid(NOT_SIGNED_IN)


def door(**scopes: str):
    """Wrap a view: allowed methods with their scope (``GET="read", POST="submit"``), errors in OpenAI's shape."""

    def decorate(view):
        if asyncio.iscoroutinefunction(view):

            @wraps(view)
            async def wrapper(request, *args, **kwargs):
                try:
                    await sync_to_async(enter)(request, scopes)
                    return await view(request, *args, **kwargs)
                except Exception as exc:  # noqa: BLE001 - every failure answers in OpenAI's shape
                    return await sync_to_async(translate)(exc)

        else:

            @wraps(view)
            def wrapper(request, *args, **kwargs):
                try:
                    enter(request, scopes)
                    return view(request, *args, **kwargs)
                except Exception as exc:  # noqa: BLE001
                    return translate(exc)

        return csrf_exempt(wrapper)  # tokens, not cookies: nothing for CSRF to protect

    return decorate
