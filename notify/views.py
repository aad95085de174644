"""Notification pages: my channels (/notify/), the household's (/notify/household/, admins), one channel's edit
page, the test button, resending an email channel's confirmation and the signed-out page its link opens, the
private hosts channels may reach (/notify/private-hosts/, admins), this browser's Web Push subscription, and the
service worker at the site's root."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_not_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.utils.cache import add_never_cache_headers
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from hub.links import link_origin
from hub.parsing import parse_id
from jobs.models import Job
from notify import confirm, selectors, services, targets, vapid
from notify.forms import ChannelForm, PrivateHostForm
from notify.models import Channel, PrivateHost
from notify.templatetags.notify_tags import box_context

SW_PATH = Path(settings.BASE_DIR) / "static" / "sw.js"
MAX_SUBSCRIPTION_BYTES = 4096


def _add_form(request: HttpRequest, *, household: bool) -> ChannelForm:
    """The add form, offering only the kinds this person may add (a viewer: email, to their own address)."""
    return ChannelForm(
        request.POST if request.method == "POST" else None,
        household=household,
        kinds=selectors.channel_kinds_for(request.user),
        own_address=request.user.email,
    )


def _origin(request: HttpRequest) -> Callable[[], str]:
    """Links in the mails this request causes: asked for only when one is sent (``hub.links``)."""
    return lambda: link_origin(request)


def _page(request: HttpRequest, *, household: bool, form: ChannelForm | None = None, status: int = 200):
    channels = selectors.channels_managed_by(request.user, household=household)
    context = {
        "household": household,
        "channels": channels,
        "form": form or _add_form(request, household=household),
        "deliveries": selectors.recent_deliveries(request.user, household=household),
    }
    return render(request, "notify/channels.html", context, status=status)


def _errors_onto(form: ChannelForm, exc: ValidationError | PermissionDenied) -> None:
    """A service's refusal shown on the form: on its field where the form has one, else above the form."""
    if isinstance(exc, PermissionDenied):  # selectors.ChannelRefused: who may have which channel
        form.add_error(None, str(exc))
        return
    errors = exc.message_dict if hasattr(exc, "error_dict") else {"__all__": exc.messages}
    for field, texts in errors.items():
        form.add_error(field if field in form.fields else None, texts)


@require_GET
def home(request: HttpRequest) -> HttpResponse:
    return _page(request, household=False)


def household(request: HttpRequest) -> HttpResponse:
    selectors.require_household_admin(request.user)  # before the method: non-admins learn nothing more
    return _household_page(request)


@require_GET
def _household_page(request: HttpRequest) -> HttpResponse:
    return _page(request, household=True)


@require_POST
def channel_add(request: HttpRequest) -> HttpResponse:
    household = request.POST.get("household") == "1"
    if household:
        selectors.require_household_admin(request.user)  # before the form: non-admins learn nothing more
    form = _add_form(request, household=household)
    if form.is_valid():
        data = form.cleaned_data
        try:
            channel = services.channel_add(
                by=request.user,
                link_origin=_origin(request),
                household=household,
                kind=data["kind"],
                **form.channel_values(),
            )
        except (ValidationError, selectors.ChannelRefused) as exc:
            _errors_onto(form, exc)
        else:
            messages.success(request, _added_text(channel))
            return redirect("notify-household" if household else "notify-home")
    return _page(request, household=household, form=form, status=400)


def _added_text(channel: Channel) -> str:
    if channel.awaits_confirmation:
        return (
            f"Added “{channel.name}”. A confirmation link is on its way to {channel.address}: the channel sends "
            "nothing until it is opened."
        )
    return f"Added “{channel.name}”. Send it a test to check that it arrives."


def _channel_or_404(request: HttpRequest, channel_id) -> Channel:
    return selectors.channel_or_404(request.user, channel_id)


def _back(channel: Channel):
    return redirect("notify-household" if channel.is_household else "notify-home")


@require_http_methods(["GET", "POST"])
def channel_edit(request: HttpRequest, channel_id: int) -> HttpResponse:
    channel = _channel_or_404(request, channel_id)
    if request.method == "GET":
        form = ChannelForm(channel=channel, household=channel.is_household)
        return render(request, "notify/channel_edit.html", {"channel": channel, "form": form})
    form = ChannelForm(request.POST, channel=channel, household=channel.is_household)
    if form.is_valid():
        data = form.cleaned_data
        try:
            services.channel_update(
                channel=channel,
                by=request.user,
                link_origin=_origin(request),
                enabled=data["enabled"],
                **form.channel_values(),
            )
        except (ValidationError, selectors.ChannelRefused) as exc:
            _errors_onto(form, exc)
        else:
            messages.success(request, f"Saved “{channel.name}”.")
            return _back(channel)
    channel.refresh_from_db()
    return render(request, "notify/channel_edit.html", {"channel": channel, "form": form}, status=400)


@require_POST
def channel_delete(request: HttpRequest, channel_id: int) -> HttpResponse:
    channel = _channel_or_404(request, channel_id)
    services.channel_delete(channel=channel)
    messages.success(request, f"Deleted “{channel.name}” and its delivery history.")
    return _back(channel)


@require_POST
def channel_test(request: HttpRequest, channel_id: int) -> HttpResponse:
    channel = _channel_or_404(request, channel_id)
    try:
        services.channel_test(channel=channel)
    except (services.TestTooSoon, selectors.ChannelRefused) as exc:
        messages.error(request, str(exc))
        return _back(channel)
    messages.success(request, f"A test is on its way to “{channel.name}”: its delivery shows below.")
    return _back(channel)


@require_POST
def channel_confirm_resend(request: HttpRequest, channel_id: int) -> HttpResponse:
    channel = _channel_or_404(request, channel_id)
    try:
        services.channel_confirm_resend(channel=channel, by=request.user, link_origin=_origin(request))
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.success(request, f"A new confirmation link is on its way to {channel.address}.")
    return _back(channel)


_UNUSABLE = {
    "unknown": (404, "This confirmation link doesn't work", "The link is not one this hub made, or it was cut short when it was copied. Open the whole link from the mail."),
    "expired": (410, "This confirmation link has expired", "Confirmation links work for a day. The person who added the channel can send a new one from their Notifications page."),
    "used": (410, "This address is confirmed already", "The link was used, and the channel sends its notifications here. Nothing more to do."),
    "replaced": (410, "This confirmation link no longer works", "A newer link was sent, or the channel was changed or deleted. Only the newest link works."),
}  # fmt: skip


@login_not_required
@require_http_methods(["GET", "POST"])
def confirm_address(request: HttpRequest, token: str) -> HttpResponse:
    """The link in a confirmation mail: shows who asked, and confirms on the button's POST only (a mail scanner
    that fetches every link confirms nothing). No sign-in: the link itself proves the mailbox (notify.confirm)."""
    try:
        if request.method == "POST":
            channel = confirm.confirmation_accept(token=token)
            return _never_cache(render(request, "notify/confirm.html", {"confirmed": channel}))
        pending = confirm.confirmation_find(token)
    except confirm.ConfirmationUnusable as exc:
        code, title, text = _UNUSABLE[exc.status]
        context = {"status": exc.status, "title": title, "text": text}
        return _never_cache(render(request, "notify/confirm.html", context, status=code))
    context = {"pending": pending, "channel_name": confirm.name_line(pending.channel.name)}
    return _never_cache(render(request, "notify/confirm.html", context))


def _never_cache(response: HttpResponse) -> HttpResponse:
    add_never_cache_headers(response)  # the page's token is a key to the channel: no cache keeps it
    return response


@require_GET
def job_deliveries_box(request: HttpRequest, job_id: int) -> HttpResponse:
    """The job page's Notifications box, for the job's owner (the deliveries went to their own channels)."""
    job = Job.objects.filter(pk=parse_id(job_id) or 0, owner=request.user).first()
    if job is None:
        raise Http404("no such job")
    context = box_context(job, request.user, selectors.deliveries_for_job(request.user, job))
    return render(request, "notify/_job_deliveries.html", context)


# -- private hosts (admins) ------------------------------------------------------------------------------------
def private_hosts(request: HttpRequest) -> HttpResponse:
    selectors.require_household_admin(request.user)  # before the method: non-admins learn nothing more
    return _private_hosts_page(request)


@require_http_methods(["GET", "POST"])
def _private_hosts_page(request: HttpRequest) -> HttpResponse:
    form = PrivateHostForm(request.POST if request.method == "POST" else None)
    if form.is_valid():
        try:
            row = targets.private_host_add(by=request.user, text=form.cleaned_data["host"])
        except ValidationError as exc:
            _errors_onto(form, exc)
        else:
            messages.success(request, f"Every channel may now reach {row}.")
            return redirect("notify-private-hosts")
    context = {
        "form": form,
        "hosts": PrivateHost.objects.all(),
        "from_settings": settings.HUB_NOTIFY_PRIVATE_HOSTS,
    }
    return render(request, "notify/private_hosts.html", context, status=400 if form.errors else 200)


@require_POST
def private_host_delete(request: HttpRequest, host_id: int) -> HttpResponse:
    targets.private_host_remove(by=request.user, host_id=parse_id(host_id) or 0)
    messages.success(request, "Removed: no channel reaches that host any more.")
    return redirect("notify-private-hosts")


# -- Web Push: this browser ----------------------------------------------------------------------------------
@require_GET
def push_key(request: HttpRequest) -> JsonResponse:
    """The VAPID public key (the browser subscribes with it)."""
    return JsonResponse({"publicKey": vapid.public_key()})


def _json_body(request: HttpRequest) -> dict | None:
    if len(request.body) > MAX_SUBSCRIPTION_BYTES:
        return None
    try:
        data = json.loads(request.body or b"{}")
    except (ValueError, UnicodeDecodeError):
        return None
    return data if isinstance(data, dict) else None


@require_POST
def push_subscribe(request: HttpRequest) -> JsonResponse:
    data = _json_body(request)
    if data is None:
        return JsonResponse({"error": "Send the browser's push subscription as JSON."}, status=400)
    try:
        channel = services.browser_subscribe(
            owner=request.user,
            subscription=data.get("subscription") or {},
            name=str(data.get("name", ""))[:100],
        )
    except ValidationError as exc:
        return JsonResponse({"error": " ".join(exc.messages)}, status=400)
    return JsonResponse({"channel": channel.pk, "name": channel.name})


@require_POST
def push_unsubscribe(request: HttpRequest) -> JsonResponse:
    data = _json_body(request)
    if data is None or not isinstance(data.get("endpoint"), str):
        return JsonResponse({"error": "Send the subscription's endpoint as JSON."}, status=400)
    gone = services.browser_unsubscribe(owner=request.user, endpoint=data["endpoint"])
    return JsonResponse({"removed": gone})


@login_not_required
@require_GET
def service_worker(request: HttpRequest) -> HttpResponse:
    """static/sw.js served from the root, so its scope is the whole hub (a worker under /static/ could only
    control /static/). It holds no data: it shows what a push carries and opens its page."""
    response = HttpResponse(SW_PATH.read_bytes(), content_type="text/javascript; charset=utf-8")
    response["Service-Worker-Allowed"] = "/"
    response["Cache-Control"] = "no-cache"
    return response
