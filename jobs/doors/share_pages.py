"""The pages a read-only link answers before it shows anything (a job's link and an album's alike): expired (410),
the password form, and the password's check (its rate per link is ``jobs.core.share_links``'s)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from jobs.core import share_links


def link_refusal(request: HttpRequest, obj: Any, *, page: bool, what: str = "result") -> HttpResponse | None:
    """Why the link's page or file can't be shown now (expired: 410; locked: the password form or 403), or None."""
    if share_links.is_expired(obj):
        if page:
            return render(request, "jobs/share_expired.html", {"what": what}, status=410)
        return HttpResponse("This link has expired.\n", status=410, content_type="text/plain; charset=utf-8")
    if not share_links.is_unlocked(request.session, obj):
        if page:
            return password_page(request, what=what)
        return HttpResponse(
            "This link needs its password: open the link's page and give it first.\n",
            status=403,
            content_type="text/plain; charset=utf-8",
        )
    return None


def password_page(request: HttpRequest, *, what: str, error: str = "", status: int = 200) -> HttpResponse:
    return render(request, "jobs/share_password.html", {"what": what, "error": error}, status=status)


def password_given(request: HttpRequest, obj: Any, *, what: str = "result") -> HttpResponse | None:
    """Check the password POSTed to the link's page: None when it was right (this browser's session is unlocked),
    else the form again with why (403 wrong, 429 too many tries with ``Retry-After``)."""
    try:
        if not share_links.try_password(obj, request.POST.get("password", "")):
            return password_page(
                request, what=what, error="That is not the password of this link.", status=403
            )
    except share_links.TooManyTries as exc:
        response = password_page(request, what=what, error=str(exc), status=429)
        response["Retry-After"] = str(exc.retry_after)
        return response
    share_links.unlock(request.session, obj)
    return None
