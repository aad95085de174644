"""Is a downloaded result whole? A check of its container against its format, before it counts as stored.

Pure and small: it reads a few bytes at known places (a header, a trailer, the MP4 box headers), never the whole
file, so a 200 MB video costs a few dozen reads. ``problem(path, fmt)`` answers None for a file that looks whole,
or a sentence saying what is wrong. A format it does not know (MP3, OBJ...) is not checked: the length the device
declared (``devices.clients.base``) is then the only proof.

- MP4 (and MOV): the top-level boxes fill the file exactly (the last one ends at the last byte) and one is a
  ``moov``. A cut file ends inside a box; a file cut exactly between boxes loses its ``moov`` when that comes last
  (ffmpeg's default), and for a "faststart" file (``moov`` first) the declared length is what catches it.
- WAV: ``RIFF`` … ``WAVE`` and the RIFF size is the file's size less 8 (a streaming writer's "unknown" sizes, 0
  and 0xFFFFFFFF, are let through: the length check stands for them).
- GLB: magic ``glTF``, version 2, and the header's length is the file's size.
- PNG: the signature, and an ``IEND`` chunk is the last 12 bytes.
- JPEG: starts with SOI (FF D8) and ends with EOI (FF D9), trailing NUL padding allowed.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import BinaryIO

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
PNG_IEND = b"\x00\x00\x00\x00IEND\xaeB`\x82"
_SUFFIXES = {
    "mp4": "mp4",
    "m4v": "mp4",
    "m4a": "mp4",
    "mov": "mp4",
    "wav": "wav",
    "glb": "glb",
    "png": "png",
    "jpg": "jpeg",
    "jpeg": "jpeg",
}
MAX_BOXES = 100_000  # a hostile file of tiny boxes can't keep the walk going for long


def format_of(name: str) -> str | None:
    """The format to check a file named ``name`` against (``video.mp4.download`` → ``mp4``), or None."""
    parts = name.lower().split(".")
    if parts and parts[-1] in ("download", "part"):
        parts = parts[:-1]
    return _SUFFIXES.get(parts[-1]) if len(parts) > 1 else None


def problem(path: Path, fmt: str | None) -> str | None:
    """None when the file at ``path`` is a whole ``fmt`` (or ``fmt`` is not one checked), else what is wrong."""
    check = _CHECKS.get(fmt or "")
    if check is None:
        return None
    path = Path(path)
    size = path.stat().st_size
    with open(path, "rb") as fh:
        return check(fh, size)


def problem_in(data: bytes, fmt: str | None) -> str | None:
    """The same check for bytes in memory (small results, tests)."""
    import io

    check = _CHECKS.get(fmt or "")
    return None if check is None else check(io.BytesIO(data), len(data))


def _at(fh: BinaryIO, offset: int, n: int) -> bytes:
    fh.seek(offset)
    return fh.read(n)


def _mp4(fh: BinaryIO, size: int) -> str | None:
    pos, seen = 0, set()
    for _ in range(MAX_BOXES):
        if pos == size:
            break
        head = _at(fh, pos, 16)
        if len(head) < 8:
            return f"The MP4 ends inside a box header at byte {pos}."
        length, kind = struct.unpack(">I4s", head[:8])
        if length == 1:
            if len(head) < 16:
                return f"The MP4 ends inside a box header at byte {pos}."
            length = struct.unpack(">Q", head[8:16])[0]
        elif length == 0:  # "to the end of the file": only the last box may say so
            length = size - pos
        if length < 8:
            return f"The MP4 has a broken box at byte {pos}."
        if pos + length > size:
            return f"The MP4 is cut short: a {kind.decode('latin-1')!r} box runs past its end."
        seen.add(kind)
        pos += length
    else:
        return "The MP4 has too many boxes to be a video."
    if pos == 0:
        return "The MP4 is empty."
    if b"moov" not in seen:
        return "The MP4 has no 'moov' box (its index): it is not whole."
    return None


def _wav(fh: BinaryIO, size: int) -> str | None:
    head = _at(fh, 0, 12)
    if len(head) < 12 or head[:4] != b"RIFF" or head[8:12] != b"WAVE":
        return "The WAV has no RIFF/WAVE header."
    riff = struct.unpack("<I", head[4:8])[0]
    if riff in (0, 0xFFFFFFFF):
        return None
    if riff + 8 != size:
        return f"The WAV's RIFF size says {riff + 8} bytes; the file has {size}."
    return None


def _glb(fh: BinaryIO, size: int) -> str | None:
    head = _at(fh, 0, 12)
    if len(head) < 12 or head[:4] != b"glTF":
        return "The GLB has no glTF header."
    version, length = struct.unpack("<II", head[4:12])
    if version != 2:
        return f"The GLB is version {version}, not 2."
    if length != size:
        return f"The GLB's header says {length} bytes; the file has {size}."
    return None


def _png(fh: BinaryIO, size: int) -> str | None:
    if _at(fh, 0, 8) != PNG_SIGNATURE:
        return "The PNG has no PNG signature."
    if size < 8 + len(PNG_IEND) or _at(fh, size - len(PNG_IEND), len(PNG_IEND)) != PNG_IEND:
        return "The PNG does not end with IEND: it is cut short."
    return None


def _jpeg(fh: BinaryIO, size: int) -> str | None:
    if _at(fh, 0, 2) != b"\xff\xd8":
        return "The JPEG has no start-of-image marker."
    tail = _at(fh, max(0, size - 4096), 4096).rstrip(b"\x00")
    if size < 4 or not tail.endswith(b"\xff\xd9"):
        return "The JPEG does not end with its end-of-image marker: it is cut short."
    return None


_CHECKS = {"mp4": _mp4, "wav": _wav, "glb": _glb, "png": _png, "jpeg": _jpeg}
