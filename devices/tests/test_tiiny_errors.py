"""The Tiiny's answers as typed errors (``tiiny_errors``): pure, on statuses and messages alone.

``test_clients_mock.py`` checks the same mapping through the client, with the device's real envelopes.
"""

from __future__ import annotations

import httpx
import pytest

from devices import errors
from devices.clients.tiiny_errors import BUSY_CODE, busy_envelope, error_for


@pytest.mark.parametrize(
    ("status", "detail", "id_call", "expected"),
    [
        (401, "is not loaded", False, errors.AuthFailed),  # auth beats any message
        (403, None, False, errors.AuthFailed),
        (404, "Model_Not_Found", False, errors.ModelNotLoaded),  # the message beats the status
        (503, "no suitable model is currently running", False, errors.ModelNotLoaded),
        (409, "model not running", False, errors.ModelNotLoaded),
        (500, "xh2a backend fail", False, errors.Transient),
        (409, "cleanup_failed", False, errors.CleanupFailed),
        (409, "physical_stop_failed", False, errors.CleanupFailed),
        (409, "another load is under way", False, errors.DeviceBusy),
        (429, None, False, errors.DeviceBusy),
        (404, None, True, errors.NotFound),  # one of our ids: gone
        (404, "session not found", False, errors.NotFound),
        (404, None, False, errors.BadRequest),  # a path the firmware lacks
        (422, "bad field", False, errors.BadRequest),
        (500, "upstream TTS model failed", False, errors.BadRequest),  # the model refused: no retry helps
        (500, "out of memory", False, errors.Transient),
        (504, None, False, errors.Transient),
    ],
)
def test_it_maps_a_status_and_message_to_one_typed_error(status, detail, id_call, expected):
    err = error_for(status, detail, id_call=id_call)
    assert type(err) is expected
    assert err.status == status


def test_it_finds_the_busy_envelope_only_in_a_json_answer_with_its_code():
    busy = {"code": BUSY_CODE, "message": "The operation failed to complete."}
    assert busy_envelope(httpx.Response(200, json=busy)) == busy
    assert busy_envelope(httpx.Response(200, json={"code": 0})) is None
    assert busy_envelope(httpx.Response(200, json=[busy])) is None
    assert busy_envelope(httpx.Response(200, text=str(busy))) is None
    assert busy_envelope(httpx.Response(204, headers={"content-type": "application/json"})) is None
