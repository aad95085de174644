"""The Audit page (admins): the audit log (``hub.accounts.audit``), filtered by who, what and when, in pages."""

from __future__ import annotations

from django import forms
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from hub.accounts import audit
from hub.accounts.decorators import admin_required


class AuditFilterForm(forms.Form):
    actor = forms.CharField(required=False, max_length=150, label="Who", help_text="A username.")
    action = forms.ChoiceField(
        required=False,
        label="What",
        choices=[("", "Everything"), *audit.Action.choices],
        error_messages={"invalid_choice": "Choose what from the list."},
    )
    since = forms.DateField(
        required=False,
        label="From",
        widget=forms.DateInput(attrs={"type": "date"}),
        error_messages={"invalid": "Enter a date like 2027-01-31."},
    )
    until = forms.DateField(
        required=False,
        label="To",
        widget=forms.DateInput(attrs={"type": "date"}),
        error_messages={"invalid": "Enter a date like 2027-01-31."},
    )

    def clean(self):
        data = super().clean()
        if data.get("since") and data.get("until") and data["since"] > data["until"]:
            self.add_error("until", "“To” is before “From”.")
        return data


@admin_required
@require_GET
def audit_log(request: HttpRequest) -> HttpResponse:
    form = AuditFilterForm(request.GET or None)
    filters = form.cleaned_data if form.is_bound and form.is_valid() else {}
    bad = form.is_bound and not form.is_valid()
    rows, after, status = [], None, 200
    if not bad:
        try:
            rows, after = audit.page(audit.entries(**filters), cursor=request.GET.get("cursor"))
        except audit.BadCursor:
            rows, after = audit.page(audit.entries(**filters), cursor=None)  # a mangled link: the first page
    else:
        status = 400
    query = request.GET.copy()
    query.pop("cursor", None)
    if after:
        query["cursor"] = after
    context = {
        "form": form,
        "entries": rows,
        "next_query": query.urlencode() if after else "",
        "paged": bool(request.GET.get("cursor")),
        "keep_days": audit.keep_days(),
    }
    return render(request, "accounts/audit.html", context, status=status)
