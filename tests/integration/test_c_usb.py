"""The C firmware's USB CDC-ACM port (firmware_protocol/c/usb/cdc_acm.c): its descriptors read back
the way a host's USB stack reads them (USB 2.0 ch. 9, CDC 1.2 and PSTN 1.2), and endpoint 0
taken through the requests Linux's enumeration and its cdc_acm driver make, through the host
build of the same C file (build/hil-usb-control). The STM32 driver that moves the packets
(ports/stm32f4/usb_otg_fs.c) is compiled by the ARM build but runs only on hardware."""

from __future__ import annotations

import random
import struct
import subprocess

import pytest

from hil.emulator_launch import c_build_dir, c_emulator_binary

from tests.conftest import HAVE_C_TOOLS

pytestmark = pytest.mark.skipif(not HAVE_C_TOOLS, reason="the C firmware's host build needs make and gcc")

UID = bytes(range(0xA0, 0xAC))


class Endpoint0:
    def __init__(self) -> None:
        c_emulator_binary()   # `make host` builds every host program
        self.p = subprocess.Popen([str(c_build_dir() / "hil-usb-control"), UID.hex()], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)

    def ask(self, line: str) -> list[str]:
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        return self.p.stdout.readline().split()

    def setup(self, bm: int, request: int, value: int = 0, index: int = 0, length: int = 0) -> list[str]:
        return self.ask("setup " + struct.pack("<BBHHH", bm, request, value, index, length).hex())

    def descriptor(self, dtype: int, index: int = 0, length: int = 255) -> bytes:
        r = self.setup(0x80, 6, dtype << 8 | index, 0x0409 if dtype == 3 else 0, length)
        assert r[0] == "send", r
        return bytes.fromhex(r[1])

    def close(self) -> None:
        self.p.stdin.close()
        assert self.p.wait(5) == 0
        self.p.stdout.close()


@pytest.fixture
def ep0():
    e = Endpoint0()
    yield e
    e.close()


def walk(config: bytes) -> list[bytes]:
    out, i = [], 0
    while i < len(config):
        n = config[i]
        assert n >= 2 and i + n <= len(config), f"descriptor at {i} runs past the end"
        out.append(config[i:i + n])
        i += n
    return out


def test_the_device_descriptor_says_cdc_at_full_speed(ep0):
    d = ep0.descriptor(1, length=64)   # Linux asks for 64 bytes first
    assert len(d) == 18 and d[0] == 18 and d[1] == 1
    bcd_usb, cls, sub, proto, mps0 = struct.unpack_from("<HBBBB", d, 2)
    assert bcd_usb == 0x0200 and (cls, sub, proto) == (2, 0, 0) and mps0 == 64
    assert d[17] == 1                                          # one configuration
    assert ep0.descriptor(1, length=8) == d[:8]                # cut to wLength
    assert ep0.setup(0x80, 6, 1 << 8, 0, 0) == ["status"]      # wLength 0: no data stage at all


def test_the_configuration_is_one_acm_function_with_its_data_interface(ep0):
    head = ep0.descriptor(2, length=9)
    total = struct.unpack_from("<H", head, 2)[0]
    config = ep0.descriptor(2, length=total)
    assert len(config) == total and config[:9] == head
    parts = walk(config)
    assert parts[0][1] == 2 and parts[0][4] == 2               # CONFIGURATION with 2 interfaces
    interfaces = [p for p in parts if p[1] == 4]
    assert [(i[2], i[5], i[6]) for i in interfaces] == [(0, 2, 2), (1, 0x0A, 0)]   # CDC/ACM, then CDC data
    # each interface declares as many endpoints as follow it
    counts, current = {}, None
    for p in parts[1:]:
        if p[1] == 4:
            current = p[2]
            counts[current] = 0
        elif p[1] == 5:
            counts[current] += 1
    assert counts == {i[2]: i[4] for i in interfaces}
    functional = {p[2]: p for p in parts if p[1] == 0x24}
    assert set(functional) == {0x00, 0x01, 0x02, 0x06}         # header, call management, ACM, union
    assert functional[0x06][3:5] == bytes([0, 1])              # union: control 0, data 1
    assert functional[0x01][4] == 1                            # call management names the data interface
    assert functional[0x02][3] & 0x02                          # line coding + control line state supported
    endpoints = {p[2]: (p[3] & 3, struct.unpack_from("<H", p, 4)[0]) for p in parts if p[1] == 5}
    assert endpoints == {0x82: (3, 8), 0x01: (2, 64), 0x81: (2, 64)}


def test_the_serial_number_is_the_unique_id(ep0):
    langs = ep0.descriptor(3, 0)
    assert langs == bytes([4, 3, 0x09, 0x04])
    for index in (1, 2, 3):
        d = ep0.descriptor(3, index)
        assert d[0] == len(d) and d[1] == 3 and len(d) % 2 == 0
    serial = ep0.descriptor(3, 3)[2:].decode("utf-16-le")
    assert serial == UID.hex()
    assert "hil" in ep0.descriptor(3, 2)[2:].decode("utf-16-le")


def test_enumeration_then_the_acm_driver_opening_the_port(ep0):
    assert ep0.setup(0x00, 5, 7) == ["status", "event", "set_address", "7"]
    assert ep0.setup(0x80, 8, length=1) == ["send", "00"]
    assert ep0.setup(0x00, 9, 1) == ["status", "event", "configured", "0"]
    assert ep0.setup(0x80, 8, length=1) == ["send", "01"]
    # cdc_acm on open: SET_CONTROL_LINE_STATE (DTR | RTS), SET_LINE_CODING 1 Mbaud 8N1, GET_LINE_CODING
    assert ep0.setup(0x21, 0x22, 3) == ["status"]
    coding = struct.pack("<IBBB", 1_000_000, 0, 0, 8)
    assert ep0.setup(0x21, 0x20, 0, 0, 7) == ["receive", "7"]
    assert ep0.ask("data " + coding.hex()) == ["status"]
    assert ep0.setup(0xA1, 0x21, 0, 0, 7) == ["send", coding.hex()]
    assert ep0.ask("state") == ["state", "1", coding.hex(), "3"]
    assert ep0.setup(0x00, 9, 0) == ["status", "event", "deconfigured", "0"]


def test_what_it_does_not_support_is_stalled(ep0):
    assert ep0.setup(0x80, 6, 6 << 8, 0, 10) == ["stall"]        # DEVICE_QUALIFIER: full speed only
    assert ep0.setup(0x80, 6, 3 << 8 | 9, 0x0409, 255) == ["stall"]   # no string 9
    assert ep0.setup(0x00, 9, 2) == ["stall"]                    # no configuration 2
    assert ep0.setup(0x00, 5, 200) == ["stall"]                  # no address 200
    assert ep0.setup(0x40, 0x55) == ["stall"]                    # vendor request
    assert ep0.setup(0x21, 0x20, 0, 0, 6) == ["stall"]           # SET_LINE_CODING of the wrong length
    assert ep0.ask("data 00112233445566") == ["stall"]           # data stage nobody asked for
    assert ep0.setup(0x21, 0x20, 0, 0, 7) == ["receive", "7"]
    assert ep0.setup(0x80, 6, 1 << 8, 0, 18)[0] == "send"        # a new SETUP abandons the old one
    assert ep0.ask("data 00112233445566") == ["stall"]


def test_any_setup_packet_gets_an_answer_within_its_length(ep0):
    rng = random.Random(7)
    for _ in range(3000):
        packet = bytes(rng.getrandbits(8) for _ in range(8))
        if rng.random() < 0.5:   # mostly-plausible requests as well as noise
            packet = bytes([rng.choice([0x00, 0x80, 0x81, 0x21, 0xA1, 0x01, 0x02]), rng.randrange(0x25)]) + packet[2:]
        r = ep0.ask("setup " + packet.hex())
        assert r and r[0] in ("send", "status", "receive", "stall"), (packet.hex(), r)
        if r[0] == "send":
            w_length = struct.unpack_from("<H", packet, 6)[0]
            assert len(bytes.fromhex(r[1])) <= w_length
            assert packet[0] & 0x80, "data sent for a host-to-device request"
        if r[0] == "receive":
            assert not packet[0] & 0x80
