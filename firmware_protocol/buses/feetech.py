"""Feetech STS/SMS ("protocol 0", little-endian, with Sync Read) and SCS ("protocol 1",
big-endian, one read per servo): the Dynamixel 1.0 framing with Feetech's control table.

Signed registers are sign-magnitude: bit 15 for positions and speeds, bit 10 for load.
"""

from __future__ import annotations

import struct

from firmware_protocol.buses.dynamixel1 import (BROADCAST, READ, SYNC_READ, SumChecksumBus, flags_of, packet,
                                                sign_magnitude, sync_write, write)
from firmware_protocol.buses.control_tables import STS_SERIES, ServoModel, model_named, models_of
from firmware_protocol.buses.servo_bus import CycleCost, Identity, Reading, ServoError, UsualKit

# the STS control table's addresses (control_tables.STS_SERIES: sizes, encodings, factory values)
T = STS_SERIES
FIRMWARE_MAJOR, MODEL_NUMBER, ID, BAUD, RETURN_DELAY, MIN_POSITION, MAX_POSITION = (T[k].address for k in (
    "Firmware_Major_Version", "Model_Number", "ID", "Baud_Rate", "Return_Delay_Time", "Min_Position_Limit",
    "Max_Position_Limit"))
HOMING_OFFSET, OPERATING_MODE, TORQUE_ENABLE, ACCELERATION, GOAL_POSITION, LOCK = (T[k].address for k in (
    "Homing_Offset", "Operating_Mode", "Torque_Enable", "Acceleration", "Goal_Position", "Lock"))
HOMING_SIGN_BIT = T["Homing_Offset"].sign   # sign-magnitude with its sign in bit 11 (positions: bit 15)
MAX_TORQUE_LIMIT, TORQUE_FULL = T["Max_Torque_Limit"].address, T["Max_Torque_Limit"].default   # 0.1 % a unit
PRESENT_POSITION, PRESENT_VELOCITY, PRESENT_LOAD, PRESENT_VOLTAGE, PRESENT_TEMPERATURE = (T[k].address for k in (
    "Present_Position", "Present_Velocity", "Present_Load", "Present_Voltage", "Present_Temperature"))
STATUS, MOVING, PRESENT_CURRENT = T["Status"].address, T["Moving"].address, T["Present_Current"].address
BLOCK_START, BLOCK_LEN = PRESENT_POSITION, PRESENT_CURRENT + 2 - PRESENT_POSITION   # 56 … 70

ERROR_BITS = {0: ServoError.VOLTAGE, 1: ServoError.ENCODER, 2: ServoError.OVERHEAT, 3: ServoError.SHOCK,
              5: ServoError.OVERLOAD}
# the vendor SDK's table (LeRobot's differs for 5…7; the vendor's agrees across its own copies)
BAUD_CODES = {1_000_000: 0, 500_000: 1, 250_000: 2, 128_000: 3, 115_200: 4, 76_800: 5, 57_600: 6, 38_400: 7}
CURRENT_UNIT_MA = 6.5   # Present Current's unit where the model is unknown (the STS's, control_tables)


MODELS = models_of("feetech")   # by number (control_tables.MODELS; SCS: big-endian, no Sync Read)


def sync_read(address: int, size: int, ids: list[int]) -> bytes:
    return packet(BROADCAST, SYNC_READ, bytes([address, size]) + bytes(ids))


def word(value: int, big_endian: bool, sign_bit: int | None = 15) -> bytes:
    """A 2-byte register value (sign-magnitude when `sign_bit`)."""
    raw = value
    if sign_bit is not None and value < 0:
        raw = (-value) | (1 << sign_bit)
    return struct.pack(">H" if big_endian else "<H", raw & 0xFFFF)


def unword(data: bytes, big_endian: bool, sign_bit: int | None = 15) -> int:
    raw = struct.unpack(">H" if big_endian else "<H", data)[0]
    return raw if sign_bit is None else sign_magnitude(raw, sign_bit)


def decode_block(data: bytes, model: ServoModel | None) -> Reading:
    be = bool(model and model.big_endian)
    pos = unword(data[0:2], be)
    vel = unword(data[2:4], be)        # ticks per second (STS "step/s")
    volt, temp = data[PRESENT_VOLTAGE - BLOCK_START], data[PRESENT_TEMPERATURE - BLOCK_START]
    status = data[STATUS - BLOCK_START]
    current = unword(data[PRESENT_CURRENT - BLOCK_START:PRESENT_CURRENT - BLOCK_START + 2], be)
    unit = model.current_unit_mA if model is not None and model.current_unit_mA else CURRENT_UNIT_MA
    return Reading(ticks=pos, velocity=float(vel), current_mA=current * unit, temperature_C=float(temp),
                   voltage_V=volt / 10.0, errors=flags_of(status, ERROR_BITS))


class FeetechBus(SumChecksumBus):
    kind = "feetech"
    TORQUE_REG = TORQUE_ENABLE
    title = "Feetech STS/SCS"
    bauds = (1_000_000, 500_000, 115_200, 250_000, 128_000, 57_600, 38_400)
    default_baud = 1_000_000
    usual = UsualKit("STS3215", model_named("STS3215").ticks_per_rad, 2048, 1, "STS3215")
    has_torque_limit = True

    def _model(self, servo_id: int) -> ServoModel | None:
        m = self.models.get(servo_id)
        return m if isinstance(m, ServoModel) else None

    def ping(self, servo_id: int) -> Identity | None:
        answered, data = self._identify(servo_id, MODEL_NUMBER, 2)
        if not answered:
            return None
        if data is None:
            return Identity(servo_id, None, "unknown model")
        number = data[0] | (data[1] << 8)   # the model number is stored little-endian on both
        model = MODELS.get(number) or MODELS.get((data[0] << 8) | data[1])
        self.models[servo_id] = model
        return Identity(servo_id, model.number if model else number, model.name if model else f"model {number}")

    def write_goals(self, goals: list[tuple[int, int]]) -> None:
        by_order: dict[bool, list[tuple[int, bytes]]] = {}
        for i, t in goals:
            m = self._model(i)
            be = bool(m and m.big_endian)
            by_order.setdefault(be, []).append((i, word(t, be)))
        for be, items in by_order.items():
            self.wire.write(sync_write(GOAL_POSITION, 2, items))

    def read_present(self, ids: list[int]) -> dict[int, Reading]:
        group = [i for i in ids if (self._model(i) is None or self._model(i).sync_read)]
        single = [i for i in ids if i not in group]
        out: dict[int, Reading] = {}
        if group:
            self.wire.drain()
            self.rx.clear()
            self.wire.write(sync_read(BLOCK_START, BLOCK_LEN, group))
            for i, pkt in self._replies(group, 6 + BLOCK_LEN).items():
                if len(pkt.params) == BLOCK_LEN:
                    out[i] = decode_block(pkt.params, self._model(i))
                    out[i].errors |= flags_of(pkt.code, ERROR_BITS)
        for i in single:
            pkt = self._transact(packet(i, READ, bytes([BLOCK_START, BLOCK_LEN])), i, 6 + BLOCK_LEN)
            if pkt is not None and len(pkt.params) == BLOCK_LEN:
                out[i] = decode_block(pkt.params, self._model(i))
                out[i].errors |= flags_of(pkt.code, ERROR_BITS)
        return out

    homing_limit = 2047   # 11 bits and a sign
    homing_sign = -1      # present = actual − offset (the opposite of Dynamixel's)
    lerobot_homing_limit = 2047
    lerobot_mirrors_on_host = True

    @classmethod
    def turn_ticks(cls, model_name: str | None) -> int | None:
        models = {m.name.lower(): m for m in MODELS.values()}
        model = models.get((model_name or "").lower())
        if model is not None and model.big_endian:
            return None     # SCS: 300° with a dead band, no wrap
        return model.ticks_per_rev if model else 4096

    def _has_homing(self, servo_id: int) -> bool:
        m = self._model(servo_id)
        return not (m is not None and m.big_endian)   # SCS servos have no Homing Offset

    def _read_word(self, servo_id: int, address: int, sign_bit: int | None) -> int | None:
        pkt = self._transact(packet(servo_id, READ, bytes([address, 2])), servo_id, 8)
        return unword(pkt.params, False, sign_bit) if pkt is not None and len(pkt.params) == 2 else None

    def _write_words(self, servo_id: int, values: list[tuple[int, int, int | None]]) -> bool:
        """EEPROM words, unlocked for the writes (Lock, 55) and locked again; read back."""
        self._transact(write(servo_id, LOCK, b"\x00"), servo_id, 6)
        try:
            for address, value, sign_bit in values:
                self._transact(write(servo_id, address, word(value, False, sign_bit)), servo_id, 6)
        finally:
            self._transact(write(servo_id, LOCK, b"\x01"), servo_id, 6)
        return all(self._read_word(servo_id, a, sb) == v for a, v, sb in values)

    def homing_offset(self, servo_id: int) -> int | None:
        return self._read_word(servo_id, HOMING_OFFSET, HOMING_SIGN_BIT) if self._has_homing(servo_id) else None

    def write_homing_offset(self, servo_id: int, ticks: int) -> bool | None:
        if not self._has_homing(servo_id):
            return None
        return self._write_words(servo_id, [(HOMING_OFFSET, ticks, HOMING_SIGN_BIT)])

    def write_position_limits(self, servo_id: int, lo: int, hi: int) -> bool | None:
        if not self._has_homing(servo_id):
            return None    # SCS: its angle limits are another matter (300°, no wrap)
        return self._write_words(servo_id, [(MIN_POSITION, lo, None), (MAX_POSITION, hi, None)])

    def position_limits(self, servo_id: int) -> tuple[int, int] | None:
        if not self._has_homing(servo_id):
            return None
        lo, hi = self._read_word(servo_id, MIN_POSITION, None), self._read_word(servo_id, MAX_POSITION, None)
        return None if lo is None or hi is None else (lo, hi)

    def write_torque_limit(self, servo_id: int, fraction: float) -> bool | None:
        """Max Torque Limit (EEPROM, read into the Torque Limit at power-up): STS servos."""
        if not self._has_homing(servo_id):
            return None    # SCS: another table
        return self._write_words(servo_id, [(MAX_TORQUE_LIMIT, round(fraction * TORQUE_FULL), None)])

    @classmethod
    def cycle_cost(cls, n: int) -> CycleCost:
        tx = (8 + 3 * n) + (8 + n)
        rx = n * (6 + BLOCK_LEN)
        return CycleCost(tx, rx, n, 1, f"sync write + sync read of {BLOCK_LEN} bytes")
