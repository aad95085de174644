from __future__ import annotations

import pytest

from jobs.eta import seed_seconds, tiiny_video_seconds

V = "MiniMaxAI/MiniMax-H3-Turbo"


def test_it_seeds_video_from_the_references_anchors():
    assert tiiny_video_seconds(832, 480, 2, 4) == pytest.approx(7 * 60, rel=0.01)
    assert tiiny_video_seconds(832, 480, 7, 4) == pytest.approx(12 * 60, rel=0.01)
    assert tiiny_video_seconds(1344, 768, 5, 4) == pytest.approx(32 * 60, rel=0.01)


def test_it_matches_the_emulators_formula():
    from devices.emulator.catalog import video_render_seconds

    for args in ((832, 480, 3, 6), (1344, 768, 7, 8), (480, 832, 1, 4)):
        assert tiiny_video_seconds(*args) == pytest.approx(video_render_seconds(*args), rel=1e-6)


def test_it_seeds_other_kinds():
    assert seed_seconds("mesh", "h", {"stages": ["shape"]}) == 420
    assert seed_seconds("music", "RoyalCities/Foundation-1", {"seconds": 20}) == pytest.approx(68)
    assert seed_seconds("image", "z", {"size": "512x512", "steps": 8, "n": 2}) == pytest.approx(2 * 8.9)


def test_it_learns_from_finished_jobs(member, db):
    from devices.models import Device
    from jobs.eta import estimate, learn
    from jobs.models import Job

    device = Device.objects.create(name="d", base_url="http://127.0.0.1:1")
    params = {"prompt": "x", "size": "832x480", "seconds": 2, "steps": 4}
    assert estimate(
        device_id=device.pk, device_kind="tiiny", kind="video", model_id=V, params=params
    ) == pytest.approx(420, rel=0.01)
    for secs in (300.0, 400.0):
        learn(
            Job.objects.create(
                owner=member, device=device, kind="video", model_id=V, params=params, device_seconds=secs
            )
        )
    assert estimate(
        device_id=device.pk, device_kind="tiiny", kind="video", model_id=V, params=params
    ) == pytest.approx(0.3 * 400 + 0.7 * 300)
