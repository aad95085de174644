"""A render through the real worker and the Tiiny emulator stores files that tell how they were made
(``jobs.files.story``, written where the collect step saves the result)."""

from __future__ import annotations

import json
import struct
import wave
from io import BytesIO

import pytest
from PIL import Image

from jobs.files import store
from jobs.queue.services import job_submit
from jobs.tests.conftest import wait_job
from jobs.tests.files.test_story import riff_chunks

pytestmark = pytest.mark.integration


def test_rendered_results_carry_their_settings(engine, tiiny, pocket, member, settings):
    image = job_submit(
        owner=member,
        device=pocket,
        kind="image",
        model_id="Tongyi-MAI/Z-Image-Turbo",
        params={"prompt": "a lighthouse at dusk", "size": "512x512", "n": 2, "steps": 8, "seed": 5},
    )
    speech = job_submit(
        owner=member,
        device=pocket,
        kind="speech",
        model_id="Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice",
        params={"input": "Good night.", "voice": "serena", "response_format": "wav"},
    )
    for job in (image, speech):
        wait_job(job, timeout=60, engine=engine)

    second = image.artifacts.get(name="image-2.png")
    data = store.read_bytes(second.file.name)
    with Image.open(BytesIO(data)) as img:
        img.load()
        told = json.loads(img.text["tiiny-hub"])
    assert told["prompt"] == "a lighthouse at dusk" and told["seed"] == 6 and told["steps"] == 8
    assert told["device"] == pocket.name and told["url"].endswith(f"/jobs/{image.pk}/")
    assert store.digest_of(second.file.name) == (second.sha256, second.bytes)

    voice = speech.artifacts.get(name="speech.wav")
    data = store.read_bytes(voice.file.name)
    with wave.open(BytesIO(data)) as w:
        assert w.getnframes() > 0
    assert struct.unpack("<I", data[4:8])[0] + 8 == len(data)
    info = riff_chunks(data)[b"LISTINFO"]
    comment = info[info.index(b"ICMT") + 8 :].split(b"\x00", 1)[0]
    assert json.loads(comment)["input"] == "Good night."
