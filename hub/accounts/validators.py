"""Password rules beyond Django's own (see AUTH_PASSWORD_VALIDATORS in hub.settings)."""

from __future__ import annotations

from django.core.exceptions import ValidationError


class MaximumLengthValidator:
    """A cap on length: a long passphrase is welcome, a megabyte of text is not a password.

    128 characters hold any passphrase or password-manager output; anything longer is a paste accident
    (or someone testing what the hub will store and hash).
    """

    def __init__(self, max_length: int = 128) -> None:
        self.max_length = max_length

    def validate(self, password: str, user=None) -> None:
        if len(password) > self.max_length:
            raise ValidationError(
                f"This password is too long: at most {self.max_length} characters.",
                code="password_too_long",
                params={"max_length": self.max_length},
            )

    def get_help_text(self) -> str:
        return f"Your password can't be longer than {self.max_length} characters."
