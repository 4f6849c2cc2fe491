"""ROBOTIS Dynamixel Protocol 1.0 (AX-12A/AX-18A as in the Bioloid, MX-28 in 1.0): packets and
the bus. Feetech's servos use the same framing (`feetech.py` imports it from here).

Packet: FF FF | id | len (params + 2) | instruction (or, in a status, the error flags) | params |
checksum = NOT(id + len + instruction + params) & FF. There is no Sync Read on the AX: each servo
is read in turn.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from firmware_protocol.buses.control_tables import AX_SERIES, model_named, models_of
from firmware_protocol.buses.servo_bus import CycleCost, Identity, Reading, ServoBus, ServoError, UsualKit

BROADCAST = 0xFE
PING, READ, WRITE, REG_WRITE, ACTION, RESET, SYNC_READ, SYNC_WRITE, BULK_READ = (
    0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x82, 0x83, 0x92)

# the AX / MX (1.0) control table's addresses (control_tables.AX_SERIES: sizes, encodings, factory values)
T = AX_SERIES
MODEL_NUMBER, FIRMWARE, ID, BAUD, RETURN_DELAY, CW_LIMIT, CCW_LIMIT = (T[k].address for k in (
    "Model_Number", "Firmware_Version", "ID", "Baud_Rate", "Return_Delay_Time", "CW_Angle_Limit", "CCW_Angle_Limit"))
STATUS_RETURN, TORQUE_ENABLE, GOAL_POSITION, MOVING_SPEED, TORQUE_LIMIT = (T[k].address for k in (
    "Status_Return_Level", "Torque_Enable", "Goal_Position", "Moving_Speed", "Torque_Limit"))
PRESENT_POSITION, PRESENT_SPEED, PRESENT_LOAD, PRESENT_VOLTAGE, PRESENT_TEMPERATURE = (T[k].address for k in (
    "Present_Position", "Present_Speed", "Present_Load", "Present_Voltage", "Present_Temperature"))
BLOCK_START, BLOCK_LEN = PRESENT_POSITION, PRESENT_TEMPERATURE + 1 - PRESENT_POSITION

ERROR_BITS = {0: ServoError.VOLTAGE, 1: ServoError.ANGLE, 2: ServoError.OVERHEAT, 3: ServoError.INSTRUCTION,
              4: ServoError.INSTRUCTION, 5: ServoError.OVERLOAD, 6: ServoError.INSTRUCTION}


MODELS = models_of("dynamixel1")   # by number (control_tables.MODELS)


def checksum(body: bytes) -> int:
    return (~sum(body)) & 0xFF


def packet(servo_id: int, instruction: int, params: bytes = b"") -> bytes:
    """An instruction packet; a status packet has the error flags where the instruction goes."""
    body = bytes([servo_id, len(params) + 2, instruction]) + params
    return b"\xff\xff" + body + bytes([checksum(body)])


@dataclass(frozen=True)
class Packet1:
    servo_id: int
    code: int        # the instruction, or a status's error flags
    params: bytes


def parse(buf: bytes | bytearray) -> tuple[Packet1 | None, int]:
    """The first whole packet in `buf` and how many bytes to drop; (None, k): none yet, drop k."""
    start = buf.find(b"\xff\xff")
    while start >= 0:
        i = start + 2
        while i < len(buf) and buf[i] == 0xFF:  # FF FF FF … : the header is the last two
            i += 1
        if len(buf) < i + 2:
            return None, i - 2
        sid, length = buf[i], buf[i + 1]
        end = i + 2 + length
        if length < 2:
            start = buf.find(b"\xff\xff", i)
            continue
        if len(buf) < end:
            return None, i - 2
        body = bytes(buf[i:end - 1])
        if checksum(body) != buf[end - 1]:
            start = buf.find(b"\xff\xff", i)
            continue
        return Packet1(sid, body[2], body[3:]), end
    return None, max(len(buf) - 1, 0)


def sync_write(address: int, size: int, items: list[tuple[int, bytes]]) -> bytes:
    return packet(BROADCAST, SYNC_WRITE, bytes([address, size]) + b"".join(bytes([i]) + d for i, d in items))


def read(servo_id: int, address: int, size: int) -> bytes:
    return packet(servo_id, READ, bytes([address, size]))


def write(servo_id: int, address: int, data: bytes) -> bytes:
    return packet(servo_id, WRITE, bytes([address]) + data)


def flags_of(error: int, bits: dict[int, ServoError] = ERROR_BITS) -> int:
    out = 0
    for bit, flag in bits.items():
        if error & (1 << bit):
            out |= int(flag)
    return out


def sign_magnitude(raw: int, sign_bit: int) -> int:
    mag = raw & ((1 << sign_bit) - 1)
    return -mag if raw & (1 << sign_bit) else mag


class SumChecksumBus(ServoBus):
    """What Dynamixel 1.0 and Feetech share: the framing, and replies taken only from the servos
    asked. An adapter's echo of the request would parse as a status here (the instruction lands
    where the error flags go): the `Wire` reads the echo off first, and `BusBoard` finds out at
    connect whether the adapter echoes."""

    TORQUE_REG: int   # the Torque Enable register of the family

    def __init__(self, wire, reply_timeout_s: float = 0.006, return_delay_s: float = 0.0) -> None:
        super().__init__(wire, reply_timeout_s, return_delay_s)
        self.models: dict[int, object] = {}

    def _replies(self, ids: list[int], each_len: int) -> dict[int, Packet1]:
        return self.collect(parse, ids, each_len)

    @classmethod
    def ping_frame(cls, servo_id: int) -> bytes:
        return packet(servo_id, PING)

    def _identify(self, servo_id: int, model_at: int, size: int) -> tuple[bool, bytes | None]:
        """PING, then (as the vendors' SDKs do) READ the model number: (answered the PING, the
        model number's bytes or None)."""
        if self._transact(packet(servo_id, PING), servo_id, 6) is None:
            return False, None
        pkt = self._transact(read(servo_id, model_at, size), servo_id, 6 + size)
        return True, (pkt.params if pkt is not None and len(pkt.params) == size else None)

    def _transact(self, frame: bytes, servo_id: int, reply_len: int) -> Packet1 | None:
        self.wire.drain()
        self.rx.clear()
        self.wire.write(frame)
        return self._replies([servo_id], reply_len).get(servo_id)

    def set_torque(self, ids: list[int], on: bool) -> None:
        self.wire.write(sync_write(self.TORQUE_REG, 1, [(i, bytes([1 if on else 0])) for i in ids]))

    def torque_off_all(self) -> None:
        self.wire.write(write(BROADCAST, self.TORQUE_REG, b"\x00"))

    def recover(self, servo_id: int) -> None:
        # no reboot in 1.0 or on Feetech: an overload re-arms when torque is written again
        # (enable() switches it on); here it is switched off
        self._transact(write(servo_id, self.TORQUE_REG, b"\x00"), servo_id, 6)


class Dynamixel1Bus(SumChecksumBus):
    kind = "dynamixel1"
    TORQUE_REG = TORQUE_ENABLE
    title = "Dynamixel Protocol 1.0"
    bauds = (1_000_000, 57_600, 115_200, 500_000, 400_000, 250_000, 200_000, 9_600)
    default_baud = 1_000_000
    usual = UsualKit("AX-12A", model_named("AX-12A").ticks_per_rad, 512, 1, "AX-12A")

    @classmethod
    def turn_ticks(cls, model_name: str | None) -> int | None:
        model = {m.name.lower(): m for m in MODELS.values()}.get((model_name or "").lower())
        return model.ticks if model is not None and model.degrees == 360.0 else None   # MX: whole turns; AX: 300°

    def ping(self, servo_id: int) -> Identity | None:
        answered, data = self._identify(servo_id, MODEL_NUMBER, 3)
        if not answered:
            return None
        if data is None:
            return Identity(servo_id, None, "unknown model")
        number = data[0] | (data[1] << 8)
        model = MODELS.get(number)
        self.models[servo_id] = model
        return Identity(servo_id, number, model.name if model else f"model {number}", data[2])

    def write_goals(self, goals: list[tuple[int, int]]) -> None:
        self.wire.write(sync_write(GOAL_POSITION, 2, [(i, struct.pack("<H", max(0, t) & 0xFFFF)) for i, t in goals]))

    def read_present(self, ids: list[int]) -> dict[int, Reading]:
        out: dict[int, Reading] = {}
        for i in ids:  # no Sync Read in 1.0: one READ per servo
            pkt = self._transact(read(i, BLOCK_START, BLOCK_LEN), i, 6 + BLOCK_LEN)
            if pkt is None or len(pkt.params) != BLOCK_LEN:
                continue
            pos, speed, load, volt, temp = struct.unpack("<HHHBB", pkt.params)
            model = self.models.get(i)
            rpm = model.velocity_unit_rpm if model else 0.111
            ticks_per_rev = (model.ticks * 360.0 / model.degrees) if model else 1024 * 360 / 300
            out[i] = Reading(ticks=pos, velocity=sign_magnitude(speed, 10) * rpm / 60.0 * ticks_per_rev,
                             temperature_C=float(temp), voltage_V=volt / 10.0, errors=flags_of(pkt.code))
        return out

    @classmethod
    def cycle_cost(cls, n: int) -> CycleCost:
        tx = (8 + 3 * n) + n * 8  # sync write of 2 bytes each, then one 8-byte READ per servo
        rx = n * (6 + BLOCK_LEN)
        return CycleCost(tx, rx, n, 1 + n, f"sync write + {n} single reads of {BLOCK_LEN} bytes (no sync read in 1.0)")
