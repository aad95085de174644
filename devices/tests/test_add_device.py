from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from devices.emulator.testing import free_port
from devices.models import Device

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    from io import StringIO

    out = StringIO()
    call_command("add_device", *args, stdout=out)
    return out.getvalue()


def test_it_adds_a_device_and_checks_it(tiiny):
    out = run("--name", "Pocket", "--kind", "tiiny", "--url", tiiny.base_url, "--api-key", tiiny.api_key)
    assert out.startswith("Pocket: added, connected (") and "models installed" in out
    device = Device.objects.get(name="Pocket")
    assert device.api_key == tiiny.api_key
    assert device.state == Device.State.ONLINE
    assert tiiny.api_key not in out


def test_it_is_idempotent_by_name(tiiny):
    run("--name", "Pocket", "--kind", "tiiny", "--url", "http://127.0.0.1:9", "--no-check")
    out = run("--name", "Pocket", "--kind", "tiiny", "--url", tiiny.base_url, "--api-key", tiiny.api_key)
    assert out.startswith("Pocket: updated")
    assert Device.objects.count() == 1
    assert Device.objects.get().base_url == tiiny.base_url


def test_it_fails_with_one_line_when_the_key_is_wrong(tiiny):
    with pytest.raises(CommandError) as info:
        run("--name", "Pocket", "--kind", "tiiny", "--url", tiiny.base_url, "--api-key", "wrong")
    msg = str(info.value)
    assert "\n" not in msg and "rejected the API key" in msg
    assert "wrong" not in msg.replace("wrong-", "")


def test_it_fails_with_one_line_when_the_device_cannot_be_reached():
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(CommandError) as info:
        run("--name", "Gone", "--kind", "tiiny", "--url", url, "--api-key", "k")
    assert "\n" not in str(info.value) and "cannot be reached" in str(info.value)


def test_it_fails_with_one_line_when_the_device_is_locked(tiiny):
    tiiny.power_cycle()
    with pytest.raises(CommandError) as info:
        run("--name", "Pocket", "--kind", "tiiny", "--url", tiiny.base_url, "--api-key", tiiny.api_key)
    assert "\n" not in str(info.value) and "tiiny login" in str(info.value)


def test_it_refuses_a_url_with_credentials():
    with pytest.raises(CommandError) as info:
        run("--name", "X", "--kind", "tiiny", "--url", "http://me:secret@10.0.0.2", "--no-check")
    assert "user name or password" in str(info.value)
    assert not Device.objects.exists()


def test_it_saves_without_checking():
    out = run("--name", "Later", "--kind", "tensorsharp", "--url", "http://10.0.0.9:5000", "--no-check")
    assert out.strip() == "Later: added (not checked)"
