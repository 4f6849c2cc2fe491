"""Our Dynamixel and Feetech codecs and emulators against the vendors' own Python SDKs
(`dynamixel-sdk` from ROBOTIS, `feetech-servo-sdk`): the SDK pings, reads and writes our emulator
through a real pty, and what our driver writes equals, byte for byte, what the SDK writes for the
same request (captured on a pty of our own)."""

from __future__ import annotations

import os
import select
import struct
import sys
import tty

import pytest

from firmware_protocol.buses import dynamixel1 as d1
from firmware_protocol.buses import dynamixel2 as d2
from firmware_protocol.buses import feetech as ft
from firmware_protocol.buses.servo_bus import Wire
from firmware_protocol.link import open_serial
from tests.conftest import bus_emulator

dxl = pytest.importorskip("dynamixel_sdk")
scs = pytest.importorskip("scservo_sdk")

XM430 = [{"id": 1, "model": 1020, "initial": 1000, "vmax": 1e6}, {"id": 2, "model": 1020, "initial": 3000, "vmax": 1e6}]
AX12 = [{"id": 1, "model": 12, "initial": 512, "vmax": 1e6}, {"id": 4, "model": 12, "initial": 300, "vmax": 1e6}]
STS = [{"id": 1, "model": 777, "initial": 2048, "vmax": 1e6}, {"id": 2, "model": 777, "initial": 100, "vmax": 1e6}]


@pytest.fixture
def emulated(request):
    bus, servos = request.param
    emu = bus_emulator(bus, servos)
    yield emu.path
    emu.stop()


def _sdk_port(path: str, sdk):
    # the SDKs wait 2 × their USB adapter's 16 ms latency timer + 2 ms for a reply; an emulator
    # process on a busy machine can be late by more than that, which the bytes under test are not
    sys.modules[sdk.PortHandler.__module__].LATENCY_TIMER = 100
    port = sdk.PortHandler(path)
    assert port.openPort() and port.setBaudRate(1_000_000)
    return port


@pytest.mark.parametrize("emulated", [("dynamixel2", XM430)], indirect=True)
def test_dynamixel_sdk_drives_our_protocol2_emulator(emulated):
    port, ph = _sdk_port(emulated, dxl), dxl.PacketHandler(2.0)
    try:
        model, res, err = ph.ping(port, 1)
        assert (model, res, err) == (1020, dxl.COMM_SUCCESS, 0)
        assert ph.ping(port, 3)[1] == dxl.COMM_RX_TIMEOUT   # nobody there
        found, res = ph.broadcastPing(port)
        assert res == dxl.COMM_SUCCESS and sorted(found) == [1, 2] and found[2][0] == 1020
        pos, res, err = ph.read4ByteTxRx(port, 2, d2.PRESENT_POSITION)
        assert (pos, res) == (3000, dxl.COMM_SUCCESS)
        # EEPROM is locked while torque is on: Access Error, as the e-manual says
        assert ph.write1ByteTxRx(port, 1, d2.TORQUE_ENABLE, 1) == (dxl.COMM_SUCCESS, 0)
        assert ph.write1ByteTxRx(port, 1, d2.RETURN_DELAY, 0)[1] == 7
        writer = dxl.GroupSyncWrite(port, ph, d2.GOAL_POSITION, 4)
        writer.addParam(1, list(struct.pack("<i", 2500)))
        assert writer.txPacket() == dxl.COMM_SUCCESS
        reader = dxl.GroupSyncRead(port, ph, d2.PRESENT_POSITION, 4)
        reader.addParam(1)
        reader.addParam(2)
        for _ in range(20):  # the servo moves toward its goal
            assert reader.txRxPacket() == dxl.COMM_SUCCESS
            if reader.getData(1, d2.PRESENT_POSITION, 4) == 2500:
                break
        assert reader.getData(1, d2.PRESENT_POSITION, 4) == 2500
        assert reader.getData(2, d2.PRESENT_POSITION, 4) == 3000   # torque off: it stays
        fast = dxl.GroupSyncRead(port, ph, d2.PRESENT_POSITION, 4)   # Fast Sync Read: one reply for both
        fast.addParam(1)
        fast.addParam(2)
        assert fast.fastSyncRead() == dxl.COMM_SUCCESS
        assert (fast.getData(1, d2.PRESENT_POSITION, 4), fast.getData(2, d2.PRESENT_POSITION, 4)) == (2500, 3000)
        assert ph.reboot(port, 1) == (dxl.COMM_SUCCESS, 0)
        assert ph.read1ByteTxRx(port, 1, d2.TORQUE_ENABLE)[0] == 0
    finally:
        port.closePort()


@pytest.mark.parametrize("emulated", [("dynamixel1", AX12)], indirect=True)
def test_dynamixel_sdk_drives_our_protocol1_emulator(emulated):
    port, ph = _sdk_port(emulated, dxl), dxl.PacketHandler(1.0)
    try:
        assert ph.ping(port, 4) == (12, dxl.COMM_SUCCESS, 0)
        assert ph.read2ByteTxRx(port, 4, d1.PRESENT_POSITION) == (300, dxl.COMM_SUCCESS, 0)
        assert ph.write1ByteTxRx(port, 4, d1.TORQUE_ENABLE, 1) == (dxl.COMM_SUCCESS, 0)
        writer = dxl.GroupSyncWrite(port, ph, d1.GOAL_POSITION, 2)
        writer.addParam(4, list(struct.pack("<H", 700)))
        assert writer.txPacket() == dxl.COMM_SUCCESS
        for _ in range(20):
            pos = ph.read2ByteTxRx(port, 4, d1.PRESENT_POSITION)[0]
            if pos == 700:
                break
        assert pos == 700
    finally:
        port.closePort()


@pytest.mark.parametrize("emulated", [("feetech", STS)], indirect=True)
def test_feetech_sdk_drives_our_sts_emulator(emulated):
    port = _sdk_port(emulated, scs)
    ph = scs.PacketHandler(0)
    try:
        assert ph.ping(port, 2) == (777, scs.COMM_SUCCESS, 0)
        assert ph.read2ByteTxRx(port, 2, ft.PRESENT_POSITION) == (100, scs.COMM_SUCCESS, 0)
        assert ph.write1ByteTxRx(port, 2, ft.TORQUE_ENABLE, 1) == (scs.COMM_SUCCESS, 0)
        writer = scs.GroupSyncWrite(port, ph, ft.GOAL_POSITION, 2)
        writer.addParam(2, [0x00, 0x04])   # 1024, little-endian
        assert writer.txPacket() == scs.COMM_SUCCESS
        reader = scs.GroupSyncRead(port, ph, ft.PRESENT_POSITION, 2)
        reader.addParam(1)
        reader.addParam(2)
        for _ in range(20):
            assert reader.txRxPacket() == scs.COMM_SUCCESS
            if reader.getData(2, ft.PRESENT_POSITION, 2) == 1024:
                break
        assert reader.getData(2, ft.PRESENT_POSITION, 2) == 1024
        assert reader.getData(1, ft.PRESENT_POSITION, 2) == 2048
    finally:
        port.closePort()


# ------------------------------------------------------------------ byte for byte
class Capture:
    """A pty whose far end records what a program writes to it."""

    def __init__(self) -> None:
        self.master, self.slave = os.openpty()
        tty.setraw(self.slave)
        self.path = os.ttyname(self.slave)

    def take(self) -> bytes:
        out = b""
        while select.select([self.master], [], [], 0.05)[0]:
            out += os.read(self.master, 4096)
        return out

    def same(self, sdk_call, our_call) -> None:
        """The SDK's call and ours put the same bytes on the wire (and some)."""
        self.take()
        sdk_call()
        theirs = self.take()
        our_call()
        assert self.take() == theirs and theirs

    def close(self) -> None:
        os.close(self.master)
        os.close(self.slave)


@pytest.fixture
def capture():
    c = Capture()
    yield c
    c.close()


def test_our_protocol2_driver_writes_what_the_sdk_writes(capture):
    port, ph = _sdk_port(capture.path, dxl), dxl.PacketHandler(2.0)
    ours = d2.Dynamixel2Bus(Wire(open_serial(capture.path, 1_000_000)), reply_timeout_s=0.001)
    try:
        capture.same(lambda: ph.ping(port, 7), lambda: ours.ping(7))
        capture.same(lambda: ph.reboot(port, 3), lambda: ours.recover(3))
        capture.same(lambda: ph.read1ByteTxRx(port, 5, d2.HARDWARE_ERROR), lambda: ours.read_byte(5, d2.HARDWARE_ERROR))
        capture.same(lambda: ph.write1ByteTxOnly(port, 0xFE, d2.TORQUE_ENABLE, 0), ours.torque_off_all)
        goals = [(1, 2048), (2, -5), (3, 4095)]

        def sdk_goals():
            w = dxl.GroupSyncWrite(port, ph, d2.GOAL_POSITION, 4)
            for i, t in goals:
                w.addParam(i, list(struct.pack("<i", t)))
            w.txPacket()
        capture.same(sdk_goals, lambda: ours.write_goals(goals))

        def sdk_torque():
            w = dxl.GroupSyncWrite(port, ph, d2.TORQUE_ENABLE, 1)
            for i in (1, 2, 3):
                w.addParam(i, [1])
            w.txPacket()
        capture.same(sdk_torque, lambda: ours.set_torque([1, 2, 3], True))

        def sdk_read():
            r = dxl.GroupSyncRead(port, ph, d2.BLOCK_START, d2.BLOCK_LEN)
            for i in (1, 2, 3):
                r.addParam(i)
            r.txRxPacket()
        capture.same(sdk_read, lambda: ours.read_present([1, 2, 3]))
    finally:
        port.closePort()
        ours.wire.ser.close()


def test_byte_stuffing_as_the_e_manual_says_where_the_python_sdk_skips_it(capture):
    """A goal whose bytes hold FF FF FD must go out as FF FF FD FD (e-manual, "Packet Process").
    dynamixel-sdk 4.1.0's Python txPacket drops the list its addStuffing returns, so it sends such
    a packet unstuffed; if a release fixes that, its bytes must equal ours exactly."""
    port, ph = _sdk_port(capture.path, dxl), dxl.PacketHandler(2.0)
    try:
        goals = [(1, 2048), (3, 0x00FDFFFF)]
        w = dxl.GroupSyncWrite(port, ph, d2.GOAL_POSITION, 4)
        for i, t in goals:
            w.addParam(i, list(struct.pack("<i", t)))
        w.txPacket()
        theirs = capture.take()
    finally:
        port.closePort()
    ours = d2.sync_write(d2.GOAL_POSITION, 4, [(i, struct.pack("<i", t)) for i, t in goals])
    assert b"\xff\xff\xfd\xfd" in ours and ours[5] == theirs[5] + (0 if b"\xfd\xfd" in theirs else 1)
    unstuffed_body = ours[7:-2].replace(b"\xff\xff\xfd\xfd", b"\xff\xff\xfd")
    assert theirs == ours or theirs[7:-2] == unstuffed_body


def test_our_protocol1_and_feetech_drivers_write_what_the_sdks_write(capture):
    from firmware_protocol.buses.dynamixel1 import Dynamixel1Bus
    from firmware_protocol.buses.feetech import FeetechBus

    port = _sdk_port(capture.path, dxl)
    ph1 = dxl.PacketHandler(1.0)
    wire = Wire(open_serial(capture.path, 1_000_000))
    ax, sts = Dynamixel1Bus(wire, reply_timeout_s=0.001), FeetechBus(wire, reply_timeout_s=0.001)
    try:
        capture.same(lambda: ph1.ping(port, 9), lambda: ax.ping(9))

        def ax_goals():
            w = dxl.GroupSyncWrite(port, ph1, d1.GOAL_POSITION, 2)
            for i, t in ((1, 512), (2, 1023)):
                w.addParam(i, list(struct.pack("<H", t)))
            w.txPacket()
        capture.same(ax_goals, lambda: ax.write_goals([(1, 512), (2, 1023)]))
        ph1.readTxRx(port, 2, d1.BLOCK_START, d1.BLOCK_LEN)
        theirs = capture.take()
        ax.read_present([2])
        assert capture.take() == theirs
        port.closePort()

        port2 = _sdk_port(capture.path, scs)
        ph0 = scs.PacketHandler(0)
        capture.take()
        w = scs.GroupSyncWrite(port2, ph0, ft.GOAL_POSITION, 2)
        for i, t in ((1, 2048), (2, 100)):
            w.addParam(i, list(ft.word(t, False)))
        w.txPacket()
        theirs = capture.take()
        sts.write_goals([(1, 2048), (2, 100)])
        assert capture.take() == theirs
        r = scs.GroupSyncRead(port2, ph0, ft.BLOCK_START, ft.BLOCK_LEN)
        r.addParam(1)
        r.addParam(2)
        r.txRxPacket()
        theirs = capture.take()
        sts.read_present([1, 2])
        assert capture.take() == theirs
        port2.closePort()
    finally:
        wire.ser.close()
