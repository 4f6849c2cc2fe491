"""Framing: `0x00 ‖ COBS(body) ‖ 0x00`, body = header (4) ‖ payload ‖ CRC-32 (4). Pure, no I/O.

Header: `ver_flags` (u8: major version in bits 7–4, ACK_REQ bit 0, RETX bit 1, bits 2–3 reserved),
`msg_id` (u8), `seq` (u16 LE). CRC-32/ISO-HDLC (zlib) over header and payload, little-endian.
A body is at most 254 bytes, so COBS adds exactly one byte. See SPEC.md §2.

COBS comes from the `cobs` package: its C implementation encodes a 200-byte body in about
0.3 µs, against tens of µs for the same loop in pure Python, and the decoder runs on every byte
the board sends. The pure-Python reference `cobs_encode_reference` is kept for tests and for
firmware authors to read.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field

from cobs import cobs

PROTOCOL_MAJOR = 1
PROTOCOL_MINOR = 0
MAX_BODY = 254
HEADER = struct.Struct("<BBH")
CRC = struct.Struct("<I")
FLAG_ACK_REQ = 0x01
FLAG_RETX = 0x02
FLAG_RESERVED = 0x0C
MIN_BODY = HEADER.size + CRC.size


@dataclass(frozen=True, slots=True)
class Frame:
    """A decoded frame: message id, sequence number, flags and raw payload bytes."""

    msg_id: int
    seq: int
    flags: int
    payload: bytes


def encode_body(msg_id: int, seq: int, payload: bytes, flags: int = 0) -> bytes:
    """Header ‖ payload ‖ CRC-32, before COBS."""
    head = HEADER.pack((PROTOCOL_MAJOR << 4) | (flags & 0x0F), msg_id, seq & 0xFFFF)
    body = head + payload
    return body + CRC.pack(zlib.crc32(body))


def encode_frame(msg_id: int, seq: int, payload: bytes, flags: int = 0) -> bytes:
    """The bytes to put on the wire for one message."""
    if len(payload) + MIN_BODY > MAX_BODY:
        raise ValueError(f"payload of {len(payload)} bytes exceeds the {MAX_BODY - MIN_BODY}-byte limit")
    return b"\x00" + cobs.encode(encode_body(msg_id, seq, payload, flags)) + b"\x00"


def cobs_encode_reference(data: bytes) -> bytes:
    """Textbook COBS encoder (Cheshire & Baker 1999), for tests and readers; no trailing zero."""
    out = bytearray()
    block = bytearray()
    just_full = False  # a 254-byte block was emitted and nothing followed yet
    for byte in data:
        just_full = False
        if byte == 0:
            out.append(len(block) + 1)
            out += block
            block.clear()
        else:
            block.append(byte)
            if len(block) == 254:
                out.append(255)
                out += block
                block.clear()
                just_full = True
    if not just_full:  # a full block at the very end needs no empty closing block
        out.append(len(block) + 1)
        out += block
    return bytes(out)


@dataclass
class DecoderStats:
    """Counters of what the streaming decoder saw; every dropped frame is counted by reason."""

    frames: int = 0
    bytes: int = 0
    empty: int = 0
    crc: int = 0
    cobs: int = 0
    too_short: int = 0
    too_long: int = 0
    version: int = 0
    reserved_flags: int = 0

    @property
    def dropped(self) -> int:
        return self.crc + self.cobs + self.too_short + self.too_long + self.version + self.reserved_flags

    def as_dict(self) -> dict[str, int]:
        return {"frames": self.frames, "bytes": self.bytes, "dropped": self.dropped, "crc": self.crc,
                "cobs": self.cobs, "too_short": self.too_short, "too_long": self.too_long,
                "version": self.version, "reserved_flags": self.reserved_flags}


@dataclass
class FrameDecoder:
    """Streaming decoder: feed arbitrary chunks of bytes, get whole valid frames.

    Resynchronises on the next 0x00 after any garbage, drops corrupt frames and counts why,
    keeps at most one partial frame (≤ 256 bytes) buffered, and never raises on bad input.
    """

    stats: DecoderStats = field(default_factory=DecoderStats)
    _buf: bytearray = field(default_factory=bytearray)
    _overlong: bool = False

    def feed(self, data: bytes) -> list[Frame]:
        out: list[Frame] = []
        if not data:
            return out
        self.stats.bytes += len(data)
        start = 0
        find = data.find
        while True:
            z = find(b"\x00", start)
            if z < 0:
                break
            if self._buf or self._overlong:
                self._buf += data[start:z]
                chunk = bytes(self._buf)
                self._buf.clear()
                overlong = self._overlong
                self._overlong = False
            else:
                chunk = data[start:z]
                overlong = False
            start = z + 1
            if overlong:
                self.stats.too_long += 1
                continue
            if chunk:
                frame = self._decode_chunk(chunk)
                if frame is not None:
                    out.append(frame)
            else:
                self.stats.empty += 1
        rest = len(data) - start
        if rest:
            if self._overlong or len(self._buf) + rest > MAX_BODY + 2:
                self._buf.clear()
                self._overlong = True
            else:
                self._buf += data[start:]
        return out

    def _decode_chunk(self, chunk: bytes) -> Frame | None:
        st = self.stats
        if len(chunk) > MAX_BODY + 1:
            st.too_long += 1
            return None
        try:
            body = cobs.decode(chunk)
        except cobs.DecodeError:
            st.cobs += 1
            return None
        n = len(body)
        if n < MIN_BODY:
            st.too_short += 1
            return None
        if zlib.crc32(memoryview(body)[: n - 4]) != CRC.unpack_from(body, n - 4)[0]:
            st.crc += 1
            return None
        ver_flags, msg_id, seq = HEADER.unpack_from(body, 0)
        if ver_flags >> 4 != PROTOCOL_MAJOR:
            st.version += 1
            return None
        if ver_flags & FLAG_RESERVED:
            st.reserved_flags += 1
            return None
        st.frames += 1
        return Frame(msg_id, seq, ver_flags & 0x0F, body[4: n - 4])
