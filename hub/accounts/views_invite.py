"""Pages of one's own account: accepting an invitation (signed out), personal settings, password resets.

The People page's admin side (create, list, revoke invitations; one-time passwords) is in ``views``.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.cache import add_never_cache_headers
from django.utils.decorators import method_decorator
from django.views.decorators.http import require_http_methods

from hub.accounts.backends import signin_address
from hub.accounts.forms import HubPasswordResetForm, InvitationAcceptForm, PersonalSettingsForm
from hub.accounts.invitations import InvitationUnusable, invitation_accept, invitation_find
from hub.accounts.services import user_password_changed, user_update_settings
from hub.accounts.throttle import over_limit
from hub.links import NoLinkOrigin, link_origin

#: Sign-ups tried per address and hour. A link's 256 random bits can't be guessed; the bound keeps a script
#: from burning the CPU on password hashing or probing usernames through one link.
ACCEPT_TRIES_PER_HOUR = 30
#: Reset emails asked for per address and hour (whatever the address typed: the count says nothing about it).
RESET_REQUESTS_PER_HOUR = 5

_UNUSABLE = {
    "unknown": (404, "This invitation link doesn't work", "The link is not one this hub made, or it was cut short when it was copied. Ask the person who runs the hub for a new one."),
    "used": (410, "This invitation was already used", "Each invitation link makes one account, and this one has. If it was you, sign in with the username and password you chose; otherwise ask for a new link."),
    "expired": (410, "This invitation has expired", "Invitation links work for a limited time. Ask the person who runs the hub for a new one."),
    "revoked": (410, "This invitation was withdrawn", "An admin revoked this link, so it no longer works. Ask them for a new one if you still need it."),
}  # fmt: skip


def _never_cache(response: HttpResponse) -> HttpResponse:
    add_never_cache_headers(response)
    response["Cache-Control"] += ", no-store"
    return response


def _unusable(request: HttpRequest, status: str) -> HttpResponse:
    code, title, text = _UNUSABLE[status]
    context = {"status": status, "title": title, "text": text}
    return _never_cache(render(request, "accounts/invitation_unusable.html", context, status=code))


@login_not_required
@require_http_methods(["GET", "POST"])
def invitation_accept_view(request: HttpRequest, token: str) -> HttpResponse:
    invitation = invitation_find(token)
    if invitation is None:
        return _unusable(request, "unknown")
    if not invitation.is_pending:
        return _unusable(request, invitation.status)
    context = {"invitation": invitation}
    if request.user.is_authenticated:
        # Accepting would sign them out of their own account into the new one: say so instead.
        return _never_cache(render(request, "accounts/invitation_accept.html", context))
    if request.method == "GET":
        context["form"] = InvitationAcceptForm()
        return _never_cache(render(request, "accounts/invitation_accept.html", context))
    wait = over_limit("invite-accept", signin_address(request) or "-", ACCEPT_TRIES_PER_HOUR, 3600)
    if wait:
        context.update(form=InvitationAcceptForm(request.POST), throttled_minutes=max(1, wait // 60))
        return _never_cache(render(request, "accounts/invitation_accept.html", context, status=429))
    form = InvitationAcceptForm(request.POST)
    context["form"] = form
    if not form.is_valid():
        return _never_cache(render(request, "accounts/invitation_accept.html", context, status=400))
    try:
        user = invitation_accept(
            raw=token, username=form.cleaned_data["username"], password=form.cleaned_data["password1"]
        )
    except InvitationUnusable as exc:
        return _unusable(request, exc.status)
    except ValidationError as exc:
        form.add_error("username", exc)
        return _never_cache(render(request, "accounts/invitation_accept.html", context, status=400))
    login(request, user, backend="django.contrib.auth.backends.ModelBackend")
    messages.success(request, f"Welcome, {user}! You're signed in as {user.get_role_display().lower()}.")
    return redirect("dashboard")


# --- personal settings ------------------------------------------------------------------------------------
@require_http_methods(["GET", "POST"])
def personal_settings(request: HttpRequest) -> HttpResponse:
    user = request.user
    initial = {"display_name": user.display_name, "email": user.email, "time_zone": user.time_zone}
    form = PersonalSettingsForm(
        request.POST if request.method == "POST" else None, initial=initial, hub_time_zone=settings.TIME_ZONE
    )
    status = 200
    if request.method == "POST":
        if form.is_valid():
            try:
                user_update_settings(user=user, **form.cleaned_data)
            except ValidationError as exc:
                form.add_error(None, exc)
            else:
                messages.success(request, "Saved.")
                return redirect("accounts-settings")
        status = 400
    context = {"form": form, "email_resets": email_configured()}
    return render(request, "accounts/settings.html", context, status=status)


# --- passwords ----------------------------------------------------------------------------------------------
class InvalidIs400:
    """Django's auth views answer a wrong password or a bad new password with 200; the hub answers every
    invalid form with 400 and the form, so scripts, htmx and people alike see that nothing was done."""

    def form_invalid(self, form):
        response = super().form_invalid(form)
        response.status_code = 400
        return response


def email_configured() -> bool:
    """Whether mail leaves the hub: the console (the default) and dummy backends deliver nothing."""
    return settings.EMAIL_BACKEND not in (
        "django.core.mail.backends.console.EmailBackend",
        "django.core.mail.backends.dummy.EmailBackend",
    )


@method_decorator(login_not_required, name="dispatch")
class PasswordResetView(InvalidIs400, auth_views.PasswordResetView):
    """Reset by email. Whatever address is typed, the answer is the same page ("if it is known, a link is on
    its way"), so the page never tells whether someone has an account."""

    form_class = HubPasswordResetForm  # the mail goes out from a worker (hub.accounts.tasks)

    def dispatch(self, request, *args, **kwargs):
        if not email_configured():
            return render(request, "registration/password_reset_unavailable.html")
        return super().dispatch(request, *args, **kwargs)

    def get_context_data(self, **kwargs):
        return {
            **super().get_context_data(**kwargs),
            "timeout_hours": settings.PASSWORD_RESET_TIMEOUT // 3600,
        }

    def form_valid(self, form):
        wait = over_limit(
            "password-reset", signin_address(self.request) or "-", RESET_REQUESTS_PER_HOUR, 3600
        )
        if wait:
            context = self.get_context_data(form=form, throttled_minutes=max(1, wait // 60))
            return self.render_to_response(context, status=429)
        try:
            origin = link_origin(self.request)  # never a Host the request merely claims (hub.links)
        except NoLinkOrigin as exc:
            # Said for every address alike (it is about the hub, not the person), so it tells nothing.
            form.add_error(None, exc)
            return self.render_to_response(self.get_context_data(form=form), status=503)
        form.save(base_url=origin)
        return redirect(self.get_success_url())


@method_decorator(login_not_required, name="dispatch")
class PasswordResetDoneView(auth_views.PasswordResetDoneView):
    pass


@method_decorator(login_not_required, name="dispatch")
class PasswordResetConfirmView(InvalidIs400, auth_views.PasswordResetConfirmView):
    def form_valid(self, form):
        response = super().form_valid(form)
        user_password_changed(user=form.user)
        return response


@method_decorator(login_not_required, name="dispatch")
class PasswordResetCompleteView(auth_views.PasswordResetCompleteView):
    pass


class PasswordChangeView(InvalidIs400, auth_views.PasswordChangeView):
    def form_valid(self, form):
        response = super().form_valid(form)
        user_password_changed(user=form.user)
        return response
