"""ROBOTIS Dynamixel Protocol 2.0 (X series: XM430, XL430, XL330, …): packets and the bus.

Packet: FF FF FD 00 | id | len (LE, bytes after it) | instruction | params | CRC-16 (LE).
CRC-16 is polynomial 0x8005, initial 0, unreflected, over the stuffed frame; inside the
instruction and parameters every FF FF FD is followed by an extra FD on the wire.
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass


from firmware_protocol.buses.control_tables import X_SERIES, ServoModel, model_named, models_of
from firmware_protocol.buses.servo_bus import CycleCost, Identity, Reading, ServoBus, ServoError, UsualKit

HEADER = b"\xff\xff\xfd\x00"
BROADCAST = 0xFE
PING, READ, WRITE, REG_WRITE, ACTION, FACTORY_RESET, REBOOT, CLEAR = 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x08, 0x10
STATUS, SYNC_READ, SYNC_WRITE, FAST_SYNC_READ, BULK_READ, BULK_WRITE = 0x55, 0x82, 0x83, 0x8A, 0x92, 0x93

# the X-series control table's addresses (control_tables.X_SERIES: sizes, encodings, factory values)
T = X_SERIES
MODEL_NUMBER, FIRMWARE, ID, BAUD = (T[k].address for k in ("Model_Number", "Firmware_Version", "ID", "Baud_Rate"))
RETURN_DELAY, DRIVE_MODE, OPERATING_MODE = (T[k].address for k in ("Return_Delay_Time", "Drive_Mode", "Operating_Mode"))
HOMING_OFFSET, PWM_LIMIT, MAX_POSITION, MIN_POSITION, SHUTDOWN = (
    T[k].address for k in ("Homing_Offset", "PWM_Limit", "Max_Position_Limit", "Min_Position_Limit", "Shutdown"))
PWM_FULL = T["PWM_Limit"].default   # PWM Limit's maximum (0.113 % a unit): the servo's whole voltage and torque
TORQUE_ENABLE, LED, STATUS_RETURN, HARDWARE_ERROR, BUS_WATCHDOG = (
    T[k].address for k in ("Torque_Enable", "LED", "Status_Return_Level", "Hardware_Error_Status", "Bus_Watchdog"))
GOAL_POSITION, PRESENT_CURRENT, PRESENT_VELOCITY, PRESENT_POSITION = (
    T[k].address for k in ("Goal_Position", "Present_Current", "Present_Velocity", "Present_Position"))
PRESENT_VOLTAGE, PRESENT_TEMPERATURE = T["Present_Input_Voltage"].address, T["Present_Temperature"].address
# one read from Present Current to Present Temperature: current, velocity, position, trajectories, voltage, temperature
BLOCK_START, BLOCK_LEN = PRESENT_CURRENT, PRESENT_TEMPERATURE + 1 - PRESENT_CURRENT

BAUD_CODES = {9600: 0, 57600: 1, 115200: 2, 1_000_000: 3, 2_000_000: 4, 3_000_000: 5, 4_000_000: 6, 4_500_000: 7}
VELOCITY_UNIT_RPM = 0.229

HW_ERROR_BITS = {0: ServoError.VOLTAGE, 2: ServoError.OVERHEAT, 3: ServoError.ENCODER, 4: ServoError.SHOCK,
                 5: ServoError.OVERLOAD}


MODELS = models_of("dynamixel2")   # by number (control_tables.MODELS)


def crc16(data: bytes, crc: int = 0) -> int:
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x8005) if crc & 0x8000 else (crc << 1)
            crc &= 0xFFFF
    return crc


_TABLE = tuple(crc16(bytes([i])) for i in range(256))


def crc16_fast(data: bytes, table: tuple = _TABLE) -> int:
    """`crc16`, a byte at a time from a table (the wire library needs nothing compiled)."""
    crc = 0
    for b in data:
        crc = ((crc << 8) & 0xFFFF) ^ table[(crc >> 8) ^ b]
    return crc


def stuff(body: bytes) -> bytes:
    """Insert FD after every FF FF FD (the instruction and parameters only)."""
    return body.replace(b"\xff\xff\xfd", b"\xff\xff\xfd\xfd")


def unstuff(body: bytes) -> bytes:
    return body.replace(b"\xff\xff\xfd\xfd", b"\xff\xff\xfd")


def packet(servo_id: int, instruction: int, params: bytes = b"") -> bytes:
    """An instruction (or, with `instruction` STATUS and the error byte first in `params`, a status) packet."""
    body = stuff(bytes([instruction]) + params)
    head = HEADER + bytes([servo_id]) + struct.pack("<H", len(body) + 2)
    crc = crc16_fast(head + body)
    return head + body + struct.pack("<H", crc)


def status_packet(servo_id: int, error: int, params: bytes = b"") -> bytes:
    return packet(servo_id, STATUS, bytes([error]) + params)


@dataclass(frozen=True)
class Packet2:
    servo_id: int
    instruction: int       # STATUS for a reply
    error: int             # the status's error byte (0 for instructions)
    params: bytes          # unstuffed; for a status, the data after the error byte


def parse(buf: bytes | bytearray, unstuffed: bool = True) -> tuple[Packet2 | None, int]:
    """The first whole packet in `buf` and how many bytes to drop (garbage and the packet);
    (None, k): no whole packet yet, the first k bytes can go. `unstuffed=False`: the parameters
    as sent (a Fast Sync Read reply is parsed by position, as ROBOTIS's own parsers do)."""
    start = buf.find(HEADER)
    while start >= 0:
        if len(buf) < start + 7:
            return None, start
        length = buf[start + 5] | (buf[start + 6] << 8)
        end = start + 7 + length
        if length < 3 or length > 1000:
            start = buf.find(HEADER, start + 1)
            continue
        if len(buf) < end:
            return None, start
        frame = bytes(buf[start:end])
        if crc16_fast(frame[:-2]) != (frame[-2] | (frame[-1] << 8)):
            start = buf.find(HEADER, start + 1)
            continue
        body = unstuff(frame[7:-2]) if unstuffed else frame[7:-2]
        instr = body[0]
        if instr == STATUS:
            if len(body) < 2:
                start = buf.find(HEADER, start + 1)
                continue
            return Packet2(frame[4], instr, body[1], body[2:]), end
        return Packet2(frame[4], instr, 0, body[1:]), end
    keep = max(len(buf) - 3, 0)  # a header may be arriving
    return None, keep


def fast_sync_reply(address_data: list[tuple[int, int, bytes]]) -> bytes:
    """A Fast Sync Read reply: [(error, id, data)] in one packet from 0xFE. Each slot is error, id,
    data, CRC; the first error sits where a status has its error; the last slot's CRC is the
    frame's. A slot's CRC is taken here to be the running CRC of the frame so far (what real
    servos put there is not documented; ROBOTIS's parsers check only the frame's)."""
    length = 1 + sum(len(d) + 4 for _, _, d in address_data)
    frame = bytearray(HEADER + bytes([BROADCAST]) + struct.pack("<H", length) + bytes([STATUS]))
    for k, (err, sid, data) in enumerate(address_data):
        frame += bytes([err, sid]) + data
        frame += struct.pack("<H", crc16_fast(bytes(frame)))
    return bytes(frame)


def parse_fast_slots(pkt: Packet2, size: int) -> dict[int, tuple[int, bytes]]:
    """{id: (error, data)} from a parsed (`unstuffed=False`) Fast Sync Read reply of `size`-byte items."""
    out = {}
    raw = bytes([pkt.error]) + pkt.params + b"\x00\x00"   # the frame's CRC closes the last slot
    step = size + 4
    for k in range(0, len(raw) - step + 1, step):
        out[raw[k + 1]] = (raw[k], raw[k + 2:k + 2 + size])
    return out


def sync_write(address: int, size: int, items: list[tuple[int, bytes]]) -> bytes:
    params = struct.pack("<HH", address, size) + b"".join(bytes([i]) + d for i, d in items)
    return packet(BROADCAST, SYNC_WRITE, params)


def sync_read(address: int, size: int, ids: list[int], fast: bool = False) -> bytes:
    return packet(BROADCAST, FAST_SYNC_READ if fast else SYNC_READ, struct.pack("<HH", address, size) + bytes(ids))


def read(servo_id: int, address: int, size: int) -> bytes:
    return packet(servo_id, READ, struct.pack("<HH", address, size))


def write(servo_id: int, address: int, data: bytes) -> bytes:
    return packet(servo_id, WRITE, struct.pack("<H", address) + data)


def errors_of(status_error: int, hardware_error: int | None) -> int:
    """ServoError flags from a status's error byte and (if read) Hardware Error Status."""
    out = int(ServoError.INSTRUCTION) if status_error & 0x7F else 0
    if hardware_error:
        for bit, flag in HW_ERROR_BITS.items():
            if hardware_error & (1 << bit):
                out |= int(flag)
    return out


def decode_block(data: bytes, model: ServoModel | None) -> Reading:
    """A read of BLOCK_START..BLOCK_LEN as a Reading."""
    cur, vel, pos = struct.unpack_from("<hii", data, 0)
    volt, temp = struct.unpack_from("<HB", data, PRESENT_VOLTAGE - BLOCK_START)
    unit = model.current_unit_mA if model is not None else None
    rev = model.ticks_per_rev if model is not None else 4096
    return Reading(ticks=pos, velocity=vel * VELOCITY_UNIT_RPM / 60.0 * rev,
                   current_mA=None if unit is None else cur * unit, temperature_C=float(temp), voltage_V=volt / 10.0)


class Dynamixel2Bus(ServoBus):
    kind = "dynamixel2"
    title = "Dynamixel Protocol 2.0"
    bauds = (1_000_000, 57_600, 115_200, 2_000_000, 3_000_000, 4_000_000, 9_600)
    default_baud = 1_000_000
    options = {"fast_sync_read": "fast"}   # every servo's state in one combined reply (recent X firmware)
    usual = UsualKit("XM430-W350", model_named("XM430-W350").ticks_per_rad, 2048, 1, "XM430-W350")
    has_watchdog = True
    has_torque_limit = True
    max_id = 252   # 253 (0xFD) would read as the header's last byte; 254 is the broadcast id

    def __init__(self, wire, reply_timeout_s: float = 0.006, return_delay_s: float = 0.0,
                 fast: bool = False) -> None:
        super().__init__(wire, reply_timeout_s, return_delay_s)
        self.models: dict[int, ServoModel | None] = {}
        self.fast = fast   # Fast Sync Read (0x8A): recent X-series firmware only (which versions: unpublished)

    def _replies(self, count: int, each_len: int, ids: list[int]) -> dict[int, Packet2]:
        """Status packets from `ids`, each `each_len` bytes on the wire (stuffing aside)."""
        return self.collect(parse, ids, each_len, lambda pkt: pkt.instruction == STATUS)

    def _transact(self, frame: bytes, servo_id: int, reply_len: int) -> Packet2 | None:
        self.wire.drain()
        self.rx.clear()
        self.wire.write(frame)
        return self._replies(1, reply_len, [servo_id]).get(servo_id)

    @classmethod
    def ping_frame(cls, servo_id: int) -> bytes:
        return packet(servo_id, PING)

    def ping(self, servo_id: int) -> Identity | None:
        pkt = self._transact(packet(servo_id, PING), servo_id, 14)
        if pkt is None or len(pkt.params) < 3:
            return None
        number = pkt.params[0] | (pkt.params[1] << 8)
        model = MODELS.get(number)
        self.models[servo_id] = model
        return Identity(servo_id, number, model.name if model else f"model {number}", pkt.params[2])

    def write_goals(self, goals: list[tuple[int, int]]) -> None:
        self.wire.write(sync_write(GOAL_POSITION, 4, [(i, struct.pack("<i", t)) for i, t in goals]))

    def _fast_read(self, ids: list[int]) -> dict[int, tuple[int, bytes]] | None:
        """Every servo's block in one Fast Sync Read reply; None if it did not come whole."""
        self.wire.drain()
        self.rx.clear()
        self.wire.write(sync_read(BLOCK_START, BLOCK_LEN, ids, fast=True))
        want = 8 + len(ids) * (BLOCK_LEN + 4)
        deadline = time.monotonic() + self.timeout(want, len(ids))
        while time.monotonic() < deadline:
            pkt, used = parse(self.rx, unstuffed=False)
            if pkt is not None:
                slots = parse_fast_slots(pkt, BLOCK_LEN)
                return slots if set(slots) == set(ids) else None
            del self.rx[:used]
            chunk = self.wire.read_some(want, deadline - time.monotonic())
            if not chunk:
                return None
            self.rx += chunk
        return None

    def read_present(self, ids: list[int]) -> dict[int, Reading]:
        """Sync Read (or, with `fast`, one Fast Sync Read reply; when it does not come whole, a
        Sync Read that cycle finds out which servo is missing)."""
        slots = self._fast_read(ids) if self.fast else None
        if slots is None:
            self.wire.drain()
            self.rx.clear()
            self.wire.write(sync_read(BLOCK_START, BLOCK_LEN, ids))
            slots = {i: (p.error, p.params) for i, p in self._replies(len(ids), 11 + BLOCK_LEN, ids).items()}
        out: dict[int, Reading] = {}
        alerted = []
        for i, (error, data) in slots.items():
            if len(data) != BLOCK_LEN:
                continue
            r = decode_block(data, self.models.get(i))
            r.errors = errors_of(error & 0x7F, 0)
            if error & 0x80:
                alerted.append(i)
            out[i] = r
        for i in alerted:  # read what is latched (only while something is)
            hw = self.read_byte(i, HARDWARE_ERROR)
            out[i].errors |= errors_of(0, hw) if hw else ServoError.HARDWARE
        return out

    def read_byte(self, servo_id: int, address: int) -> int | None:
        pkt = self._transact(read(servo_id, address, 1), servo_id, 12)
        return pkt.params[0] if pkt is not None and len(pkt.params) == 1 else None

    # position mode (3) honours a Homing Offset of ±1024 ticks at most (the e-manual)
    homing_limit = 1024
    homing_sign = 1     # present = actual + offset
    homing_wraps = False   # … and no more: the encoder's wrap stays where it is (ROBOTIS e-manual)
    lerobot_homing_limit = 1_044_479   # the register's range: LeRobot's Koch arms run in extended position mode
    lerobot_mirrors_on_host = False

    @classmethod
    def turn_ticks(cls, model_name: str | None) -> int | None:
        models = {m.name.lower(): m for m in MODELS.values()}
        model = models.get((model_name or "").lower())
        return model.ticks_per_rev if model else 4096   # every X-series servo: 4096

    def _read_int(self, servo_id: int, address: int) -> int | None:
        pkt = self._transact(read(servo_id, address, 4), servo_id, 15)
        return struct.unpack("<i", pkt.params)[0] if pkt is not None and len(pkt.params) == 4 else None

    def _write_int(self, servo_id: int, address: int, value: int) -> bool:
        pkt = self._transact(write(servo_id, address, struct.pack("<i", value)), servo_id, 11)
        return pkt is not None and pkt.error == 0 and self._read_int(servo_id, address) == value

    def homing_offset(self, servo_id: int) -> int | None:
        return self._read_int(servo_id, HOMING_OFFSET)

    def write_homing_offset(self, servo_id: int, ticks: int) -> bool | None:
        return self._write_int(servo_id, HOMING_OFFSET, ticks)

    def write_position_limits(self, servo_id: int, lo: int, hi: int) -> bool | None:
        return self._write_int(servo_id, MIN_POSITION, lo) and self._write_int(servo_id, MAX_POSITION, hi)

    def position_limits(self, servo_id: int) -> tuple[int, int] | None:
        lo, hi = self._read_int(servo_id, MIN_POSITION), self._read_int(servo_id, MAX_POSITION)
        return None if lo is None or hi is None else (lo, hi)

    def write_torque_limit(self, servo_id: int, fraction: float) -> bool | None:
        """PWM Limit: on every X-series servo (Current Limit is not: the XL430 has none)."""
        value = round(fraction * PWM_FULL)
        pkt = self._transact(write(servo_id, PWM_LIMIT, struct.pack("<H", value)), servo_id, 11)
        if pkt is None or pkt.error != 0:
            return False
        back = self._transact(read(servo_id, PWM_LIMIT, 2), servo_id, 13)
        return back is not None and len(back.params) == 2 and struct.unpack("<H", back.params)[0] == value

    def set_torque(self, ids: list[int], on: bool) -> None:
        self.wire.write(sync_write(TORQUE_ENABLE, 1, [(i, bytes([1 if on else 0])) for i in ids]))

    def torque_off_all(self) -> None:
        self.wire.write(write(BROADCAST, TORQUE_ENABLE, b"\x00"))

    def recover(self, servo_id: int) -> None:
        self._transact(packet(servo_id, REBOOT), servo_id, 11)

    def arm_watchdog(self, ids: list[int], timeout_s: float) -> bool:
        value = int(min(127, max(1, round(timeout_s / 0.020))))
        self.wire.write(sync_write(BUS_WATCHDOG, 1, [(i, b"\x00") for i in ids]))   # clears a tripped one
        self.wire.write(sync_write(BUS_WATCHDOG, 1, [(i, bytes([value])) for i in ids]))
        return True

    def watchdog_tripped(self, ids: list[int]) -> list[int]:
        self.wire.drain()
        self.rx.clear()
        self.wire.write(sync_read(BUS_WATCHDOG, 1, ids))
        replies = self._replies(len(ids), 12, ids)
        return [i for i, p in replies.items() if p.params[:1] == b"\xff"]   # the register reads −1

    @classmethod
    def cycle_cost(cls, n: int, fast: bool = False) -> CycleCost:
        tx = (14 + 5 * n) + (14 + n)
        if fast:
            return CycleCost(tx, 10 + n * (BLOCK_LEN + 4), n, 1, f"sync write + fast sync read of {BLOCK_LEN} bytes")
        return CycleCost(tx, n * (11 + BLOCK_LEN), n, 1, f"sync write + sync read of {BLOCK_LEN} bytes")

