"""The Retention page (``/jobs/retention/``): the rule in force for the person and the results it will move to the
trash (a week's notice); for admins also the household's and people's rules (a form each) and everyone's announced
results. Rules live in ``jobs.queue.retention``; these views check access, read a form and call it."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from hub.accounts.decorators import admin_required
from jobs.core.bookmarks import bookmarked_ids
from jobs.queue import retention

SHOWN = 200


@require_GET
def retention_page(request: HttpRequest) -> HttpResponse:
    user = request.user
    notices = list(retention.notices_of(user)[:SHOWN])
    marked = bookmarked_ids(user, [n.job_id for n in notices])
    for notice in notices:
        notice.bookmarked = notice.job_id in marked  # bookmarked since it was announced: kept at the next run
    ctx: dict[str, Any] = {
        "rule": retention.rule_for(user),
        "notices": notices,
        "notice_days": retention.NOTICE.days,
    }
    if user.is_admin:
        ctx.update(
            household=retention.household_rule(),
            rules=retention.rules(),
            everyone=list(retention.notices_of(None)[:SHOWN]),
            people=list(get_user_model().objects.filter(is_active=True).order_by("username")),
        )
    return render(request, "jobs/retention.html", ctx)


@admin_required
@require_POST
def retention_rule(request: HttpRequest) -> HttpResponse:
    """Set the household's rule (no ``user``) or a person's; both fields empty removes the rule."""
    username = (request.POST.get("user") or "").strip()
    person = None
    if username:
        person = get_user_model().objects.filter(username=username).first()
        if person is None:
            messages.error(request, f"No person called {username[:40]!r}.")
            return redirect(reverse("jobs-retention"))
    try:
        days, gb = retention.parse_rule(request.POST.get("keep_days"), request.POST.get("keep_gb"))
        rule = retention.rule_set(by=request.user, user=person, keep_days=days, keep_gb=gb)
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
        return redirect(reverse("jobs-retention"))
    who = "the household" if person is None else str(person)
    if rule is None or (person is not None and not rule.own):
        messages.success(request, f"Retention rule of {who} removed.")
    else:
        messages.success(
            request,
            f"Retention rule of {who} saved: {rule.describe()}. The next daily run announces what it takes, "
            f"{retention.NOTICE.days} days before it goes to the trash.",
        )
    return redirect(reverse("jobs-retention"))
