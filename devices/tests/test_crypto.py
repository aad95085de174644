from __future__ import annotations

import pytest

from devices import crypto
from devices.models import Device
from devices.services import device_register, device_rekey_all

pytestmark = pytest.mark.django_db


def test_it_stores_the_key_encrypted(settings):
    device = device_register(name="d", kind="tiiny", base_url="http://x", api_key="secret-key-1")
    raw = Device.objects.values_list("api_key_encrypted", flat=True).get(pk=device.pk)
    assert "secret-key-1" not in raw
    assert Device.objects.get(pk=device.pk).api_key == "secret-key-1"
    assert "secret-key-1" not in repr(device)


def test_it_survives_a_secret_rotation_with_fallbacks_and_rekeys(settings):
    device = device_register(name="d", kind="tiiny", base_url="http://x", api_key="secret-key-1")
    old = settings.SECRET_KEY
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = "a-brand-new-secret", [old]
    assert Device.objects.get(pk=device.pk).api_key == "secret-key-1"
    assert device_rekey_all() == 1
    settings.SECRET_KEY_FALLBACKS = []
    assert Device.objects.get(pk=device.pk).api_key == "secret-key-1"


def test_it_says_so_when_the_secret_is_lost(settings):
    device = device_register(name="d", kind="tiiny", base_url="http://x", api_key="secret-key-1")
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = "another-secret", []
    with pytest.raises(crypto.KeyUnreadable):
        Device.objects.get(pk=device.pk).api_key  # noqa: B018


def test_the_rekey_devices_command_rotates_and_says_how_many(settings):
    from io import StringIO

    from django.core.management import call_command
    from django.core.management.base import CommandError

    device = device_register(name="d", kind="tiiny", base_url="http://x", api_key="secret-key-1")
    old = settings.SECRET_KEY
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = "a-brand-new-secret", [old]
    out = StringIO()
    call_command("rekey_devices", stdout=out)
    assert out.getvalue().strip() == "re-encrypted 1 device key(s)"
    settings.SECRET_KEY_FALLBACKS = []
    assert Device.objects.get(pk=device.pk).api_key == "secret-key-1"
    settings.SECRET_KEY = "yet-another-secret"  # the key it was sealed with is gone: one clear line
    with pytest.raises(CommandError):
        call_command("rekey_devices", stdout=StringIO())
