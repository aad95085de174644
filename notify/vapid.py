"""The hub's VAPID key pair for Web Push: made once, never printed, never logged.

``make up`` (scripts/up.py) writes the private key to the git-ignored .env as ``HUB_VAPID_PRIVATE_KEY`` the
first time it runs. A hub (or a test run) without one makes one on first use and keeps it in the data dir
(``vapid-private.key``, mode 0600); every process reads the same file, and an exclusive create means two
processes starting at once still agree on one key. The public half is the ``applicationServerKey`` browsers
subscribe with; changing the private key orphans every subscription (browsers must subscribe again).

This module needs only ``cryptography`` so ``scripts/up.py`` can import it before Django is set up.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

KEY_FILE = "vapid-private.key"


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def generate_private_key() -> str:
    """A new P-256 private key as base64url of its 32 raw bytes (the form pywebpush/py-vapid read)."""
    key = ec.generate_private_key(ec.SECP256R1())
    return _b64url(key.private_numbers().private_value.to_bytes(32, "big"))


def public_key_for(private_b64: str) -> str:
    """The uncompressed public point, base64url: what ``pushManager.subscribe`` takes."""
    value = int.from_bytes(_b64url_decode(private_b64), "big")
    public = ec.derive_private_key(value, ec.SECP256R1()).public_key()
    return _b64url(
        public.public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    )


def _from_file(path: Path) -> str:
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    # Written aside, then linked into place: link() fails if the name exists, so two processes starting at once
    # agree on one key, and nobody ever reads a half-written file.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(generate_private_key() + "\n")
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass  # another process won: use theirs
    finally:
        tmp.unlink(missing_ok=True)
    return path.read_text().strip()


def private_key() -> str:
    from django.conf import settings

    return settings.NOTIFY_VAPID_PRIVATE_KEY or _from_file(Path(settings.DATA_DIR) / KEY_FILE)


def public_key() -> str:
    return public_key_for(private_key())
