"""People (admins only): list, add with a role, change a role, deactivate or bring back, invite with a
single-use link, hand out a one-time password, lift a sign-in lockout.

API tokens (everyone signed in): create one (shown once), list, revoke."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.cache import add_never_cache_headers
from django.views.decorators.http import require_GET, require_POST

from hub.accounts.decorators import admin_required
from hub.accounts.forms import (
    ActiveForm,
    InvitationCreateForm,
    PersonAddForm,
    RoleForm,
    TokenCreateForm,
)
from hub.accounts.invitations import (
    invitation_create,
    invitation_revoke,
    invitation_url,
    invitations_pending,
)
from hub.accounts.lockout import locked_usernames, signin_unlock, unlocks_recent
from hub.accounts.models import Invitation, User
from hub.accounts.services import user_create_or_update, user_set_active, user_set_one_time_password
from hub.accounts.tokens import token_create, token_revoke, tokens_visible_to, tokens_with_device_names
from hub.links import NoLinkOrigin, link_origin


def _page(request: HttpRequest, form: PersonAddForm | None = None, **extra) -> dict:
    people = list(User.objects.order_by("-is_active", "username"))
    locked = locked_usernames()
    for person in people:
        person.locked_until = locked.get(person.username)
    return {
        "people": people,
        "unlocks": unlocks_recent(),
        "form": form or PersonAddForm(),
        "roles": User.Role.choices,
        "invite_form": extra.pop("invite_form", None) or InvitationCreateForm(),
        "invitations": invitations_pending(),
        **extra,
    }


def _secret_page(response: HttpResponse) -> HttpResponse:
    """A page that shows a secret once (a link, a password) must not linger in a cache or the history."""
    add_never_cache_headers(response)
    response["Cache-Control"] += ", no-store"
    return response


@admin_required
@require_GET
def people(request: HttpRequest) -> HttpResponse:
    return render(request, "accounts/people.html", _page(request))


@admin_required
@require_POST
def person_add(request: HttpRequest) -> HttpResponse:
    form = PersonAddForm(request.POST)
    if not form.is_valid():
        return render(request, "accounts/people.html", _page(request, form), status=400)
    result = user_create_or_update(**form.cleaned_data, by=request.user)
    # Rendered, not redirected: a generated password is shown exactly once and never stored in a message.
    return render(request, "accounts/people.html", _page(request, added=result))


@admin_required
@require_POST
def person_role(request: HttpRequest, user_id: int) -> HttpResponse:
    person = get_object_or_404(User, pk=user_id)
    form = RoleForm(request.POST)
    if person.pk == request.user.pk:
        messages.error(request, "You can't change your own role; ask another admin.")
    elif form.is_valid():
        user_create_or_update(username=person.username, role=form.cleaned_data["role"], by=request.user)
        messages.success(request, f"{person} is now {User.Role(form.cleaned_data['role']).label.lower()}.")
    else:
        messages.error(request, "Choose admin, member or viewer.")
    return redirect("people")


@admin_required
@require_POST
def person_active(request: HttpRequest, user_id: int) -> HttpResponse:
    person = get_object_or_404(User, pk=user_id)
    form = ActiveForm(request.POST)
    if person.pk == request.user.pk or not form.is_valid():
        messages.error(request, "You can't deactivate yourself.")
        return redirect("people")
    try:
        user_set_active(user=person, active=form.cleaned_data["active"], by=request.user)
    except ValueError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(
            request, f"{person} {'can sign in again' if person.is_active else 'is deactivated'}."
        )
    return redirect("people")


@admin_required
@require_POST
def person_password(request: HttpRequest, user_id: int) -> HttpResponse:
    person = get_object_or_404(User, pk=user_id)
    try:
        password = user_set_one_time_password(user=person, by=request.user)
    except ValueError as exc:
        messages.error(request, str(exc))
        return redirect("people")
    # Rendered, not redirected: the password is shown exactly once and never goes into a message or URL.
    context = _page(request, one_time=person, one_time_password=password)
    return _secret_page(render(request, "accounts/people.html", context))


@admin_required
@require_POST
def person_unlock(request: HttpRequest, user_id: int) -> HttpResponse:
    person = get_object_or_404(User, pk=user_id)
    cleared = signin_unlock(user=person, by=request.user)
    messages.success(request, f"{person} can sign in again ({cleared} failed sign-in(s) cleared).")
    return redirect("people")


# --- invitations (admins; the accept page is hub.accounts.views_invite) ------------------------------------
@admin_required
@require_POST
def invitation_add(request: HttpRequest) -> HttpResponse:
    form = InvitationCreateForm(request.POST)
    if not form.is_valid():
        return render(request, "accounts/people.html", _page(request, invite_form=form), status=400)
    data = form.cleaned_data
    try:
        link_origin(request)  # before the invitation is made: its secret is shown this once, with its link
        invitation, raw = invitation_create(
            role=data["role"], created_by=request.user, expires_days=data["expires_days"], note=data["note"]
        )
    except NoLinkOrigin as exc:
        form.add_error(None, exc.fix)  # admins only here: the fix may name the Host and the settings
    except ValidationError as exc:
        form.add_error(None, exc)
    else:
        context = _page(request, invited=invitation, invite_link=invitation_url(raw, request=request))
        return _secret_page(render(request, "accounts/people.html", context, status=201))
    return render(request, "accounts/people.html", _page(request, invite_form=form), status=400)


@admin_required
@require_POST
def invitation_revoke_view(request: HttpRequest, invitation_id: int) -> HttpResponse:
    invitation = get_object_or_404(Invitation, pk=invitation_id)
    invitation_revoke(invitation=invitation, by=request.user)
    if invitation.used_at is not None:
        messages.error(request, f"That invitation was already used by {invitation.used_by or 'someone'}.")
    else:
        messages.success(request, "Invitation revoked; its link no longer works.")
    return redirect("people")


# --- API tokens ------------------------------------------------------------------------------------------
def _tokens_page(request: HttpRequest, form: TokenCreateForm | None = None, *, status: int = 200, **extra):
    rows = tokens_with_device_names(request.user)
    if created := extra.get("created"):
        extra["created_devices"] = next((t.bound_names for t in rows if t.pk == created.pk), [])
    context = {
        "tokens": [t for t in rows if t.user_id == request.user.pk],
        "others": [t for t in rows if t.user_id != request.user.pk],
        "form": form or TokenCreateForm(user=request.user),
        "show_owner": request.user.is_admin,
        **extra,
    }
    response = render(request, "accounts/tokens.html", context, status=status)
    # The page that shows a new token must not linger in a cache or the back/forward history.
    add_never_cache_headers(response)
    response["Cache-Control"] += ", no-store"
    return response


@require_GET
def tokens(request: HttpRequest) -> HttpResponse:
    return _tokens_page(request)


@require_POST
def token_add(request: HttpRequest) -> HttpResponse:
    form = TokenCreateForm(request.POST, user=request.user)
    if not form.is_valid():
        return _tokens_page(request, form, status=400)
    try:
        token, raw = token_create(user=request.user, **form.service_args())
    except ValidationError as exc:
        form.add_error(None, exc)
        return _tokens_page(request, form, status=400)
    # Rendered, not redirected: the raw token is shown exactly once and never goes into a message or URL.
    return _tokens_page(request, created=token, raw_token=raw, status=201)


@require_POST
def token_revoke_view(request: HttpRequest, token_id: int) -> HttpResponse:
    # Someone else's token is "not found" rather than "forbidden": its existence is not theirs to know.
    token = get_object_or_404(tokens_visible_to(request.user), pk=token_id)
    token_revoke(token=token, by=request.user)  # PermissionDenied -> 403, should the rules ever disagree
    owner = "" if token.user_id == request.user.pk else f" of {token.user}"
    messages.success(request, f"Revoked “{token.name}”{owner}; it no longer works.")
    return redirect("accounts-tokens")
