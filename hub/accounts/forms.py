from __future__ import annotations

import datetime as dt
import functools
import logging

from django import forms
from django.contrib.auth import password_validation
from django.contrib.auth.forms import PasswordResetForm, UserCreationForm
from django.db import transaction
from django.utils import timezone
from kombu.exceptions import OperationalError

from hub.accounts.models import ApiToken, User
from hub.accounts.services import name_taken
from hub.accounts.tasks import password_reset_mail
from hub.accounts.timezones import time_zone_choices
from hub.accounts.tokens import device_choices, parse_expires_in
from hub.widgets import LongSelect

log = logging.getLogger(__name__)


class PersonAddForm(forms.Form):
    username = forms.RegexField(
        regex=r"^[\w.@+-]+\Z",
        max_length=150,
        label="Username",
        error_messages={"invalid": "Use letters, digits and @ . + - _ only."},
    )
    role = forms.ChoiceField(choices=User.Role.choices, initial=User.Role.MEMBER, label="Role")
    password = forms.CharField(
        required=False,
        strip=False,
        label="Password (optional)",
        widget=forms.PasswordInput(render_value=True),
        help_text="Leave empty to have one generated; it is shown once. At least 10 characters, "
        "not a common one, not all digits, not like the username.",
    )

    def clean_username(self) -> str:
        name = self.cleaned_data["username"].strip()
        if User.objects.filter(username__iexact=name).exists():
            raise forms.ValidationError(f"“{name}” is already here; change their role in the list below.")
        if name_taken(name):  # someone's display name: the newcomer would pass for them
            raise forms.ValidationError(
                f"“{name}” is already someone else's name here; pick another username."
            )
        return name

    def clean(self) -> dict:
        data = super().clean()
        if data.get("password"):
            # The same rules as the password page and the admin (AUTH_PASSWORD_VALIDATORS); the unsaved
            # user lets the similarity check compare against the username being added.
            try:
                password_validation.validate_password(
                    data["password"], user=User(username=data.get("username", ""))
                )
            except forms.ValidationError as exc:
                self.add_error("password", exc)
        return data


class RoleForm(forms.Form):
    role = forms.ChoiceField(choices=User.Role.choices, label="Role")


class ActiveForm(forms.Form):
    active = forms.TypedChoiceField(
        choices=[("1", "Active"), ("0", "Deactivated")], coerce=lambda v: v == "1"
    )


class TokenCreateForm(forms.Form):
    name = forms.CharField(
        max_length=100,
        label="Name",
        help_text="What will use it, e.g. “laptop script” or “home assistant”.",
        error_messages={
            "required": "Give the token a name.",
            "max_length": "Keep the name under 100 characters.",
        },
    )
    scopes = forms.MultipleChoiceField(
        choices=ApiToken.Scope.choices,
        initial=[ApiToken.Scope.READ],
        widget=forms.CheckboxSelectMultiple,
        label="May",
        error_messages={
            "required": "Choose at least one scope: read, or read and submit.",
            "invalid_choice": "Choose read and/or submit.",
        },
    )

    expires = forms.ChoiceField(
        choices=[
            ("", "Never"),
            ("1d", "In a day"),
            ("7d", "In a week"),
            ("30d", "In 30 days"),
            ("90d", "In 90 days"),
            ("date", "On a date…"),
        ],
        required=False,
        label="Expires",
        help_text="After this it stops working (401 “expired”).",
        error_messages={"invalid_choice": "Choose when it expires from the list."},
    )
    expires_on = forms.DateField(
        required=False,
        label="Expiry date",
        widget=forms.DateInput(attrs={"type": "date"}),
        help_text="With “On a date…”: it works until the end of that day.",
        error_messages={"invalid": "Enter a date like 2027-01-31."},
    )
    devices = forms.MultipleChoiceField(
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Only on",
        help_text="Its jobs run only on these devices, and “any device” means any of these. None: any device.",
        error_messages={"invalid_choice": "Choose devices from the list."},
    )

    def __init__(self, *args, user: User, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if not user.can_submit:
            # The service refuses "submit" for viewers too; saying so up front saves a round trip.
            self.fields["scopes"].help_text = "Viewers may create read tokens only."
        else:
            self.fields["scopes"].help_text = "Read: look at jobs, devices, results. Submit: also queue jobs."
        self.fields["devices"].choices = [(name, name) for name in device_choices(user)]

    def clean(self):
        data = super().clean()
        choice, day = data.get("expires"), data.get("expires_on")
        data["expires_at"] = None
        if choice == "date":
            if day is None:
                self.add_error("expires_on", "Choose the date it expires on.")
            else:
                # The end of that day where the person is (their time zone is active for the request).
                zone = timezone.get_current_timezone()
                data["expires_at"] = dt.datetime.combine(day + dt.timedelta(days=1), dt.time.min, tzinfo=zone)
        elif choice:
            data["expires_at"] = timezone.now() + parse_expires_in(choice)
        return data

    def service_args(self) -> dict:
        """What ``token_create`` takes from this form."""
        data = self.cleaned_data
        return {
            "name": data["name"],
            "scopes": data["scopes"],
            "expires_at": data["expires_at"],
            "devices": data.get("devices") or [],
        }


# --- invitations, one-time passwords, personal settings -------------------------------------------------
class InvitationCreateForm(forms.Form):
    role = forms.ChoiceField(choices=User.Role.choices, initial=User.Role.MEMBER, label="Role")
    expires_days = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=90,
        initial=7,
        label="Expires after (days)",
        help_text="1 to 90; empty means 7. The link works once.",
        error_messages={
            "min_value": "At least 1 day.",
            "max_value": "At most 90 days.",
            "invalid": "Give a whole number of days, e.g. 7.",
        },
    )
    note = forms.CharField(
        required=False,
        max_length=100,
        label="For (optional)",
        help_text="Who it is for, so you can tell the links apart, e.g. “Grandma's tablet”.",
        error_messages={"max_length": "Keep the note under 100 characters."},
    )

    def __init__(self, *args, **kwargs) -> None:
        # Its own ids: the People page also holds the "Add someone" form, whose role field is id_role.
        kwargs.setdefault("auto_id", "invite-%s")
        super().__init__(*args, **kwargs)


class InvitationAcceptForm(UserCreationForm):
    """Django's own sign-up form: ``username``, ``password1``, ``password2``, the username rules and
    AUTH_PASSWORD_VALIDATORS. Saving goes through ``invitation_accept``, never ``form.save()``."""

    class Meta(UserCreationForm.Meta):
        model = User
        fields = ("username",)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["username"].widget.attrs.update({"autocomplete": "username", "autofocus": True})
        self.fields["username"].help_text = "What you sign in with: letters, digits and @ . + - _ only."


class PersonalSettingsForm(forms.Form):
    display_name = forms.CharField(
        required=False,
        max_length=150,
        label="Display name",
        help_text="How the hub names you to others; empty means your username.",
        error_messages={"max_length": "Keep it under 150 characters."},
    )
    email = forms.EmailField(
        required=False,
        label="Email",
        help_text="For resetting your password by email and for notifications; never shown to others.",
        error_messages={"invalid": "That doesn't look like an email address (name@example.com)."},
    )
    time_zone = forms.ChoiceField(
        required=False,
        label="Time zone",
        widget=LongSelect,
        error_messages={"invalid_choice": "Pick a time zone from the list (e.g. Europe/Berlin)."},
    )

    def __init__(self, *args, hub_time_zone: str, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        choices = list(time_zone_choices())
        choices[0] = ("", f"The hub's time zone ({hub_time_zone})")
        self.fields["time_zone"].choices = choices
        self.fields["time_zone"].help_text = "Every time the hub shows you is in this zone."


class HubPasswordResetForm(PasswordResetForm):
    """Django's reset form, but the mail is sent by a worker after commit (``password_reset_mail``): sending
    it inside the request would make a known address answer measurably slower than an unknown one, and so
    tell which addresses have an account. The request only enqueues, for each active person with that
    address; the page says the same in every case."""

    def save(self, *, base_url: str, **kwargs) -> None:
        for user in self.get_users(self.cleaned_data["email"]):
            transaction.on_commit(functools.partial(_queue_reset_mail, user.pk, base_url))


def _queue_reset_mail(user_id: int, base_url: str) -> None:
    """Queue one reset mail; with the broker down the page must still say what it says for an unknown address
    (a 500 for known addresses only would tell which have an account), so the failure is logged, not raised."""
    try:
        password_reset_mail.delay(user_id, base_url)
    except OperationalError:
        log.warning("broker unreachable: a password reset mail was not queued (asking again will retry)")
