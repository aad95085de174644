"""Channel secrets at rest: webhook secrets, Apprise URLs (they carry tokens), Web Push subscriptions.

Encrypted like device API keys (``devices.crypto``): Fernet under a key derived from ``SECRET_KEY`` (and its
fallbacks) with HKDF-SHA256, with a salt of our own, so a database dump alone reveals none of them.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings

_SALT = b"tiiny-hub/notify/channel-secret/v1"


class SecretUnreadable(Exception):
    """The stored secret was encrypted under a secret key that is no longer configured."""


def _fernet_for(secret: str) -> Fernet:
    raw = HKDF(algorithm=hashes.SHA256(), length=32, salt=_SALT, info=b"fernet").derive(secret.encode())
    return Fernet(base64.urlsafe_b64encode(raw))


def _multi() -> MultiFernet:
    keys = [settings.SECRET_KEY, *getattr(settings, "SECRET_KEY_FALLBACKS", [])]
    return MultiFernet([_fernet_for(k) for k in keys if k])


def seal(data: dict[str, Any]) -> str:
    return _multi().encrypt(json.dumps(data, sort_keys=True).encode()).decode() if data else ""


def unseal(token: str) -> dict[str, Any]:
    if not token:
        return {}
    try:
        return json.loads(_multi().decrypt(token.encode()))
    except InvalidToken:
        raise SecretUnreadable(
            "The channel's stored settings cannot be decrypted with the configured secret keys: "
            "edit the channel and enter them again."
        ) from None


def rotate(token: str) -> str:
    """Re-encrypt under the current SECRET_KEY (the token must decrypt under it or a fallback)."""
    if not token:
        return ""
    try:
        return _multi().rotate(token.encode()).decode()
    except InvalidToken:
        raise SecretUnreadable(
            "A channel's stored settings cannot be decrypted with the configured secret keys."
        ) from None
