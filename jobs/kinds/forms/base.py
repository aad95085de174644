"""What every submit form shares: the model, when to run, politeness, sharing (``JobForm``); and the fields every
video form (``VideoForm``) and every image form (``ImageForm``) shares, whichever device kind renders it."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.utils import timezone

from devices.capabilities import Capabilities
from hub.accounts.groups import allowance_for
from jobs.kinds.forms.messages import explain_fields
from jobs.kinds.forms.uploads import clean_image_upload
from jobs.models import JobKind, When


class JobForm(forms.Form):
    """Fields every kind shares: the model, when to run, politeness, sharing."""

    kind: str = ""
    model = forms.ChoiceField(label="Model")
    when = forms.ChoiceField(choices=When.choices, initial=When.ASAP, label="When")
    not_before = forms.DateTimeField(
        required=False, label="Not before", help_text="Only with “Not before a time”."
    )
    polite = forms.BooleanField(
        required=False,
        initial=True,
        label="Polite",
        help_text="By day, don't unload a model someone else loaded (e.g. a chat).",
    )
    shared = forms.BooleanField(required=False, initial=False, label="Share with the household")

    def __init__(self, data=None, files=None, *, device, user=None, **kw: Any) -> None:
        super().__init__(data, files, **kw)
        self.device = device
        self.user = user
        self.caps = Capabilities.from_dict(device.capabilities)
        # Only the models the person's groups allow (``hub.accounts.groups``; admission refuses the others by name).
        allowance = allowance_for(user)
        self.fields["model"].choices = [
            (m, label) for m, label in self.model_choices() if allowance.model_ok(m)
        ]
        if len(self.fields["model"].choices) == 1:
            self.fields["model"].initial = self.fields["model"].choices[0][0]
        if getattr(
            user, "is_admin", False
        ):  # admins may lift their own limits for one job (jobs.quotas.services)
            self.fields["lift_limits"] = forms.BooleanField(
                required=False,
                initial=False,
                label="Lift my limits for this job",
                help_text="Admins only: queue it even over a quota; the job's story records it.",
            )

    # -- to override --------------------------------------------------------------------------------------
    def model_choices(self) -> list[tuple[str, str]]:
        return []

    def cleaned_params(self) -> dict[str, Any]:
        raise NotImplementedError

    def upload_files(self) -> dict[str, Any]:
        """Files the job keeps as inputs (saved under its folder by ``job_submit``)."""
        return {}

    @classmethod
    def fields_from_params(cls, params: dict[str, Any]) -> dict[str, Any]:
        """A job's stored parameters as this form's fields (the inverse of ``cleaned_params``): what "run
        again" fills the form with, on the page and through the API."""
        return {k: v for k, v in params.items() if k != "files"}

    @classmethod
    def fields_from_job(cls, job: Any) -> dict[str, Any]:
        """A job's settings as this form's fields: its parameters (``fields_from_params``), model and schedule."""
        return {
            **cls.fields_from_params(job.params or {}),
            "model": job.model_id,
            "when": job.when,
            "polite": job.polite,
            "shared": job.shared,
        }

    def keep_files(self) -> JobForm:
        """For a job that already holds its input files (run again, a device checked for a waiting job): no file
        field is asked for again. Returns the form."""
        for field in self.fields.values():
            if isinstance(field, forms.FileField):
                field.required = False
        return self

    # -- shared ------------------------------------------------------------------------------------------
    def _name(self, model_id: str) -> str:
        m = self.caps.model(model_id)
        name = (m.name if m else model_id.rsplit("/", 1)[-1]) or model_id
        return f"{name} (loaded)" if m and m.loaded else name

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if not self.fields["model"].choices:
            raise ValidationError(
                f"This device has no model for {JobKind(self.kind).label.lower()} right now."
            )
        when = data.get("when")
        nb = data.get("not_before")
        if when == When.NOT_BEFORE:
            if not nb:
                self.add_error("not_before", "Give the time the job may start.")
            elif nb < timezone.now() - dt.timedelta(minutes=1):
                self.add_error("not_before", "That time has already passed.")
        return data

    def full_clean(self) -> None:
        # Last, so bounds and choices set by a subclass (from the chosen model) are the ones named.
        explain_fields(self)
        super().full_clean()

    def chosen_model(self) -> str:
        """The model the form is for: the posted one when it is offered, else the initial, else the first."""
        ids = [c for c, _ in self.fields["model"].choices]
        raw = self.data.get("model") if self.is_bound else None
        raw = raw if raw in ids else (self.initial.get("model") or self.fields["model"].initial)
        return raw if raw in ids else (ids[0] if ids else "")

    def schedule(self) -> dict[str, Any]:
        """``when``, ``not_before``, ``polite``, ``shared`` (and an admin's ``lift_limits``) for ``job_submit``."""
        d = self.cleaned_data
        return {
            "when": d.get("when") or When.ASAP,
            "not_before": d.get("not_before") if d.get("when") == When.NOT_BEFORE else None,
            "polite": bool(d.get("polite")),
            "shared": bool(d.get("shared")),
            **({"lift_limits": bool(d.get("lift_limits"))} if "lift_limits" in self.fields else {}),
        }


class VideoForm(JobForm):
    """What every video form shares; ``TiinyVideoForm`` and ``TensorSharpVideoForm`` add the device's fields."""

    kind = JobKind.VIDEO
    prompt = forms.CharField(widget=forms.Textarea, max_length=4000, label="Prompt")
    seed = forms.IntegerField(required=False, min_value=0, max_value=2**31 - 1, label="Seed")
    start_image = forms.FileField(required=False, label="Start image (optional)")

    def clean_start_image(self):
        return clean_image_upload(self.cleaned_data.get("start_image"), label="The start image")

    def upload_files(self) -> dict[str, Any]:
        return {k: self.cleaned_data[k] for k in ("start_image", "end_image") if self.cleaned_data.get(k)}

    def _with_seed(self, p: dict[str, Any]) -> dict[str, Any]:
        if self.cleaned_data.get("seed") is not None:
            p["seed"] = self.cleaned_data["seed"]
        return p


class ImageForm(JobForm):
    """What every image form shares: a prompt, a seed, steps."""

    kind = JobKind.IMAGE
    prompt = forms.CharField(widget=forms.Textarea, max_length=4000, label="Prompt")
    seed = forms.IntegerField(required=False, min_value=0, max_value=2**31 - 1, label="Seed")
    steps = forms.IntegerField(required=False, min_value=1, max_value=100, label="Steps")

    def _with_seed(self, p: dict[str, Any]) -> dict[str, Any]:
        if self.cleaned_data.get("seed") is not None:
            p["seed"] = self.cleaned_data["seed"]
        return p
