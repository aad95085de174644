"""Secrets at rest: one Fernet key per purpose, derived from ``SECRET_KEY`` (and its fallbacks).

Fernet (AES-128-CBC + HMAC-SHA256) under a key derived with HKDF-SHA256 and a salt naming the purpose, so the
database alone never reveals a stored secret, and the SECRET_KEY used for sessions is never used directly as
an encryption key. ``SECRET_KEY_FALLBACKS`` keep old tokens readable while a rotation is under way
(``devices.crypto`` tells the rotation story). Users: ``devices.crypto`` (device API keys) and
``notify.crypto`` (notification channels' secrets).
"""

from __future__ import annotations

import base64

from cryptography.fernet import Fernet, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings


def _fernet_for(secret: str, salt: bytes) -> Fernet:
    raw = HKDF(algorithm=hashes.SHA256(), length=32, salt=salt, info=b"fernet").derive(secret.encode())
    return Fernet(base64.urlsafe_b64encode(raw))


def multi_fernet(salt: bytes) -> MultiFernet:
    """Encrypts under the current SECRET_KEY; decrypts under it or any fallback."""
    secrets = [settings.SECRET_KEY, *getattr(settings, "SECRET_KEY_FALLBACKS", [])]
    return MultiFernet([_fernet_for(s, salt) for s in secrets if s])
