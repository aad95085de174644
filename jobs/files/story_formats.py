"""The writers of ``jobs.files.story``: a result's settings in each format's own metadata, the media untouched.

Each writer reads the file from ``src`` and writes the whole file with its story to ``out``; :func:`write` picks
one by the file's first bytes (the name only for OBJ, a text format) and answers False for a format it has no
writer for. A file a writer can't make sense of raises :class:`StoryError` (the caller keeps the file as it came).
Only the standard library: the formats' own layouts, nothing decoded or re-encoded.
"""

from __future__ import annotations

import json
import shutil
import struct
import zlib
from collections.abc import Callable
from typing import Any, BinaryIO

KEY = "tiiny-hub"
SOFTWARE = "Tiiny Hub"
CHUNK = 1024 * 1024


class StoryError(ValueError):
    """The file is not what its first bytes promised; nothing is written into it."""


def story_json(story: dict[str, Any]) -> str:
    return json.dumps(story, ensure_ascii=False, separators=(",", ":"))


def write(src: BinaryIO, out: BinaryIO, story: dict[str, Any], human: str, *, name: str = "") -> bool:
    """Copy ``src`` to ``out`` with the story written in; False (nothing written to ``out``) for a format
    without a writer."""
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


# -- MP3 ---------------------------------------------------------------------------------------------------------
def _syncsafe(n: int) -> bytes:
    return bytes(((n >> 21) & 0x7F, (n >> 14) & 0x7F, (n >> 7) & 0x7F, n & 0x7F))


def _unsyncsafe(b: bytes) -> int:
    return (b[0] << 21) | (b[1] << 14) | (b[2] << 7) | b[3]


def _id3_frame(fid: bytes, body: bytes, version: int) -> bytes:
    size = _syncsafe(len(body)) if version == 4 else struct.pack(">I", len(body))
    return fid + size + b"\x00\x00" + body


def _id3_frames(tag: bytes, version: int) -> bytes:
    """The frames of an ID3v2.3/2.4 tag's body, without its padding (and without a story told before)."""
    kept, pos = b"", 0
    while pos + 10 <= len(tag) and tag[pos : pos + 4].isalnum():
        raw = tag[pos + 4 : pos + 8]
        size = _unsyncsafe(raw) if version == 4 else struct.unpack(">I", raw)[0]
        frame = tag[pos : pos + 10 + size]
        if not (frame[:4] == b"COMM" and KEY.encode() in frame[:40]):
            kept += frame
        pos += 10 + size
    return kept


def _mp3(src: BinaryIO, out: BinaryIO, story: dict[str, Any], human: str) -> None:
    data = src.read()
    version, frames, audio = 3, b"", data
    if data[:3] == b"ID3":
        version, flags = data[3], data[5]
        if version not in (3, 4) or flags:
            raise StoryError(f"an ID3v2.{version} tag with flags {flags:#x}: not rewritten")
        end = 10 + _unsyncsafe(data[6:10])
        frames, audio = _id3_frames(data[10:end], version), data[end:]
    # Text encoding 3 (UTF-8) is ID3v2.4's; v2.3 has 1 (UTF-16 with a BOM).
    enc, codec = (b"\x03", "utf-8") if version == 4 else (b"\x01", "utf-16")
    term = b"\x00" if version == 4 else b"\x00\x00"
    title = str(story.get("prompt") or story.get("input") or story.get("caption") or "")[:200]
    if title and b"TIT2" not in frames:
        frames += _id3_frame(b"TIT2", enc + title.encode(codec), version)
    comm = enc + b"eng" + KEY.encode(codec) + term + story_json(story).encode(codec)
    frames += _id3_frame(b"COMM", comm, version)
    out.write(b"ID3" + bytes((version, 0, 0)) + _syncsafe(len(frames)) + frames + audio)


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


# -- MP4 ---------------------------------------------------------------------------------------------------------
#: Boxes that only hold other boxes, on the way to the chunk offsets and the tags.
MP4_CONTAINERS = {b"moov", b"trak", b"mdia", b"minf", b"stbl", b"edts", b"udta", b"ilst"}


def _boxes(data: bytes, start: int, end: int) -> list[tuple[bytes, int, int, int]]:
    """(type, start, header length, end) of each box between ``start`` and ``end``."""
    found, pos = [], start
    while pos + 8 <= end:
        size, btype = struct.unpack(">I4s", data[pos : pos + 8])
        header = 8
        if size == 1:
            size, header = struct.unpack(">Q", data[pos + 8 : pos + 16])[0], 16
        elif size == 0:
            size = end - pos
        if size < header or pos + size > end:
            raise StoryError(f"an MP4 box {btype!r} runs past its parent")
        found.append((btype, pos, header, pos + size))
        pos += size
    return found


def _box(btype: bytes, body: bytes) -> bytes:
    return struct.pack(">I4s", 8 + len(body), btype) + body


def _top_level(src: BinaryIO) -> list[tuple[bytes, int, int]]:
    """(type, start, end) of the file's top-level boxes, read by their headers only (the media is not read)."""
    src.seek(0, 2)
    total, pos, found = src.tell(), 0, []
    while pos + 8 <= total:
        src.seek(pos)
        size, btype = struct.unpack(">I4s", src.read(8))
        if size == 1:
            size = struct.unpack(">Q", src.read(8))[0]
        elif size == 0:
            size = total - pos
        if size < 8 or pos + size > total:
            raise StoryError(f"an MP4 box {btype!r} runs past the end of the file")
        found.append((btype, pos, pos + size))
        pos += size
    return found


def _tags(story: dict[str, Any], human: str) -> bytes:
    def item(tag: bytes, text: str) -> bytes:
        return _box(tag, _box(b"data", struct.pack(">II", 1, 0) + text.encode("utf-8")))

    return item(b"desc", human) + item(b"\xa9cmt", story_json(story))


#: The ilst items the hub writes (a story told before is replaced, not repeated).
MP4_ITEMS = (b"desc", b"\xa9cmt")


def _with_tags(moov: bytes, items: bytes) -> bytes:
    """``moov`` with ``items`` in its udta/meta/ilst (each made when missing; in an ilst, the hub's own items of
    a story told before replaced), every box on the way resized by what changed."""
    start, header, end = 0, _header_len(moov, 0), len(moov)
    chain = [(start, header)]  # moov and each box found on the way: each is resized
    for btype in (b"udta", b"meta", b"ilst"):
        body = start + header
        if moov[start + 4 : start + 8] == b"meta" and moov[body + 4 : body + 8] != b"hdlr":
            body += 4  # MP4's meta is a full box (version and flags); QuickTime's is not
        hit = next((box for box in _boxes(moov, body, end) if box[0] == btype), None)
        if hit is None:
            made = {b"udta": _box(b"udta", _made_meta(items)), b"meta": _made_meta(items)}
            return _replaced(moov, chain, end, end, made.get(btype, _box(b"ilst", items)))
        _t, start, header, end = hit
        chain.append((start, header))
    kept = b"".join(moov[s:e] for t, s, _h, e in _boxes(moov, start + header, end) if t not in MP4_ITEMS)
    return _replaced(moov, chain, start + header, end, kept + items)


def _replaced(moov: bytes, chain: list[tuple[int, int]], start: int, end: int, new: bytes) -> bytes:
    """``moov`` with the bytes from ``start`` to ``end`` replaced by ``new``, the boxes of ``chain`` (which hold
    them) resized by the difference."""
    out = bytearray(moov[:start] + new + moov[end:])
    for box_start, box_header in chain:
        _grow(out, box_start, box_header, len(new) - (end - start))
    return bytes(out)


def _header_len(data: bytes | bytearray, start: int) -> int:
    return 16 if struct.unpack(">I", data[start : start + 4])[0] == 1 else 8


def _made_meta(items: bytes) -> bytes:
    hdlr = _box(b"hdlr", b"\x00" * 8 + b"mdirappl" + b"\x00" * 9)
    return _box(b"meta", b"\x00" * 4 + hdlr + _box(b"ilst", items))


def _grow(buf: bytearray, start: int, header: int, delta: int) -> None:
    if header == 16:
        size = struct.unpack(">Q", buf[start + 8 : start + 16])[0]
        buf[start + 8 : start + 16] = struct.pack(">Q", size + delta)
        return
    size = struct.unpack(">I", buf[start : start + 4])[0] + delta
    if size > 0xFFFFFFFF:
        raise StoryError("the MP4 header would outgrow its 32-bit size")
    buf[start : start + 4] = struct.pack(">I", size)


def _shift_offsets(moov: bytearray, start: int, end: int, after: int, delta: int) -> None:
    """Move every chunk offset (stco, co64) at or past ``after`` by ``delta``: the media data moved."""
    for btype, box_start, header, box_end in _boxes(moov, start, end):
        if btype in MP4_CONTAINERS:
            _shift_offsets(moov, box_start + header, box_end, after, delta)
        elif btype in (b"stco", b"co64"):
            wide = btype == b"co64"
            fmt, width = (">Q", 8) if wide else (">I", 4)
            count = struct.unpack(">I", moov[box_start + header + 4 : box_start + header + 8])[0]
            pos = box_start + header + 8
            if pos + count * width > box_end:
                raise StoryError(f"an MP4 {btype.decode()} table runs past its box")
            for i in range(count):
                at = pos + i * width
                offset = struct.unpack(fmt, moov[at : at + width])[0]
                if offset >= after:
                    if not wide and offset + delta > 0xFFFFFFFF:
                        raise StoryError("a chunk offset would outgrow stco's 32 bits")
                    moov[at : at + width] = struct.pack(fmt, offset + delta)


def _mp4(src: BinaryIO, out: BinaryIO, story: dict[str, Any], human: str) -> None:
    top = _top_level(src)
    if any(t in (b"moof", b"mfra", b"sidx") for t, _s, _e in top):
        raise StoryError("a fragmented MP4: its offsets are not rewritten")
    moovs = [(s, e) for t, s, e in top if t == b"moov"]
    if len(moovs) != 1:
        raise StoryError("an MP4 without exactly one moov box")
    start, end = moovs[0]
    src.seek(start)
    moov = src.read(end - start)
    new = bytearray(_with_tags(moov, _tags(story, human)))
    delta = len(new) - len(moov)
    # Media data after the moov moves by what it grew (faststart files); media before it stays where it was.
    _shift_offsets(new, _header_len(new, 0), len(new), end, delta)
    src.seek(0)
    _copy(src, out, start)
    out.write(new)
    src.seek(end)
    shutil.copyfileobj(src, out, CHUNK)


def _copy(src: BinaryIO, out: BinaryIO, n: int) -> None:
    while n > 0:
        piece = src.read(min(CHUNK, n))
        if not piece:
            raise StoryError("the MP4 ended early")
        out.write(piece)
        n -= len(piece)
