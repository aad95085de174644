"""The container check of a downloaded result (``devices.clients.containers``): whole files pass, every
truncation of one is refused, and a file of another format or a broken header is refused with a reason."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from devices.clients.containers import format_of, problem, problem_in
from devices.tests.media_samples import SAMPLES, box, glb, mp4


@pytest.mark.parametrize("fmt", sorted(SAMPLES))
def test_a_whole_file_passes(fmt, tmp_path):
    assert problem_in(SAMPLES[fmt], fmt) is None
    path = tmp_path / "result.download"
    path.write_bytes(SAMPLES[fmt])
    assert problem(path, fmt) is None


@settings(max_examples=200, deadline=None)
@given(fmt=st.sampled_from(sorted(SAMPLES)), cut=st.floats(min_value=0.0, max_value=1.0, exclude_max=True))
def test_every_truncation_of_a_whole_file_is_refused(fmt, cut):
    data = SAMPLES[fmt]
    short = data[: int(len(data) * cut)]
    assert problem_in(short, fmt) is not None


@settings(max_examples=100, deadline=None)
@given(fmt=st.sampled_from(["mp4", "wav", "glb", "png"]), extra=st.binary(min_size=1, max_size=64))
def test_bytes_after_the_end_are_refused(fmt, extra):
    assert problem_in(SAMPLES[fmt] + extra, fmt) is not None


@pytest.mark.parametrize("fmt", sorted(SAMPLES))
def test_another_format_is_refused(fmt):
    other = SAMPLES["png"] if fmt != "png" else SAMPLES["jpeg"]
    assert problem_in(other, fmt)


def test_an_mp4_without_moov_is_refused_and_a_faststart_one_passes():
    ftyp = box(b"ftyp", b"isom\x00\x00\x02\x00isom")
    assert "moov" in problem_in(ftyp + box(b"mdat", b"\x00" * 40), "mp4")
    assert problem_in(mp4(moov_last=False), "mp4") is None
    assert problem_in(b"\x00\x00\x00\x01mdat" + b"\x00" * 8, "mp4")  # a 64-bit size cut off
    assert problem_in(b"\x00\x00\x00\x04ftyp", "mp4")  # a box smaller than its own header


def test_a_glb_of_another_version_or_length_is_refused():
    data = bytearray(glb())
    data[4] = 1
    assert "version" in problem_in(bytes(data), "glb")
    assert problem_in(glb()[:-4], "glb")


def test_a_streamed_wav_of_unknown_size_is_left_to_the_length_check():
    data = bytearray(SAMPLES["wav"])
    data[4:8] = b"\xff\xff\xff\xff"
    assert problem_in(bytes(data), "wav") is None


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("video.mp4.download", "mp4"),
        ("audio.wav.download", "wav"),
        ("stage-1-shape.glb", "glb"),
        ("image.png.download", "png"),
        ("x.JPG", "jpeg"),
        ("song.mp3.download", None),
        ("download", None),
    ],
)
def test_the_format_comes_from_the_name(name, fmt):
    assert format_of(name) == fmt
    assert problem_in(b"anything", None) is None
