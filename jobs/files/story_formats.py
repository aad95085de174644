"""The writers of ``jobs.files.story``: a result's settings in each format's own metadata, the media untouched.

Each writer reads the file from ``src`` and writes the whole file with its story to ``out``; :func:`write` picks
one by the file's first bytes (the name only for OBJ, a text format) and answers False for a format it has no
writer for. A file a writer can't make sense of raises :class:`StoryError` (the caller keeps the file as it came).
The formats' own layouts by hand (PNG, JPEG, WAV, GLB, OBJ) or through mutagen (MP4, MP3), nothing decoded or
re-encoded.
"""

from __future__ import annotations

import json
import shutil
import struct
import zlib
from collections.abc import Callable
from typing import Any, BinaryIO

from mutagen import MutagenError
from mutagen.id3 import COMM, TIT2, Encoding
from mutagen.mp3 import MP3
from mutagen.mp4 import MP4, AtomError, Atoms

KEY = "tiiny-hub"
SOFTWARE = "Tiiny Hub"
CHUNK = 1024 * 1024


class StoryError(ValueError):
    """The file is not what its first bytes promised; nothing is written into it."""


def story_json(story: dict[str, Any]) -> str:
    return json.dumps(story, ensure_ascii=False, separators=(",", ":"))


def write(src: BinaryIO, out: BinaryIO, story: dict[str, Any], human: str, *, name: str = "") -> bool:
    """Copy ``src`` to ``out`` with the story written in; False (nothing written to ``out``) for a format
    without a writer. ``out`` is read back and rewritten in place for MP4 and MP3 (a ``BytesIO``, or a file
    opened ``w+b``)."""
    head = src.read(16)
    src.seek(0)
    writer = _writer_for(head, name)
    if writer is None:
        return False
    writer(src, out, story, human)
    return True


def _writer_for(head: bytes, name: str) -> Callable[[BinaryIO, BinaryIO, dict[str, Any], str], None] | None:
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return _png
    if head.startswith(b"\xff\xd8\xff"):
        return _jpeg
    if head[:4] == b"RIFF" and head[8:12] == b"WAVE":
        return _wav
    if head[:4] == b"glTF":
        return _glb
    if head[4:8] == b"ftyp":
        return _mp4
    if head[:3] == b"ID3" or (len(head) > 1 and head[0] == 0xFF and head[1] & 0xE0 == 0xE0):
        return _mp3
    if name.lower().endswith(".obj"):
        return _obj
    return None


# -- PNG ---------------------------------------------------------------------------------------------------------
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
PNG_KEYS = ("parameters", KEY)


def png_chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    """A PNG's chunks as (type, body); StoryError for bytes that are not one."""
    if not data.startswith(PNG_SIGNATURE):
        raise StoryError("not a PNG")
    chunks, pos = [], len(PNG_SIGNATURE)
    while pos + 8 <= len(data):
        (length,), ctype = struct.unpack(">I", data[pos : pos + 4]), data[pos + 4 : pos + 8]
        end = pos + 12 + length
        if end > len(data):
            raise StoryError("a PNG chunk runs past the end of the file")
        chunks.append((ctype, data[pos + 8 : pos + 8 + length]))
        pos = end
        if ctype == b"IEND":
            break
    if not chunks or chunks[0][0] != b"IHDR" or chunks[-1][0] != b"IEND":
        raise StoryError("a PNG without its IHDR or IEND")
    return chunks


def _png_chunk(ctype: bytes, body: bytes) -> bytes:
    return (
        struct.pack(">I", len(body)) + ctype + body + struct.pack(">I", zlib.crc32(ctype + body) & 0xFFFFFFFF)
    )


def _itxt(keyword: str, text: str) -> bytes:
    return keyword.encode("latin-1") + b"\x00\x00\x00\x00\x00" + text.encode("utf-8")


def _text_of(ctype: bytes, body: bytes) -> tuple[str, str] | None:
    """(keyword, text) of a tEXt or uncompressed iTXt chunk."""
    keyword, sep, rest = body.partition(b"\x00")
    if not sep:
        return None
    if ctype == b"tEXt":
        return keyword.decode("latin-1"), rest.decode("latin-1")
    if ctype == b"iTXt" and len(rest) >= 2:
        compressed, rest = rest[0], rest[2:]
        _lang, _, rest = rest.partition(b"\x00")
        _translated, _, text = rest.partition(b"\x00")
        try:
            if (
                compressed
            ):  # never the hub's own; at most TEXT_MAX of it (a small chunk may inflate to gigabytes)
                text = zlib.decompressobj().decompress(text, TEXT_MAX)
            return keyword.decode("latin-1"), text.decode("utf-8")
        except (zlib.error, UnicodeDecodeError):
            return None
    return None


#: The most of a text chunk :func:`png_text_from` reads (a story is a few KB; a bigger chunk is not the hub's).
TEXT_MAX = 256 * 1024


def png_text_from(src: BinaryIO) -> dict[str, str]:
    """The text chunks before a PNG's image data, by keyword, read chunk by chunk from the file (the image data
    is never read): {} for anything that is not a PNG."""
    if src.read(8) != PNG_SIGNATURE:
        return {}
    found: dict[str, str] = {}
    while len(header := src.read(8)) == 8:
        (length,), ctype = struct.unpack(">I", header[:4]), header[4:]
        if ctype in (b"IDAT", b"IEND"):
            break
        if ctype in (b"tEXt", b"iTXt") and length <= TEXT_MAX:
            body = src.read(length)
            if (pair := _text_of(ctype, body)) is not None:
                found.setdefault(*pair)
            src.seek(4, 1)  # the CRC
        else:
            src.seek(length + 4, 1)
    return found


def _png(src: BinaryIO, out: BinaryIO, story: dict[str, Any], human: str) -> None:
    chunks = png_chunks(src.read())
    ours = _png_chunk(b"iTXt", _itxt("parameters", human)) + _png_chunk(
        b"iTXt", _itxt(KEY, story_json(story))
    )
    out.write(PNG_SIGNATURE)
    placed = False
    for ctype, body in chunks:
        pair = _text_of(ctype, body) if ctype in (b"tEXt", b"iTXt") else None
        if pair is not None and pair[0] in PNG_KEYS:
            continue  # told before (a collect run twice): the new story replaces it
        if not placed and ctype in (b"IDAT", b"IEND"):
            out.write(ours)  # before the image data: readers that stop at the first IDAT see it too
            placed = True
        out.write(_png_chunk(ctype, body))


# -- JPEG --------------------------------------------------------------------------------------------------------
def _jpeg(src: BinaryIO, out: BinaryIO, story: dict[str, Any], human: str) -> None:
    data = src.read()
    comment = story_json(story).encode("utf-8")
    if len(comment) > 65533:
        raise StoryError("the story is longer than a JPEG comment can hold")
    pos = 2
    while pos + 4 <= len(data) and data[pos] == 0xFF and 0xE0 <= data[pos + 1] <= 0xEF:  # after APP0..APP15
        pos += 2 + struct.unpack(">H", data[pos + 2 : pos + 4])[0]
    if pos > len(data):
        raise StoryError("a JPEG segment runs past the end of the file")
    out.write(data[:pos] + b"\xff\xfe" + struct.pack(">H", len(comment) + 2) + comment + data[pos:])


# -- WAV ---------------------------------------------------------------------------------------------------------
def _riff_chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    chunks, pos = [], 12
    while pos + 8 <= len(data):
        cid, (size,) = data[pos : pos + 4], struct.unpack("<I", data[pos + 4 : pos + 8])
        if pos + 8 + size > len(data):
            raise StoryError("a WAV chunk runs past the end of the file (a stream's unknown length?)")
        chunks.append((cid, data[pos + 8 : pos + 8 + size]))
        pos += 8 + size + (size & 1)
    if not any(cid == b"data" for cid, _ in chunks):
        raise StoryError("a WAV without its data chunk")
    return chunks


def _riff_chunk(cid: bytes, body: bytes) -> bytes:
    return cid + struct.pack("<I", len(body)) + body + (b"\x00" if len(body) & 1 else b"")


def _info(cid: bytes, text: str) -> bytes:
    return _riff_chunk(cid, text.encode("utf-8") + b"\x00")


def _wav(src: BinaryIO, out: BinaryIO, story: dict[str, Any], human: str) -> None:
    chunks = _riff_chunks(src.read())
    title = str(story.get("prompt") or story.get("caption") or story.get("input") or "")[:200]
    info = b"INFO" + _info(b"ISFT", SOFTWARE) + _info(b"ICMT", story_json(story))
    if title:
        info += _info(b"INAM", title)
    kept = [(cid, body) for cid, body in chunks if not (cid == b"LIST" and body[:4] == b"INFO")]
    body = b"".join(_riff_chunk(cid, b) for cid, b in kept) + _riff_chunk(b"LIST", info)
    out.write(b"RIFF" + struct.pack("<I", 4 + len(body)) + b"WAVE" + body)


# -- GLB, OBJ ----------------------------------------------------------------------------------------------------
def _glb(src: BinaryIO, out: BinaryIO, story: dict[str, Any], human: str) -> None:
    data = src.read()
    _magic, version, length = struct.unpack("<4sII", data[:12])
    json_len, json_type = struct.unpack("<I4s", data[12:20])
    if version != 2 or length != len(data) or json_type != b"JSON" or 20 + json_len > len(data):
        raise StoryError("not a glTF 2.0 binary with its JSON chunk first")
    doc = json.loads(data[20 : 20 + json_len].decode("utf-8"))
    asset = doc.setdefault("asset", {"version": "2.0"})
    extras = asset.get("extras")
    asset["extras"] = {**(extras if isinstance(extras, dict) else {}), KEY: story}
    text = json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 4)  # the JSON chunk is padded with spaces to 4 bytes
    rest = data[20 + json_len :]  # the BIN chunk (and any other), byte for byte
    out.write(struct.pack("<4sII", b"glTF", 2, 20 + len(text) + len(rest)))
    out.write(struct.pack("<I4s", len(text), b"JSON") + text + rest)


def _obj(src: BinaryIO, out: BinaryIO, story: dict[str, Any], human: str) -> None:
    out.write(f"# {KEY}: {story_json(story)}\n".encode())
    shutil.copyfileobj(src, out, CHUNK)


# -- MP4, MP3: mutagen ---------------------------------------------------------------------------------------------
#: Top-level boxes of a fragmented MP4: ``mfra`` holds absolute offsets mutagen does not move, so it stays untold.
MP4_FRAGMENTED = {b"moof", b"mfra", b"sidx"}


def _tag_copy(src: BinaryIO, out: BinaryIO, tag: Callable[[BinaryIO], None]) -> None:
    """Copy ``src`` to ``out`` and let ``tag`` write into the copy (mutagen edits a file in place: ``out`` is
    opened for reading and writing); a file mutagen refuses is a :class:`StoryError`."""
    shutil.copyfileobj(src, out, CHUNK)
    out.seek(0)
    try:
        tag(out)
    except (MutagenError, AtomError) as error:
        raise StoryError(f"mutagen refused the file: {error}") from error


def _mp4(src: BinaryIO, out: BinaryIO, story: dict[str, Any], human: str) -> None:
    def tag(fh: BinaryIO) -> None:
        if any(atom.name in MP4_FRAGMENTED for atom in Atoms(fh).atoms):
            raise StoryError("a fragmented MP4: its offsets are not rewritten")
        fh.seek(0)
        video = MP4(fh)
        if video.tags is None:
            video.add_tags()
        video.tags["desc"] = [human]  # a story told before is replaced, the muxer's own items kept
        video.tags["©cmt"] = [story_json(story)]
        fh.seek(0)
        video.save(fh)

    _tag_copy(src, out, tag)


def _mp3(src: BinaryIO, out: BinaryIO, story: dict[str, Any], human: str) -> None:
    def tag(fh: BinaryIO) -> None:
        audio = MP3(fh)
        if audio.tags is None:
            audio.add_tags()
        title = str(story.get("prompt") or story.get("input") or story.get("caption") or "")[:200]
        if title and "TIT2" not in audio.tags:
            audio.tags.add(TIT2(encoding=Encoding.UTF8, text=[title]))
        # One COMM per description and language: a story told before is replaced.
        audio.tags.add(COMM(encoding=Encoding.UTF8, lang="eng", desc=KEY, text=[story_json(story)]))
        fh.seek(0)
        audio.save(fh, v2_version=3)  # v2.3: what most players read (mutagen writes its text as UTF-16)

    _tag_copy(src, out, tag)
