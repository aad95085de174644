"""The secrets guard (``hub.tests.leakguard``) registers every secret and fails a test that lets one out.

The guard watches the whole suite; these tests prove it can fail: they leak on purpose through real views,
a log record and a websocket frame, take the findings back (so they themselves pass), and run one leaking
test in a pytest of its own to see it fail.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hub.tests import leakguard

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]


def this_test() -> str:
    return os.environ["PYTEST_CURRENT_TEST"].rsplit(" ", 1)[0]


@pytest.fixture
def device_with_key(db):
    from devices.services import device_register

    return device_register(
        name="Leaky", kind="tiiny", base_url="http://127.0.0.1:9", api_key="leak-me-device-key-1234"
    )


def test_it_registers_every_token_and_device_key(member, device_with_key):
    from hub.accounts.tokens import token_create

    _, raw = token_create(user=member, name="script", scopes=["read"])
    assert leakguard.leaks_in(f"x {raw} y") == ["an API token"]
    assert leakguard.leaks_in("the key is leak-me-device-key-1234") == ["the API key of device 'Leaky'"]
    assert leakguard.leaks_in("nothing here, thub_notarealtokenatallnotatall") == []


def test_a_secret_in_an_answer_a_log_or_a_frame_is_found(member, member_client, device_with_key):
    from asgiref.sync import async_to_sync
    from channels.testing import WebsocketCommunicator

    from hub.accounts.tokens import token_create

    _, raw = token_create(user=member, name="script", scopes=["read"])
    # /v1 names an unknown route in its 404: a real view that echoes what it was asked for.
    assert member_client.get("/v1/leak-me-device-key-1234").status_code == 404
    assert member_client.get(f"/v1/{raw}").status_code == 404
    logging.getLogger("hub.demo").warning("calling the device with %s", "leak-me-device-key-1234")

    async def frame():
        async def app(scope, receive, send):
            await receive()
            await send({"type": "websocket.accept"})
            await send({"type": "websocket.send", "text": f"<p>{raw}</p>"})

        comm = WebsocketCommunicator(app, "/ws/hub/")
        await comm.connect()
        await comm.receive_from()
        await comm.disconnect()

    async_to_sync(frame)()
    found = leakguard.take_findings(this_test())
    assert any("API key of device 'Leaky' in the answer to GET /v1/<secret>" in f for f in found), found
    assert any(f.startswith("an API token in the answer to GET /v1/<secret>") for f in found), found
    assert any("a log record of hub.demo" in f for f in found), found
    assert any("an API token in a websocket frame" in f for f in found), found
    assert all("leak-me-device-key-1234" not in f and raw not in f for f in found)  # never the secret


def test_the_one_time_display_of_a_new_token_is_allowed(member_client):
    response = member_client.post("/accounts/tokens/new/", {"name": "laptop", "scopes": ["read"]})
    assert response.status_code == 201 and b"thub_" in response.content
    assert leakguard.take_findings(this_test()) == []


def test_a_leaking_test_fails_the_run(tmp_path):
    """A pytest of its own with one test that logs a device key: it fails, naming the leak."""
    test_file = ROOT / "hub" / "tests" / f"test_zz_leak_demo_{os.getpid()}.py"
    test_file.write_text(
        textwrap.dedent(
            """
            import logging

            def test_it_leaks(db):
                from devices.services import device_register

                device_register(name="Demo", kind="tiiny", base_url="http://127.0.0.1:9",
                                api_key="demo-device-key-5678")
                logging.getLogger("hub.demo").info("key=%s", "demo-device-key-5678")

            def test_it_does_not_leak(db):
                from devices.services import device_register

                device_register(name="Demo", kind="tiiny", base_url="http://127.0.0.1:9",
                                api_key="demo-device-key-9999")
            """
        )
    )
    env = {k: v for k, v in os.environ.items() if k not in ("HUB_TEST_DB", "PYTEST_CURRENT_TEST")}
    try:
        run = subprocess.run(
            [sys.executable, "-m", "pytest", str(test_file), "-q", "-p", "no:randomly"],
            cwd=ROOT,
            env=env,  # the same private Redis (HUB_TEST_REDIS_URL), its own database
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        test_file.unlink(missing_ok=True)
    out = run.stdout + run.stderr
    assert run.returncode == 1, out
    assert "2 passed, 1 error" in out and "ERROR at teardown of test_it_leaks" in out, out
    assert "the API key of device 'Demo' in a log record of hub.demo (INFO)" in out, out
