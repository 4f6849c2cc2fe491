"""The frame layer exactly: sizes at their limits, the header's bits, the COBS reference, and the
decoder's counters one by one (each dropped frame counted once, under its own reason)."""

from __future__ import annotations

import re
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from cobs import cobs

from firmware_protocol import frame as F
from firmware_protocol.frame import DecoderStats, FrameDecoder, cobs_encode_reference, encode_body, encode_frame

SPEC = Path(F.__file__).with_name("SPEC.md").read_text()
LARGEST = F.MAX_BODY - F.MIN_BODY     # the largest payload a frame carries


def wire_of(body: bytes) -> bytes:
    return b"\x00" + cobs.encode(body) + b"\x00"


def test_the_constants_are_the_specs():
    assert F.MAX_BODY == 254 and F.MIN_BODY == 8 and LARGEST == 246
    assert (F.FLAG_ACK_REQ, F.FLAG_RETX, F.FLAG_RESERVED) == (0x01, 0x02, 0x0C)
    version = re.search(r"protocol, version (\d+)\.(\d+)", SPEC)
    assert version and (int(version.group(1)), int(version.group(2))) == (F.PROTOCOL_MAJOR, F.PROTOCOL_MINOR)


def test_the_header_carries_version_flags_id_and_sequence():
    body = encode_body(0x42, 0x1_2345, b"\xAA", flags=F.FLAG_RETX | F.FLAG_ACK_REQ | 0xF0)
    assert body[0] == (F.PROTOCOL_MAJOR << 4) | 0x03           # high flag bits cannot touch the version
    assert body[1] == 0x42 and struct.unpack_from("<H", body, 2)[0] == 0x2345   # seq wraps at 16 bits
    assert body[4:5] == b"\xAA" and struct.unpack_from("<I", body, 5)[0] == zlib.crc32(body[:5])
    plain = FrameDecoder().feed(encode_frame(7, 9, b"x"))[0]
    assert plain.flags == 0 and plain.payload == b"x" and (plain.msg_id, plain.seq) == (7, 9)


def test_the_largest_payload_round_trips_and_one_byte_more_is_refused():
    payload = bytes(range(1, 247))                 # no zeros: COBS's longest block
    wire = encode_frame(1, 2, payload)
    assert len(wire) == 2 + F.MAX_BODY + 1         # COBS adds exactly one byte to a body ≤ 254
    frames = FrameDecoder().feed(wire)
    assert len(frames) == 1 and frames[0].payload == payload
    with pytest.raises(ValueError, match="246-byte limit"):
        encode_frame(1, 2, payload + b"\x01")


@pytest.mark.parametrize("n", [0, 1, 2, 100, 253, 254, 255, 256, 507, 508, 509, 1000])
def test_the_reference_cobs_encoder_agrees_with_the_library(n):
    rng = np.random.default_rng(n)
    for data in (bytes(rng.integers(1, 256, n, dtype=np.uint8)), bytes(rng.integers(0, 256, n, dtype=np.uint8)),
                 bytes(n), bytes([7]) * n):
        assert cobs_encode_reference(data) == cobs.encode(data), (n, data[:8])


def test_each_dropped_frame_is_counted_once_under_its_reason():
    good = encode_frame(3, 1, b"ok")
    body = encode_body(3, 1, b"ok")
    bad_crc = bytearray(body)
    bad_crc[-1] ^= 0xFF
    wrong_version = bytes([0x20]) + body[1:-4]
    wrong_version += struct.pack("<I", zlib.crc32(wrong_version))
    reserved = encode_body(3, 1, b"ok", flags=0x04)
    cases = {
        "crc": wire_of(bytes(bad_crc)),
        "cobs": b"\x00\x05\x01\x02\x00",           # a block longer than what follows it
        "too_short": wire_of(body[:7]),
        "too_long": b"\x00" + bytes([1]) * (F.MAX_BODY + 2) + b"\x00",
        "version": wire_of(wrong_version),
        "reserved_flags": wire_of(reserved),
        "empty": b"\x00\x00",
    }
    for reason, stream in cases.items():   # each bad frame twice: counted twice
        dec = FrameDecoder()
        frames = dec.feed(stream + stream + good)
        assert len(frames) == 1 and frames[0].payload == b"ok", reason
        counts = dec.stats.as_dict()
        for key in ("crc", "cobs", "too_short", "too_long", "version", "reserved_flags"):
            assert counts[key] == (2 if key == reason else 0), (reason, counts)
        assert counts["frames"] == 1 and counts["bytes"] == len(stream + stream + good)
        assert counts["dropped"] == (0 if reason == "empty" else 2), reason
        assert dec.stats.empty >= (2 if reason == "empty" else 0)


def test_the_counters_add_up_over_many_frames():
    dec = FrameDecoder()
    for _ in range(3):
        dec.feed(encode_frame(1, 1, b"a"))
        dec.feed(wire_of(encode_body(1, 1, b"a")[:6]))
    s = dec.stats
    assert (s.frames, s.too_short) == (3, 3)
    s2 = DecoderStats(frames=1, crc=2, cobs=3, too_short=4, too_long=5, version=6, reserved_flags=7)
    assert s2.dropped == 2 + 3 + 4 + 5 + 6 + 7
    assert set(s2.as_dict()) == {"frames", "bytes", "dropped", "crc", "cobs", "too_short", "too_long", "version",
                                 "reserved_flags"}
    assert s2.as_dict()["frames"] == 1 and s2.as_dict()["bytes"] == 0


def test_a_frame_split_across_reads_is_put_back_together():
    wire = encode_frame(5, 6, bytes(range(1, 120)))
    for cut in (1, 2, len(wire) // 2, len(wire) - 2, len(wire) - 1):
        dec = FrameDecoder()
        assert dec.feed(wire[:cut]) == []
        frames = dec.feed(wire[cut:])
        assert len(frames) == 1 and frames[0].payload == bytes(range(1, 120)), cut
        assert dec.stats.dropped == 0


def test_a_run_without_delimiters_is_dropped_whole_however_it_is_cut():
    junk = bytes([0x55]) * (F.MAX_BODY + 3)
    good = encode_frame(2, 3, b"after")
    for pieces in ([junk], [junk[:100], junk[100:]], [junk[:F.MAX_BODY + 2], junk[F.MAX_BODY + 2:]],
                   [bytes([0x55])] * len(junk)):
        dec = FrameDecoder()
        for p in pieces:
            assert dec.feed(p) == []
        assert len(dec._buf) <= F.MAX_BODY + 2      # bounded while it lasts
        frames = dec.feed(good)
        assert [f.payload for f in frames] == [b"after"]
        assert dec.stats.too_long == 1 and dec.stats.dropped == 1
    # just short of too long, cut anywhere: a chunk as long as the largest frame is still decoded
    longest = encode_frame(1, 1, bytes(range(1, 247)))
    dec = FrameDecoder()
    assert dec.feed(longest[:-1]) == [] and len(dec.feed(longest[-1:])) == 1


def test_each_overlong_run_is_counted_once():
    """Two runs too long to be frames, each cut across feeds (so the second is found overlong while
    buffered, not when decoded): two drops, and the frame after them still decodes."""
    junk = bytes([0x55]) * (F.MAX_BODY + 10)
    dec = FrameDecoder()
    for _ in range(2):
        assert dec.feed(junk) == [] and dec.feed(b"\x00") == []
    assert [f.payload for f in dec.feed(encode_frame(2, 3, b"after"))] == [b"after"]
    assert dec.stats.too_long == 2 and dec.stats.dropped == 2


def test_nothing_fed_changes_nothing():
    dec = FrameDecoder()
    assert dec.feed(b"") == [] and dec.stats.bytes == 0


def test_a_fresh_decoder_counts_nothing_and_each_empty_or_overlong_frame_once_more():
    from firmware_protocol.frame import FrameDecoder

    dec = FrameDecoder()
    assert all(v == 0 for v in dec.stats.as_dict().values())
    dec.feed(b"\x00\x00\x00\x00")               # four delimiters with nothing before them: four empty frames
    assert dec.stats.empty == 4
    run = b"\x00" + bytes([1]) * (F.MAX_BODY + 2) + b"\x00"
    dec.feed(run + run[1:])                                        # two overlong runs
    assert dec.stats.too_long == 2 and dec.stats.dropped == 2


def test_a_body_carries_no_flags_unless_asked():
    assert F.encode_body(0x20, 7, b"abc")[0] & 0x0F == 0
    assert F.encode_body(0x20, 7, b"abc", flags=1)[0] & 0x0F == 1
