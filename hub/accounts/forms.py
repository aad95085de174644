from __future__ import annotations

from django import forms
from django.contrib.auth import password_validation

from hub.accounts.models import ApiToken, User


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

    def __init__(self, *args, user: User, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if not user.can_submit:
            # The service refuses "submit" for viewers too; saying so up front saves a round trip.
            self.fields["scopes"].help_text = "Viewers may create read tokens only."
        else:
            self.fields["scopes"].help_text = "Read: look at jobs, devices, results. Submit: also queue jobs."
