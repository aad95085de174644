"""Channel secrets at rest: webhook secrets, Apprise URLs (they carry tokens), Web Push subscriptions.

Encrypted like device API keys (``devices.crypto``): Fernet under a key derived from ``SECRET_KEY`` (and its
fallbacks) with HKDF-SHA256, with a salt of our own, so a database dump alone reveals none of them.
"""

from __future__ import annotations

import json
from typing import Any

from cryptography.fernet import InvalidToken, MultiFernet

from hub.crypto import multi_fernet

_SALT = b"tiiny-hub/notify/channel-secret/v1"


class SecretUnreadable(Exception):
    """The stored secret was encrypted under a secret key that is no longer configured."""


def _multi() -> MultiFernet:
    return multi_fernet(_SALT)


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
