from __future__ import annotations

from django import forms

from hub.accounts.models import User


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
        min_length=8,
        label="Password (optional)",
        widget=forms.PasswordInput(render_value=True),
        help_text="Leave empty to have one generated; it is shown once.",
    )

    def clean_username(self) -> str:
        name = self.cleaned_data["username"].strip()
        if User.objects.filter(username__iexact=name).exists():
            raise forms.ValidationError(f"“{name}” is already here; change their role in the list below.")
        return name


class RoleForm(forms.Form):
    role = forms.ChoiceField(choices=User.Role.choices, label="Role")


class ActiveForm(forms.Form):
    active = forms.TypedChoiceField(
        choices=[("1", "Active"), ("0", "Deactivated")], coerce=lambda v: v == "1"
    )
