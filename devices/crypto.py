"""Device API keys, encrypted at rest.

Keys are encrypted with Fernet (AES-128-CBC + HMAC-SHA256) under a key derived from ``SECRET_KEY`` with
HKDF-SHA256 and a purpose-specific salt, so the database alone never reveals a device key, and the same
SECRET_KEY used for sessions is never used directly as an encryption key.

Rotating the secret (documented in the README's configuration table):

1. Put the old value in ``HUB_SECRET_KEY_FALLBACKS`` (comma separated; it becomes Django's
   ``SECRET_KEY_FALLBACKS``) and the new one in ``HUB_SECRET_KEY``; restart. Stored device keys still decrypt,
   through the fallbacks (and sessions signed with the old key stay valid, Django's own rotation story).
2. Run ``python manage.py rekey_devices``: every stored key is re-encrypted under the new secret.
3. Remove the old value from ``HUB_SECRET_KEY_FALLBACKS``.

If the secret is lost, stored keys cannot be read: the device shows "auth failed", and an admin enters the
key again. The plaintext key is never logged and never rendered (see ``Device.__repr__``, the admin form).
"""

from __future__ import annotations

from cryptography.fernet import InvalidToken, MultiFernet

from hub.crypto import multi_fernet

_SALT = b"tiiny-hub/devices/api-key/v1"


class KeyUnreadable(Exception):
    """The stored key was encrypted under a secret that is no longer configured."""


def _multi() -> MultiFernet:
    return multi_fernet(_SALT)


def encrypt(plaintext: str) -> str:
    if not plaintext:
        return ""
    return _multi().encrypt(plaintext.encode()).decode()


def decrypt(token: str) -> str:
    if not token:
        return ""
    try:
        return _multi().decrypt(token.encode()).decode()
    except InvalidToken:
        raise KeyUnreadable(
            "The stored API key cannot be decrypted with the configured secret keys."
        ) from None


def rotate(token: str) -> str:
    """Re-encrypt under the current SECRET_KEY (the token must decrypt under it or a fallback)."""
    if not token:
        return ""
    try:
        return _multi().rotate(token.encode()).decode()
    except InvalidToken:
        raise KeyUnreadable(
            "The stored API key cannot be decrypted with the configured secret keys."
        ) from None
