"""Checks for a stored result that is the device's render with its story written in (``jobs.files.story``)."""

from __future__ import annotations

import struct


def mp4_boxes(data: bytes) -> dict[bytes, bytes]:
    """An MP4's top-level boxes by type (the last of each type)."""
    found, pos = {}, 0
    while pos + 8 <= len(data):
        size, btype = struct.unpack(">I4s", data[pos : pos + 8])
        if size == 1:
            size = struct.unpack(">Q", data[pos + 8 : pos + 16])[0]
        found[btype] = data[pos : pos + (size or len(data) - pos)]
        pos += size or len(data)
    return found


def assert_device_video(device: bytes, stored: bytes) -> None:
    """The stored MP4 holds the device's media data byte for byte, and a header that tells its story."""
    assert mp4_boxes(stored)[b"mdat"] == mp4_boxes(device)[b"mdat"]
    assert b"\xa9cmt" in mp4_boxes(stored)[b"moov"]
