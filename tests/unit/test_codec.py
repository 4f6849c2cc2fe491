"""Wire codec: golden frames, round trips, resynchronisation, random bytes."""

from __future__ import annotations

import binascii
import struct
import subprocess
import sys

import numpy as np
import pytest

import firmware_protocol.messages as M
from firmware_protocol.frame import FrameDecoder, cobs_encode_reference, encode_frame


def test_crc_is_crc32_iso_hdlc():
    # catalogue check value of CRC-32/ISO-HDLC for "123456789" (Greg Cook's CRC catalogue)
    assert binascii.crc32(b"123456789") == 0xCBF43926


# Golden frames. Derivation (independent of firmware_protocol.frame): the body bytes are written
# out by hand from SPEC.md §2–4, the CRC is binascii.crc32 of header+payload, and COBS was done by
# hand (checked block by block; e.g. the HEARTBEAT body 10 03 02 01 01 | 00 | 78 56 34 12 | 00 00
# 00 00 | f5 d4 cf 72 becomes 06 10 03 02 01 01 | 05 78 56 34 12 | 01 01 01 | 05 f5 d4 cf 72).
GOLDEN = [
    # HEARTBEAT state=DISABLED boot_id=0x12345678 faults=0, seq 0x0102
    (M.Heartbeat(1, 0, 0x12345678, 0), 0x0102, "00061003020101057856341201010105f5d4cf7200"),
    # ESTOP reason 7, seq 0
    (M.Estop(7), 0x0000, "00031012010607286ab6c200"),
    # ENABLE mask 0x3f mode POS, seq 0x1234; ENABLE is a transaction: ACK_REQ set (ver_flags 0x11)
    (M.Enable(0x3F, 0), 0x1234, "0006111034123f01010105317e4a1000"),
]


@pytest.mark.parametrize("msg,seq,hexframe", GOLDEN)
def test_golden_frames(msg, seq, hexframe):
    wire = bytes.fromhex(hexframe)
    assert msg.encode(seq) == wire
    frames = FrameDecoder().feed(wire)
    assert len(frames) == 1 and frames[0].seq == seq
    assert M.decode_message(frames[0]) == msg


def test_golden_body_derivation_matches_reference_cobs():
    body = bytes([0x10, 0x03, 0x02, 0x01]) + struct.pack("<BBII", 1, 0, 0x12345678, 0)
    body += struct.pack("<I", binascii.crc32(body))
    assert b"\x00" + cobs_encode_reference(body) + b"\x00" == bytes.fromhex(GOLDEN[0][2])


def _random_message(cls, rng):
    n = int(rng.integers(1, 23))
    if cls is M.CmdPos:
        return M.CmdPos(rng.integers(-2**31, 2**31, n).astype(np.int32), int(rng.integers(0, 2**32)),
                        int(rng.integers(0, 2)))
    if cls is M.CmdPvf:
        j = np.zeros(n, dtype=M.PVF_DTYPE)
        for f, (lo, hi) in zip(M.PVF_DTYPE.names, [(-2**31, 2**31), (-2**15, 2**15), (-2**15, 2**15)]):
            j[f] = rng.integers(lo, hi, n)
        return M.CmdPvf(j, int(rng.integers(0, 2**32)), 0)
    if cls is M.State:
        j = np.zeros(n, dtype=M.STATE_JOINT_DTYPE)
        for f, (lo, hi) in zip(M.STATE_JOINT_DTYPE.names,
                               [(-2**31, 2**31), (-2**15, 2**15), (-2**15, 2**15), (-128, 128), (0, 256)]):
            j[f] = rng.integers(lo, hi, n)
        return M.State(int(rng.integers(0, 2**63)), int(rng.integers(0, 2**16)), int(rng.integers(0, 6)),
                       int(rng.integers(0, 2**32)), int(rng.integers(0, 2**16)), j)
    if cls is M.StateRaw:
        return M.StateRaw(int(rng.integers(0, 2**63)), rng.integers(-2**31, 2**31, n).astype(np.int32))
    if cls is M.Log:
        return M.Log(int(rng.integers(0, 256)), "".join(chr(int(c)) for c in rng.integers(32, 127, 40)))
    vals = []
    fmt = cls.FMT.format.lstrip("<")
    for code in fmt.replace("12s", "S"):
        bits = {"B": 8, "H": 16, "I": 32, "Q": 63}.get(code)
        vals.append(bytes(rng.integers(0, 256, 12).astype(np.uint8)) if code == "S" else int(rng.integers(0, 2**bits)))
    return cls(*vals)


def _same(a, b):
    for f in a.__dataclass_fields__:
        if f in ("MSG_ID", "FMT", "ACK"):
            continue
        x, y = getattr(a, f), getattr(b, f)
        if isinstance(x, np.ndarray):
            if not np.array_equal(np.asarray(x), np.asarray(y)):
                return False
        elif x != y:
            return False
    return True


def test_every_message_round_trips():
    rng = np.random.default_rng(30)
    dec = FrameDecoder()
    for cls in M.MESSAGES.values():
        for _ in range(200):
            msg = _random_message(cls, rng)
            seq = int(rng.integers(0, 2**16))
            frames = dec.feed(msg.encode(seq))
            assert len(frames) == 1, cls
            back = M.decode_message(frames[0])
            assert type(back) is cls and _same(msg, back), (msg, back)
            assert frames[0].seq == seq
    assert dec.stats.dropped == 0


def test_frames_interleaved_with_garbage_are_all_recovered():
    rng = np.random.default_rng(31)
    sent, stream = [], bytearray()
    for k in range(2000):
        msg = M.Heartbeat(int(rng.integers(0, 6)), 0, int(rng.integers(0, 2**32)), k)
        sent.append(msg)
        stream += msg.encode(k)
        if rng.random() < 0.5:  # garbage between frames, zeros included
            stream += rng.integers(0, 256, int(rng.integers(1, 300))).astype(np.uint8).tobytes()
    dec = FrameDecoder()
    got = []
    pos = 0
    while pos < len(stream):  # arbitrary chunking
        step = int(rng.integers(1, 700))
        got += [M.decode_message(f) for f in dec.feed(bytes(stream[pos:pos + step]))]
        pos += step
    got = [g for g in got if isinstance(g, M.Heartbeat)]
    # garbage can in principle form a valid frame only with probability 2^-32 per candidate
    assert [g.faults for g in got] == [m.faults for m in sent]
    assert dec.stats.dropped > 0  # the garbage was seen and counted


def test_only_touched_frames_are_lost():
    rng = np.random.default_rng(32)
    frames = [M.Heartbeat(1, 0, 99, k).encode(k) for k in range(1000)]
    touched = set(rng.choice(1000, 100, replace=False).tolist())
    stream = bytearray()
    for k, fr in enumerate(frames):
        fr = bytearray(fr)
        if k in touched:
            kind = k % 3
            i = int(rng.integers(1, len(fr) - 1))
            if kind == 0:
                fr[i] ^= 1 << int(rng.integers(0, 8))       # bit flip
            elif kind == 1:
                del fr[i]                                   # dropped byte
            else:
                fr = fr[: int(rng.integers(1, len(fr) - 1))]  # truncated (board reset mid-frame)
        stream += fr
    dec = FrameDecoder()
    got = {M.decode_message(f).faults for f in dec.feed(bytes(stream))}
    assert got == set(range(1000)) - touched
    # each touched frame is counted once or, when a flipped bit made a 0x00 and split it, twice;
    # a frame truncated right after its leading delimiter leaves nothing to count
    assert 0.9 * len(touched) <= dec.stats.dropped <= 2 * len(touched)


def test_random_megabytes_never_crash_and_never_yield_a_frame():
    rng = np.random.default_rng(33)
    dec = FrameDecoder()
    total = 0
    for _ in range(64):
        chunk = rng.integers(0, 256, 65536).astype(np.uint8).tobytes()
        total += len(chunk)
        assert dec.feed(chunk) == []
    assert dec.stats.bytes == total and dec.stats.frames == 0
    assert len(dec._buf) <= 256  # bounded memory


def test_malformed_payloads_are_counted_not_raised():
    stats = M.DecodeStats()
    dec = FrameDecoder()
    frames = dec.feed(encode_frame(M.State.MSG_ID, 1, b"\x01\x02") + encode_frame(0x7F, 2, b"") +
                      encode_frame(M.CmdPos.MSG_ID, 3, bytes([40, 0, 0, 0, 0, 0])))
    assert len(frames) == 3
    assert [M.decode_message(f, stats) for f in frames] == [None, None, None]
    assert stats.bad_payload == 2 and stats.unknown_id == 1


def test_appended_fields_are_ignored():
    payload = M.Heartbeat(2, 0, 5, 6).payload() + b"future"
    f = FrameDecoder().feed(encode_frame(M.Heartbeat.MSG_ID, 1, payload))[0]
    assert M.decode_message(f) == M.Heartbeat(2, 0, 5, 6)


def test_wrong_version_and_reserved_flags_dropped():
    import zlib
    body = bytes([0x20, 0x03, 0, 0]) + M.Heartbeat(1, 0, 0, 0).payload()
    body += struct.pack("<I", zlib.crc32(body))
    dec = FrameDecoder()
    assert dec.feed(b"\x00" + cobs_encode_reference(body) + b"\x00") == []
    assert dec.stats.version == 1
    assert dec.feed(encode_frame(3, 1, M.Heartbeat(1, 0, 0, 0).payload(), flags=0x04)) == []
    assert dec.stats.reserved_flags == 1


def test_firmware_protocol_does_not_import_hil():
    code = ("import sys, firmware_protocol.link, firmware_protocol.emulator.board_model, firmware_protocol.emulator.__main__;"
            "bad = [m for m in sys.modules if m == 'hil' or m.startswith('hil.')]; print(bad); sys.exit(bool(bad))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
