"""Small valid result files of every checked format, built in memory (for the container and download tests)."""

from __future__ import annotations

import io
import struct
import wave


def box(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", 8 + len(body)) + kind + body


def mp4(payload: bytes = b"\x00" * 300, *, moov_last: bool = True) -> bytes:
    """ftyp, mdat, moov (ffmpeg's default order) or ftyp, moov, mdat ("faststart")."""
    ftyp = box(b"ftyp", b"isom\x00\x00\x02\x00isomiso2avc1mp41")
    moov = box(b"moov", box(b"mvhd", b"\x00" * 100) + box(b"trak", box(b"tkhd", b"\x00" * 84)))
    mdat = box(b"mdat", payload)
    return ftyp + mdat + moov if moov_last else ftyp + moov + mdat


def wav(frames: int = 400) -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(8000)
        w.writeframes(b"\x01\x02" * frames)
    return out.getvalue()


def glb(json_chunk: bytes = b'{"asset":{"version":"2.0"}}  ', binary: bytes = b"\x00" * 64) -> bytes:
    chunks = struct.pack("<I4s", len(json_chunk), b"JSON") + json_chunk
    chunks += struct.pack("<I4s", len(binary), b"BIN\x00") + binary
    return struct.pack("<4sII", b"glTF", 2, 12 + len(chunks)) + chunks


def image(fmt: str) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (24, 16), (200, 30, 90)).save(out, format=fmt)
    return out.getvalue()


SAMPLES = {
    "mp4": mp4(),
    "wav": wav(),
    "glb": glb(),
    "png": image("PNG"),
    "jpeg": image("JPEG"),
}
