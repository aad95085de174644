"""The Groups page (admins): the groups, a new one, a group's limits and members, deleting one after asking.

The choices are built from what the devices report (``jobs.quotas.groups.model_choices``…); the rules and checks
are ``jobs.quotas.groups``' and ``hub.accounts.groups``'. These views check access, read a form and call them.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from devices.models import Device
from hub.accounts.decorators import admin_required
from hub.accounts.models import UserGroup
from jobs.doors.intake import offered_models
from jobs.kinds.table import kinds_for
from jobs.quotas import groups

LIMIT_LABELS = {
    "device_minutes_per_day": "Each member: device minutes a day",
    "device_minutes_per_week": "Each member: device minutes a week",
    "max_queued": "Each member: jobs in the queue at once",
    "storage_mb": "Each member: MB of results",
    "shared_minutes_per_day": "Together: device minutes a day",
    "shared_minutes_per_week": "Together: device minutes a week",
}


def job_model_choices() -> list[tuple[str, str]]:
    """The models the devices report that some kind's form offers (a chat or OCR model runs no job here)."""
    offered = {m for d in Device.objects.all() for kind in kinds_for(d) for m in offered_models(d, kind)}
    return [(m, label) for m, label in groups.model_choices() if m in offered]


class GroupForm(forms.Form):
    """A group's name, lists (ticked: only those; none ticked: no limit) and limits (empty: no limit)."""

    name = forms.CharField(max_length=groups.MAX_NAME, label="Name")
    models = forms.MultipleChoiceField(required=False, widget=forms.CheckboxSelectMultiple, label="Models")
    kinds = forms.MultipleChoiceField(required=False, widget=forms.CheckboxSelectMultiple, label="Kinds")
    devices = forms.MultipleChoiceField(required=False, widget=forms.CheckboxSelectMultiple, label="Devices")

    def __init__(self, *args: Any, group: UserGroup | None = None, **kw: Any) -> None:
        super().__init__(*args, **kw)
        known = job_model_choices()
        # A model the group lists that no device reports any more stays ticked, so saving keeps nothing by surprise.
        kept = [(m, m) for m in (group.model_ids if group else []) if m not in dict(known)]
        self.fields["models"].choices = known + kept
        self.fields["kinds"].choices = groups.kind_choices()
        self.fields["devices"].choices = [(str(pk), name) for pk, name in groups.device_choices()]
        for name, label in LIMIT_LABELS.items():
            self.fields[name] = forms.IntegerField(
                required=False, min_value=0, max_value=10**8, label=label, help_text="Empty: no limit."
            )
        if group is not None and not self.is_bound:
            self.initial = {
                "name": group.name,
                "models": list(group.model_ids or []),
                "kinds": list(group.kinds or []),
                "devices": [str(d) for d in group.devices or []],
                **{name: getattr(group, name) for name in LIMIT_LABELS},
            }

    def limit_fields(self) -> list[Any]:
        return [self[name] for name in LIMIT_LABELS]

    def values(self) -> dict[str, Any]:
        d = self.cleaned_data
        return {
            "name": d["name"],
            "models": d["models"],
            "kinds": d["kinds"],
            "devices": d["devices"],
            **{name: d.get(name) for name in LIMIT_LABELS},
        }


def _save(request: HttpRequest, form: GroupForm, group: UserGroup | None) -> UserGroup | None:
    if not form.is_valid():
        return None
    try:
        return groups.group_save(by=request.user, group=group, **form.values())
    except ValidationError as exc:
        pairs = exc.message_dict.items() if hasattr(exc, "error_dict") else [(None, exc.messages)]
        for field, errors in pairs:
            for error in errors:
                form.add_error(field if field in form.fields else None, error)
        return None


@admin_required
@require_http_methods(["GET", "POST"])
def group_list(request: HttpRequest) -> HttpResponse:
    """Every group with its members and lists, and a form for a new one."""
    form = GroupForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and (group := _save(request, form, None)) is not None:
        messages.success(request, f"Group “{group.name}” created. Now add its members.")
        return redirect("groups-edit", group.pk)
    status = 400 if form.is_bound else 200
    return render(request, "accounts/groups.html", {"rows": groups.group_rows(), "form": form}, status=status)


@admin_required
@require_http_methods(["GET", "POST"])
def group_edit(request: HttpRequest, group_id: int) -> HttpResponse:
    """A group's name, lists and limits; its members, with a person to add."""
    group = get_object_or_404(UserGroup, pk=group_id)
    form = GroupForm(request.POST if request.method == "POST" else None, group=group)
    if request.method == "POST" and _save(request, form, group) is not None:
        messages.success(request, f"Group “{group.name}” saved.")
        return redirect("groups-edit", group.pk)
    members = list(group.members.order_by("username"))
    others = get_user_model().objects.filter(is_active=True).exclude(pk__in=[m.pk for m in members])
    ctx = {"group": group, "form": form, "members": members, "others": others.order_by("username")}
    return render(request, "accounts/group_edit.html", ctx, status=400 if form.is_bound else 200)


@admin_required
@require_POST
def group_member(request: HttpRequest, group_id: int) -> HttpResponse:
    """Add (``action=add``) or remove (``action=remove``) the person named by ``username``."""
    group = get_object_or_404(UserGroup, pk=group_id)
    action = request.POST.get("action")
    try:
        person = groups.find_user(request.POST.get("username", ""))
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
        return redirect("groups-edit", group.pk)
    if action == "add":
        done = groups.member_add(by=request.user, group=group, user=person)
        messages.success(request, f"{person} {'is now' if done else 'was already'} in “{group.name}”.")
    elif action == "remove":
        done = groups.member_remove(by=request.user, group=group, user=person)
        messages.success(request, f"{person} {'is no longer' if done else 'was not'} in “{group.name}”.")
    else:
        messages.error(request, "Choose to add or remove someone.")
    return redirect("groups-edit", group.pk)


@admin_required
@require_http_methods(["GET", "POST"])
def group_delete(request: HttpRequest, group_id: int) -> HttpResponse:
    """GET: asks first; POST: deletes the group (its members keep their jobs and their other groups)."""
    group = get_object_or_404(UserGroup, pk=group_id)
    if request.method == "POST":
        name = group.name
        groups.group_delete(by=request.user, group=group)
        messages.success(request, f"Group “{name}” deleted.")
        return redirect("groups")
    return render(request, "accounts/group_delete.html", {"group": group, "count": group.members.count()})
