"""The emulated servos behave as the real ones do (firmware_protocol/buses/control_tables.py and the
emulator's RegisterServo), through the vendors' own SDKs over a real pty: factory state, broadcast
ping in id order, EEPROM and Lock rules, Moving and Present Load from the motion, the torque cap,
Dynamixel's operating modes and Drive Mode, ids and baud rates set as LeRobot's motor set-up sets
them, and an EEPROM kept across a power cycle."""

from __future__ import annotations

import struct
import sys
import time

import pytest

from firmware_protocol.buses import control_tables as CT
from tests.conftest import bus_emulator

dxl = pytest.importorskip("dynamixel_sdk")
scs = pytest.importorskip("scservo_sdk")
pytestmark = pytest.mark.slow

X = CT.X_SERIES
STS = CT.STS_SERIES


def _port(path: str, sdk, baud: int = 1_000_000):
    sys.modules[sdk.PortHandler.__module__].LATENCY_TIMER = 100   # a busy machine's emulator answers late
    port = sdk.PortHandler(path)
    assert port.openPort() and port.setBaudRate(baud)
    return port


def _wait(fn, timeout_s: float = 5.0):
    t_end = time.monotonic() + timeout_s
    while time.monotonic() < t_end:
        got = fn()
        if got:
            return got
        time.sleep(0.02)
    return fn()


def test_feetech_servos_from_the_factory_answer_a_broadcast_ping_and_keep_their_rules(tmp_path):
    eeprom = tmp_path / "eeprom.json"
    servos = [{"id": i, "model": 777, "initial": 2048, "vmax": 3000} for i in (3, 1, 2)]
    emu = bus_emulator("feetech", servos, "--factory", "--eeprom", str(eeprom))
    try:
        port, ph = _port(emu.path, scs), scs.PacketHandler(0)
        try:
            # a broadcast ping: every servo answers, in id order (what LeRobot's motor set-up looks for)
            assert ph.txPacket(port, [0xFF, 0xFF, 0xFE, 2, 1, 0]) == scs.COMM_SUCCESS
            time.sleep(0.2)
            raw = bytes(port.readPort(64))
            port.is_using = False   # (what the SDK's own transactions do after their reply)
            assert [raw[k + 2] for k in range(0, len(raw), 6)] == [1, 2, 3], raw.hex()
            # factory state: the whole turn, the torque cap at full, Lock set
            for name, want in (("Min_Position_Limit", 0), ("Max_Position_Limit", 4095), ("Torque_Limit", 1000),
                               ("Max_Torque_Limit", 1000), ("Lock", 1), ("Return_Delay_Time", 0)):
                reg = STS[name]
                got = (ph.read1ByteTxRx if reg.size == 1 else ph.read2ByteTxRx)(port, 1, reg.address)
                assert got[:2] == (want, scs.COMM_SUCCESS), (name, got)
            # an EEPROM write with the torque on is taken (not an "OverEle" error), kept only while Lock is 0
            assert ph.write1ByteTxRx(port, 1, STS["Torque_Enable"].address, 1) == (scs.COMM_SUCCESS, 0)
            assert ph.write2ByteTxRx(port, 1, STS["Min_Position_Limit"].address, 100) == (scs.COMM_SUCCESS, 0)
            assert ph.read2ByteTxRx(port, 1, STS["Min_Position_Limit"].address)[0] == 100
            assert ph.write1ByteTxRx(port, 2, STS["Lock"].address, 0) == (scs.COMM_SUCCESS, 0)
            assert ph.write2ByteTxRx(port, 2, STS["Max_Position_Limit"].address, 3000) == (scs.COMM_SUCCESS, 0)
            # the motion shows: Moving and Present Load while it turns, then still
            assert ph.write2ByteTxRx(port, 1, STS["Goal_Position"].address, 3500) == (scs.COMM_SUCCESS, 0)
            assert ph.read1ByteTxRx(port, 1, STS["Moving"].address)[0] == 1
            load = ph.read2ByteTxRx(port, 1, STS["Present_Load"].address)[0]
            assert 0 < load < 1000, load
            assert _wait(lambda: ph.read2ByteTxRx(port, 1, STS["Present_Position"].address)[0] == 3500)
            assert _wait(lambda: ph.read1ByteTxRx(port, 1, STS["Moving"].address)[0] == 0)
        finally:
            port.closePort()
    finally:
        emu.stop()
    emu = bus_emulator("feetech", servos, "--factory", "--eeprom", str(eeprom))   # powered up again
    try:
        port, ph = _port(emu.path, scs), scs.PacketHandler(0)
        try:
            assert ph.read2ByteTxRx(port, 1, STS["Min_Position_Limit"].address)[0] == 0      # written locked: gone
            assert ph.read2ByteTxRx(port, 2, STS["Max_Position_Limit"].address)[0] == 3000   # unlocked: kept
        finally:
            port.closePort()
    finally:
        emu.stop()


def test_a_new_feetech_servo_is_given_its_id_and_rate_as_lerobot_sets_them_up():
    emu = bus_emulator("feetech", [{"id": 1, "model": 777, "initial": 2048}], "--factory")
    try:
        port, ph = _port(emu.path, scs), scs.PacketHandler(0)
        try:
            assert ph.write1ByteTxRx(port, 1, STS["ID"].address, 6) == (scs.COMM_SUCCESS, 0)
            assert ph.ping(port, 1)[1] != scs.COMM_SUCCESS and ph.ping(port, 6)[:2] == (777, scs.COMM_SUCCESS)
            assert ph.write1ByteTxRx(port, 6, STS["Baud_Rate"].address, 4)[0] == scs.COMM_SUCCESS   # 115 200
            assert ph.ping(port, 6)[1] != scs.COMM_SUCCESS                                          # not at 1 M now
            assert port.setBaudRate(115_200) and ph.ping(port, 6)[:2] == (777, scs.COMM_SUCCESS)
        finally:
            port.closePort()
    finally:
        emu.stop()


def test_dynamixel_operating_modes_drive_mode_and_factory_values_as_the_e_manual_says():
    servos = [{"id": 1, "model": 1060, "initial": 2048, "vmax": 1e5}, {"id": 2, "model": 1200, "initial": 1000,
                                                                      "vmax": 1e5}]
    emu = bus_emulator("dynamixel2", servos, "--factory", "--return-delay-us", "0")
    try:
        port, ph = _port(emu.path, dxl), dxl.PacketHandler(2.0)
        try:
            # each model's own factory values, where its family's differ
            assert ph.read2ByteTxRx(port, 1, X["Position_P_Gain"].address)[0] == 640      # XL430-W250
            assert ph.read2ByteTxRx(port, 2, X["Position_P_Gain"].address)[0] == 400      # XL330-M288
            assert ph.read4ByteTxRx(port, 2, X["Velocity_Limit"].address)[0] == 445
            assert ph.read2ByteTxRx(port, 2, X["Current_Limit"].address)[0] == 1750
            assert ph.read4ByteTxRx(port, 1, X["Max_Position_Limit"].address)[0] == 4095
            # position mode (3): goals held to the limits, readings within the turn
            assert ph.write1ByteTxRx(port, 1, X["Torque_Enable"].address, 1) == (dxl.COMM_SUCCESS, 0)
            assert ph.write4ByteTxRx(port, 1, X["Goal_Position"].address, 4600)[0] == dxl.COMM_SUCCESS
            assert _wait(lambda: ph.read4ByteTxRx(port, 1, X["Present_Position"].address)[0] == 4095)
            # extended position (4): multi-turn, the limits ignored (written with the torque off: EEPROM)
            assert ph.write1ByteTxRx(port, 1, X["Operating_Mode"].address, 4)[1] == 7       # torque on: refused
            assert ph.write1ByteTxRx(port, 1, X["Torque_Enable"].address, 0)[0] == dxl.COMM_SUCCESS
            assert ph.write1ByteTxRx(port, 1, X["Operating_Mode"].address, 4) == (dxl.COMM_SUCCESS, 0)
            assert ph.write1ByteTxRx(port, 1, X["Torque_Enable"].address, 1)[0] == dxl.COMM_SUCCESS
            for goal in (4600, -300):
                assert ph.write4ByteTxRx(port, 1, X["Goal_Position"].address, goal & 0xFFFFFFFF)[0] == dxl.COMM_SUCCESS
                assert _wait(lambda: struct.unpack("<i", struct.pack(
                    "<I", ph.read4ByteTxRx(port, 1, X["Present_Position"].address)[0]))[0] == goal), goal
            # current-based position (5) on a model that has no current sensor: Data Range Error
            assert ph.write1ByteTxRx(port, 1, X["Torque_Enable"].address, 0)[0] == dxl.COMM_SUCCESS
            assert ph.write1ByteTxRx(port, 1, X["Operating_Mode"].address, 5)[1] == 4
            # Drive Mode bit 0: reverse — the reading mirrored where the shaft stands
            before = ph.read4ByteTxRx(port, 2, X["Present_Position"].address)[0]
            assert ph.write1ByteTxRx(port, 2, X["Drive_Mode"].address, 1) == (dxl.COMM_SUCCESS, 0)
            after = ph.read4ByteTxRx(port, 2, X["Present_Position"].address)[0]
            assert (before, after) == (1000, 4096 - 1000), (before, after)
        finally:
            port.closePort()
    finally:
        emu.stop()
