"""The servo bus codecs against the vendors' published packets (ROBOTIS e-manual, Feetech's
protocol document, Kondo's and Pololu's manuals, the SSC-32U guide) and against themselves."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from firmware_protocol.buses import dynamixel1 as d1
from firmware_protocol.buses import dynamixel2 as d2
from firmware_protocol.buses import feetech as ft
from firmware_protocol.buses import kondo_ics as ics
from firmware_protocol.buses import pwm

H = bytes.fromhex

# ------------------------------------------------------------------ Dynamixel 2.0
DXL2_VECTORS = [  # (what, our bytes, the e-manual's)
    ("ping id 1", d2.packet(1, d2.PING), "FF FF FD 00 01 03 00 01 19 4E"),
    ("ping reply", d2.status_packet(1, 0, H("06 04 26")), "FF FF FD 00 01 07 00 55 00 06 04 26 65 5D"),
    ("broadcast ping", d2.packet(0xFE, d2.PING), "FF FF FD 00 FE 03 00 01 31 42"),
    ("ping reply id 2", d2.status_packet(2, 0, H("06 04 26")), "FF FF FD 00 02 07 00 55 00 06 04 26 6F 6D"),
    ("read 132 len 4", d2.read(1, 132, 4), "FF FF FD 00 01 07 00 02 84 00 04 00 1D 15"),
    ("read reply 166", d2.status_packet(1, 0, struct.pack("<i", 166)), "FF FF FD 00 01 08 00 55 00 A6 00 00 00 8C C0"),
    ("write 116 ← 512", d2.write(1, 116, struct.pack("<i", 512)), "FF FF FD 00 01 09 00 03 74 00 00 02 00 00 CA 89"),
    ("empty status", d2.status_packet(1, 0), "FF FF FD 00 01 04 00 55 00 A1 0C"),
    ("reg write", d2.packet(1, d2.REG_WRITE, H("68 00 C8 00 00 00")), "FF FF FD 00 01 09 00 04 68 00 C8 00 00 00 AE 8E"),
    ("action", d2.packet(1, d2.ACTION), "FF FF FD 00 01 03 00 05 02 CE"),
    ("factory reset", d2.packet(1, d2.FACTORY_RESET, H("01")), "FF FF FD 00 01 04 00 06 01 A1 E6"),
    ("reboot", d2.packet(1, d2.REBOOT), "FF FF FD 00 01 03 00 08 2F 4E"),
    ("clear", d2.packet(1, d2.CLEAR, H("01 44 58 4C 22")), "FF FF FD 00 01 08 00 10 01 44 58 4C 22 B1 DC"),
    ("sync read", d2.sync_read(132, 4, [1, 2]), "FF FF FD 00 FE 09 00 82 84 00 04 00 01 02 CE FA"),
    ("sync read reply", d2.status_packet(2, 0, struct.pack("<i", 2079)), "FF FF FD 00 02 08 00 55 00 1F 08 00 00 BA BE"),
    ("sync write", d2.sync_write(116, 4, [(1, struct.pack("<i", 150)), (2, struct.pack("<i", 170))]),
     "FF FF FD 00 FE 11 00 83 74 00 04 00 01 96 00 00 00 02 AA 00 00 00 82 87"),
    ("bulk read", d2.packet(0xFE, d2.BULK_READ, H("01 90 00 02 00 02 92 00 01 00")),
     "FF FF FD 00 FE 0D 00 92 01 90 00 02 00 02 92 00 01 00 1A 05"),
    ("torque on", d2.write(1, d2.TORQUE_ENABLE, b"\x01"), "FF FF FD 00 01 06 00 03 40 00 01 DB 66"),
    ("goal -1024", d2.write(1, 116, struct.pack("<i", -1024)), "FF FF FD 00 01 09 00 03 74 00 00 FC FF FF DC 85"),
    ("alert status", d2.status_packet(1, 0x80), "FF FF FD 00 01 04 00 55 80 A2 8F"),
    ("fast sync read", d2.sync_read(132, 4, [1, 2], fast=True), "FF FF FD 00 FE 09 00 8A 84 00 04 00 01 02 4D 72"),
    ("stuffed write", d2.write(1, 116, H("FF FF FD 00")), "FF FF FD 00 01 0A 00 03 74 00 FF FF FD FD 00 21 E7"),
]


@pytest.mark.parametrize("what,ours,theirs", DXL2_VECTORS, ids=[v[0] for v in DXL2_VECTORS])
def test_dynamixel2_packets_are_the_e_manuals(what, ours, theirs):
    assert ours == H(theirs)


def test_dynamixel2_fast_sync_read_reply():
    frame = d2.fast_sync_reply([(0, 1, struct.pack("<i", 166)), (0, 2, struct.pack("<i", 2079))])
    assert frame == H("FF FF FD 00 FE 11 00 55 00 01 A6 00 00 00 74 3B 00 02 1F 08 00 00 1C 36")
    pkt, _ = d2.parse(frame, unstuffed=False)
    assert d2.parse_fast_slots(pkt, 4) == {1: (0, struct.pack("<i", 166)), 2: (0, struct.pack("<i", 2079))}


def test_dynamixel2_crc_is_crc16_umts():
    assert d2.crc16(b"123456789") == 0xFEE8 == d2.crc16_fast(b"123456789")


def test_dynamixel2_parse_takes_the_stuffing_out_and_skips_garbage():
    frame = d2.write(1, 116, H("FF FF FD 00"))
    pkt, used = d2.parse(b"\x00\xff\x13" + frame + b"\xff")
    assert pkt.instruction == d2.WRITE and pkt.params == H("74 00 FF FF FD 00")
    assert used == 3 + len(frame)
    corrupt = bytearray(frame)
    corrupt[-1] ^= 1
    assert d2.parse(bytes(corrupt))[0] is None


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 0xFD), st.integers(0, 255).filter(lambda i: i != d2.STATUS), st.binary(max_size=80))
def test_dynamixel2_parse_inverts_packet(sid, instr, params):
    frame = d2.packet(sid, instr, params)
    pkt, used = d2.parse(frame)
    assert (pkt.servo_id, pkt.instruction, pkt.params, used) == (sid, instr, params, len(frame))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_bus_parsers_never_raise_and_always_move_on(data):
    for parse in (d2.parse, d1.parse):
        pkt, used = parse(data)
        assert 0 <= used <= len(data)


# ------------------------------------------------------------------ Dynamixel 1.0 and Feetech
SUM_VECTORS = [
    ("ping", d1.packet(1, d1.PING), "FF FF 01 02 01 FB"),
    ("ping reply", d1.packet(1, 0), "FF FF 01 02 00 FC"),
    ("read temperature", d1.read(1, 43, 1), "FF FF 01 04 02 2B 01 CC"),
    ("read reply 32 °C", d1.packet(1, 0, b"\x20"), "FF FF 01 03 00 20 DB"),
    ("write", d1.packet(1, d1.WRITE, H("0C 64 AA")), "FF FF 01 05 03 0C 64 AA DC"),
    ("broadcast set id", d1.write(0xFE, 3, b"\x01"), "FF FF FE 04 03 03 01 F6"),
    ("reg write", d1.packet(1, d1.REG_WRITE, H("1E F4 01")), "FF FF 01 05 04 1E F4 01 E2"),
    ("action", d1.packet(0xFE, d1.ACTION), "FF FF FE 02 05 FA"),
    ("reset", d1.packet(0, d1.RESET), "FF FF 00 02 06 F7"),
    ("sync write goal+speed", d1.sync_write(0x1E, 4, [(0, H("10 00 50 01")), (1, H("20 02 60 03"))]),
     "FF FF FE 0E 83 1E 04 00 10 00 50 01 01 20 02 60 03 67"),
    ("bulk read", d1.packet(0xFE, d1.BULK_READ, H("00 02 01 1E 02 02 24")), "FF FF FE 09 92 00 02 01 1E 02 02 24 1D"),
    ("error status", d1.packet(1, 0x24), "FF FF 01 02 24 D8"),
    ("AX torque on", d1.write(1, d1.TORQUE_ENABLE, b"\x01"), "FF FF 01 04 03 18 01 DE"),
    ("AX goal 512", d1.write(1, d1.GOAL_POSITION, struct.pack("<H", 512)), "FF FF 01 05 03 1E 00 02 D6"),
    ("AX read position", d1.read(1, d1.PRESENT_POSITION, 2), "FF FF 01 04 02 24 02 D2"),
    ("AX sync write", d1.sync_write(30, 2, [(1, struct.pack("<H", 512)), (2, struct.pack("<H", 511))]),
     "FF FF FE 0A 83 1E 02 01 00 02 02 FF 01 4F"),
    ("STS read position", d1.read(1, ft.PRESENT_POSITION, 2), "FF FF 01 04 02 38 02 BE"),
    ("STS reply 1304", d1.packet(1, 0, ft.word(1304, False)), "FF FF 01 04 00 18 05 DD"),
    ("STS write pos/time/speed", d1.write(1, 0x2A, ft.word(2048, False) + ft.word(0, False) + ft.word(1000, False)),
     "FF FF 01 09 03 2A 00 08 00 00 E8 03 D5"),
    ("STS sync write", d1.sync_write(0x2A, 6, [(i, H("00 08 00 00 E8 03")) for i in (1, 2, 3, 4)]),
     "FF FF FE 20 83 2A 06 01 00 08 00 00 E8 03 02 00 08 00 00 E8 03 03 00 08 00 00 E8 03 04 00 08 00 00 E8 03 58"),
    ("STS sync read", ft.sync_read(0x38, 2, [1, 2, 3, 4, 5, 6]), "FF FF FE 0A 82 38 02 01 02 03 04 05 06 26"),
    ("STS torque on", d1.write(1, ft.TORQUE_ENABLE, b"\x01"), "FF FF 01 04 03 28 01 CE"),
    ("STS goal 2048", d1.write(1, ft.GOAL_POSITION, ft.word(2048, False)), "FF FF 01 05 03 2A 00 08 C4"),
    ("SCS goal 512 (big-endian)", d1.write(1, ft.GOAL_POSITION, ft.word(512, True)), "FF FF 01 05 03 2A 02 00 CA"),
    ("STS reset", d1.packet(1, 0x0A), "FF FF 01 02 0A F2"),
]


@pytest.mark.parametrize("what,ours,theirs", SUM_VECTORS, ids=[v[0] for v in SUM_VECTORS])
def test_protocol1_and_feetech_packets_are_the_vendors(what, ours, theirs):
    assert ours == H(theirs)


def test_feetech_sign_magnitude():
    assert ft.word(-100, False) == H("64 80")
    assert ft.unword(H("64 80"), False) == -100
    assert d1.sign_magnitude(0x0864, 11) == -100


def test_protocol1_parse_finds_the_status_after_a_run_of_ff():
    pkt, used = d1.parse(H("FF FF FF 01 03 00 20 DB"))
    assert (pkt.servo_id, pkt.code, pkt.params, used) == (1, 0, b"\x20", 8)


# ------------------------------------------------------------------ Kondo ICS
@pytest.mark.parametrize("sid,pos,tx", [(0, 7500, "80 3A 4C"), (1, 3500, "81 1B 2C"), (1, 11500, "81 59 6C"),
                                        (0, 9500, "80 4A 1C"), (5, 0, "85 00 00")])
def test_ics_set_position_bytes(sid, pos, tx):
    assert ics.set_position(sid, pos) == H(tx)


def test_ics_replies():
    assert ics.parse_position_reply(H("01 3A 4C"), 1) == 7500
    assert ics.parse_position_reply(H("02 3A 4C"), 1) is None       # another servo's
    assert ics.parse_position_reply(H("01 BA 4C"), 1) is None       # a command byte is no data
    assert ics.read_param(3, ics.SC_SPEED) == H("A3 02")


# ------------------------------------------------------------------ SSC-32 and Maestro
def test_ssc32_commands():
    assert pwm.ssc32_group_move([(5, 1500)]) == b"#5P1500\r"
    assert pwm.ssc32_group_move([(0, 1500), (1, 1600)], 1000) == H("23 30 50 31 35 30 30 23 31 50 31 36 30 30 54 31 30 "
                                                                     "30 30 0D")
    assert pwm.ssc32_query_pulses([5]) == H("51 50 35 0D")


def test_maestro_commands():
    assert pwm.maestro_target(2, 6000) == H("84 02 70 2E")
    assert pwm.maestro_target(0, 4000) == H("84 00 20 1F")
    assert pwm.maestro_target(0, 8000) == H("84 00 40 3E")
    assert pwm.maestro_multiple(3, [0, 6000]) == H("9F 02 03 00 00 70 2E")
    assert pwm.maestro_get_position(2) == H("90 02")
