"""The per-kind estimate shapes and seeds (``jobs.kinds.estimates``): pure functions, the reference's numbers."""

from __future__ import annotations

import pytest

from devices.emulator.catalog import video_render_seconds
from jobs.kinds import estimates
from jobs.kinds.estimates import STAGE_3D_SECONDS, stage_3d_seconds, tiiny_video_seconds


def test_it_seeds_video_from_the_references_anchors():
    assert tiiny_video_seconds(832, 480, 2, 4) == pytest.approx(7 * 60, rel=0.01)
    assert tiiny_video_seconds(832, 480, 7, 4) == pytest.approx(12 * 60, rel=0.01)
    assert tiiny_video_seconds(1344, 768, 5, 4) == pytest.approx(32 * 60, rel=0.01)


def test_it_matches_the_emulators_formula():
    for args in ((832, 480, 3, 6), (1344, 768, 7, 8), (480, 832, 1, 4)):
        assert tiiny_video_seconds(*args) == pytest.approx(video_render_seconds(*args), rel=1e-6)


def test_it_seeds_other_kinds():
    assert estimates.mesh_seed("h", {"stages": ["shape"]}) == 420
    assert estimates.music_seed("RoyalCities/Foundation-1", {"seconds": 20}) == pytest.approx(68)
    assert estimates.tiiny_image_seed("z", {"size": "512x512", "steps": 8, "n": 2}) == pytest.approx(2 * 8.9)


def test_a_video_seed_reads_its_size_and_falls_back_on_a_bad_one():
    good = estimates.tiiny_video_seed("m", {"size": "832x480", "seconds": 2, "steps": 4})
    assert good == pytest.approx(tiiny_video_seconds(832, 480, 2, 4))
    assert estimates.tiiny_video_seed("m", {"size": "huge", "seconds": 2, "steps": 4}) == good


def test_the_stages_of_a_mesh_add_up_and_an_untimed_stage_counts_a_minute():
    assert stage_3d_seconds("texture") == STAGE_3D_SECONDS["texture"] == 540
    assert stage_3d_seconds("background") == 60
    assert estimates.mesh_seed("h", {"stages": ["shape", "texture", "export"]}) == 420 + 540 + 15
    assert estimates.mesh_seed("h", {}) == 420  # no stages: the shape alone
    assert estimates.mesh_shape("h", {"stages": ["shape", "export"]}) == "shape+export"


def test_songs_and_loops_seed_apart():
    song = estimates.music_seed("tencent/SongGeneration-v2-large", {"seconds": 60, "preview_seconds": 10})
    assert song == pytest.approx(40 + 1.5 * 70)
    assert estimates.music_seed("RoyalCities/Foundation-1", {"seconds": 10}) == pytest.approx(34)


def test_tensorsharp_seeds_follow_the_model_family():
    p = {"width": 832, "height": 480, "frames": 81, "steps": 50}
    wan, h3 = estimates.ts_video_seed("Wan2.2.gguf", p), estimates.ts_video_seed("h3.gguf", p)
    assert wan < h3
    assert estimates.ts_video_shape("h3.gguf", p) == "832x480:81f:50st"
    assert estimates.ts_edit_shape("q", {"steps": 30}) == "edit:30st"


def test_speech_groups_by_ten_words():
    eleven = {"input": " ".join(["word"] * 11)}
    assert estimates.speech_shape("t", eleven) == "w10"
    assert estimates.speech_shape("t", {"input": ""}) == "w0"  # never zero words for the seed
    assert estimates.speech_seed("t", {"input": ""}) == pytest.approx(0.5 + 0.4 / 2.1 + 1.0)
