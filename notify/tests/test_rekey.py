"""Rotating HUB_SECRET_KEY: channels' sealed settings still open through the fallbacks, and rekey_channels
re-seals them under the new key."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from notify.crypto import SecretUnreadable, unseal
from notify.models import Channel
from notify.services import channel_create

pytestmark = pytest.mark.django_db


def test_rotation_keeps_channels_readable(member, settings, capsys):
    channel = channel_create(
        owner=member, kind="webhook", name="h", url="https://h.example.org/x", secret="s" * 20
    )
    old = settings.SECRET_KEY
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = "a-brand-new-secret-key-for-the-hub", [old]
    assert unseal(Channel.objects.get(pk=channel.pk).sealed)["secret"] == "s" * 20  # through the fallback

    call_command("rekey_channels")
    assert "re-sealed 1 channel(s)" in capsys.readouterr().out
    settings.SECRET_KEY_FALLBACKS = []
    assert unseal(Channel.objects.get(pk=channel.pk).sealed)["url"] == "https://h.example.org/x"

    settings.SECRET_KEY = "yet-another-key-nobody-kept"
    with pytest.raises(SecretUnreadable):
        unseal(Channel.objects.get(pk=channel.pk).sealed)
