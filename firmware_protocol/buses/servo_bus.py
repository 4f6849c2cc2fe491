"""The one interface every servo bus implements (`ServoBus`), and the half-duplex wire under it.

A `ServoBus` speaks one vendor's protocol to the servos on one port, in the servos' own units
(ticks): group writes of goal positions, a read of every servo's present state, torque on and
off, and recovery from a latched servo error. What it means for the robot (joint angles, limits,
the board state machine) is `board.BusBoard`'s business, the same for every bus.
"""

from __future__ import annotations

import contextlib
import select
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from enum import IntFlag
from typing import ClassVar

import serial


class ServoError(IntFlag):
    """What a servo says is wrong with it, the same for every bus."""

    VOLTAGE = 1 << 0
    OVERHEAT = 1 << 1
    OVERLOAD = 1 << 2
    ENCODER = 1 << 3
    ANGLE = 1 << 4        # a goal outside the servo's own angle limits
    SHOCK = 1 << 5        # electrical shock / over-current
    INSTRUCTION = 1 << 6  # the servo refused the packet (range, checksum, access, …)
    WATCHDOG = 1 << 7     # the servo's own bus watchdog tripped
    HARDWARE = 1 << 8     # a hardware error is latched, but which could not be read


ERROR_ADVICE = {
    ServoError.VOLTAGE: "supply voltage out of the servo's range: check the power supply (a 12 V supply on 7.4 V servos?)",
    ServoError.OVERHEAT: "overheated: let it cool, and lighten its load",
    ServoError.OVERLOAD: "overload shutdown (the servo cut its torque): free the joint, then clear the fault",
    ServoError.ENCODER: "its position sensor failed: the servo needs service",
    ServoError.ANGLE: "a goal outside the servo's own angle limits: check min/max in the board config",
    ServoError.SHOCK: "electrical shock or over-current: check its wiring",
    ServoError.INSTRUCTION: "it refused a packet (range, checksum or access error)",
    ServoError.WATCHDOG: "its bus watchdog tripped (no command for too long): clear the fault",
    ServoError.HARDWARE: "it reports a latched hardware error: clear the fault (reboots it)",
}


def error_text(errors: int) -> str:
    return "; ".join(text for flag, text in ERROR_ADVICE.items() if errors & flag) or "no error"


@dataclass
class Reading:
    """One servo's present state in its own units; None: this bus (or model) does not report it."""

    ticks: int
    velocity: float | None = None      # ticks per second
    current_mA: float | None = None
    temperature_C: float | None = None
    voltage_V: float | None = None
    torque_on: bool | None = None
    errors: int = 0                    # ServoError flags


@dataclass(frozen=True)
class Identity:
    """What a servo says it is when pinged."""

    servo_id: int
    model: int | None
    model_name: str
    firmware: int | None = None


@dataclass(frozen=True)
class UsualKit:
    """The servos a kit on a bus usually has: what a robot with no servo map shipped for that bus
    gets (`hil.board_config.generated`, `hil robots --robot R --bus B`), so that a new bus needs no
    template file. The shipped kit files of that bus agree with it (tests/unit/test_board_config.py)."""

    model: str | None       # the model its servos report (None: a bus with no model to check)
    ticks_per_rad: float
    zero_tick: float        # the tick at joint angle 0: the middle of the servo's travel
    first_id: int           # the first servo id, counted up in the robot's joint order
    servo_preset: str       # its servos as a physics model (hil.robots.servos presets)


# How long a reply is waited for where a late one costs only time (connect, enable, a port probe's
# echo test): a reply late by a starved host or an adapter's latency timer is still an answer there,
# where in a bus cycle it is a lost one.
PATIENT_REPLY_S = 0.25


class Wire:
    """A serial port as a half-duplex bus: every write is read back first when the adapter echoes
    (`echo`), and reads wait for exactly the bytes asked for, up to a deadline."""

    def __init__(self, ser: serial.SerialBase, echo: bool = False, bits_per_byte: int = 10) -> None:
        self.ser = ser
        try:  # reads wait in select(): setting pyserial's timeout per read would reprogram the port each time
            self.fd = ser.fileno()
            ser.timeout = 0
        except (AttributeError, OSError, serial.SerialException):
            self.fd = None
        self.echo = echo
        self.bits_per_byte = bits_per_byte
        self.tx_bytes = 0
        self.rx_bytes = 0
        self.last_tx = 0
        self.echo_errors = 0

    @property
    def baud(self) -> int:
        return int(self.ser.baudrate)

    def byte_time(self, n: int) -> float:
        """Seconds `n` bytes take on the wire."""
        return n * self.bits_per_byte / self.baud

    def drain(self) -> None:
        """Forget whatever is waiting: the answer to a request we gave up on must not be taken for the next."""
        self.ser.reset_input_buffer()

    def write(self, data: bytes) -> None:
        self.ser.write(data)
        self.tx_bytes += len(data)
        self.last_tx = len(data)
        if self.echo:
            back = self.read(len(data), 0.005 + 2 * self.byte_time(len(data)))
            if back != data:
                self.echo_errors += 1
                self.drain()

    def read_some(self, most: int, timeout_s: float) -> bytes:
        """Whatever has arrived (up to `most` bytes), waiting at most `timeout_s` for the first."""
        if self.fd is None:   # a pyserial URL: no descriptor to wait on
            first = self.read(1, timeout_s)
            rest = self.ser.read(min(most - 1, self.ser.in_waiting)) if first else b""
            self.rx_bytes += len(rest)
            return first + rest
        if not select.select([self.fd], [], [], max(0.0, timeout_s))[0]:
            return b""
        data = self.ser.read(min(most, max(1, self.ser.in_waiting)))
        self.rx_bytes += len(data)
        return data

    def read(self, n: int, timeout_s: float) -> bytes:
        """Up to `n` bytes, waiting at most `timeout_s` for all of them."""
        out = bytearray()
        deadline = time.monotonic() + timeout_s
        while len(out) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if self.fd is None:
                self.ser.timeout = left
            elif not select.select([self.fd], [], [], left)[0]:
                break
            chunk = self.ser.read(n - len(out))
            if not chunk and self.fd is None:
                break
            out += chunk
        self.rx_bytes += len(out)
        return bytes(out)


@dataclass(frozen=True)
class CycleCost:
    """One bus cycle for N servos: bytes each way, replies (each waits its return delay) and round
    trips through the adapter (each costs a USB latency on a real adapter)."""

    tx_bytes: int
    rx_bytes: int
    replies: int
    round_trips: int
    how: str


class ServoBus(ABC):
    """One vendor protocol over one `Wire`. Ticks and servo ids only; no robot."""

    kind: ClassVar[str]
    title: ClassVar[str]
    bauds: ClassVar[tuple[int, ...]]            # the rates its servos can be set to, usual first
    default_baud: ClassVar[int]
    parity: ClassVar[str] = serial.PARITY_NONE
    bits_per_byte: ClassVar[int] = 10
    measures_position: ClassVar[bool] = True    # False: "present" is the commanded pulse (open loop)
    goal_range: ClassVar[tuple[int, int] | None] = None   # the ticks a goal can take at all (None: any)
    usual: ClassVar[UsualKit]                   # the kit a robot without a servo map gets
    # this bus's own true/false keys in a board config → the keyword its driver and cycle_cost take
    options: ClassVar[dict[str, str]] = {}
    has_watchdog: ClassVar[bool] = False        # the servos stop by themselves when the host goes quiet
    default_echo: ClassVar[bool] = False
    max_id: ClassVar[int] = 253

    def __init__(self, wire: Wire, reply_timeout_s: float = 0.006, return_delay_s: float = 0.0) -> None:
        self.wire = wire
        self.reply_timeout_s = reply_timeout_s
        self.return_delay_s = return_delay_s
        self.rx = bytearray()   # bytes read but not yet parsed

    def collect(self, parse, ids: list[int], each_len: int, is_reply=lambda pkt: True) -> dict:
        """The replies (packets with a `servo_id`) of `ids`, each about `each_len` bytes on the wire,
        parsed with `parse(buf) -> (packet | None, bytes to drop)`, until all are in or the wait is over."""
        out: dict = {}
        want = set(ids)
        deadline = time.monotonic() + self.timeout(len(ids) * each_len, len(ids))
        while want and time.monotonic() < deadline:
            pkt, used = parse(self.rx)
            del self.rx[:used]
            if pkt is None:
                chunk = self.wire.read_some(len(want) * each_len, deadline - time.monotonic())
                if not chunk:
                    break
                self.rx += chunk
            elif pkt.servo_id in want and is_reply(pkt):
                out[pkt.servo_id] = pkt
                want.discard(pkt.servo_id)
        return out

    @contextlib.contextmanager
    def patient(self, reply_timeout_s: float):
        """Replies waited for up to `reply_timeout_s` inside the block: at connect a late answer (a busy
        host, an adapter's latency timer) is still an answer, where in a cycle it is a lost one."""
        saved = self.reply_timeout_s
        self.reply_timeout_s = max(saved, reply_timeout_s)
        try:
            yield
        finally:
            self.reply_timeout_s = saved

    def timeout(self, reply_bytes: int, replies: int = 1) -> float:
        """How long to wait for `replies` answers of `reply_bytes` in all, counted from the end of
        the last write's call (its bytes may still be on their way out)."""
        return (self.reply_timeout_s + self.wire.byte_time(self.wire.last_tx + reply_bytes)
                + replies * self.return_delay_s)

    @classmethod
    @abstractmethod
    def ping_frame(cls, servo_id: int) -> bytes:
        """The request `ping` sends first (also what an echoing adapter reads back)."""

    @abstractmethod
    def ping(self, servo_id: int) -> Identity | None:
        """Who answers at `servo_id` (None: nobody). Reads only."""

    @abstractmethod
    def write_goals(self, goals: list[tuple[int, int]]) -> None:
        """Goal positions (servo id, ticks), with the bus's group write where it has one."""

    @abstractmethod
    def read_present(self, ids: list[int]) -> dict[int, Reading]:
        """Every servo's present state; a servo that did not answer is missing from the result."""

    @abstractmethod
    def set_torque(self, ids: list[int], on: bool) -> None: ...

    @abstractmethod
    def torque_off_all(self) -> None:
        """Torque off on every servo at once (broadcast where the bus has it): the e-stop."""

    def recover(self, servo_id: int) -> None:
        """Clear a latched servo error (a reboot where the bus has one)."""

    def homing_offset(self, servo_id: int) -> int | None:
        """The Homing Offset the servo's EEPROM holds, in ticks (the servo reports its positions
        shifted by it); None where the servo has none or did not answer."""
        return None

    # What a servo with an absolute encoder can be set to in the position mode hil uses: positions
    # read 0 … turn − 1 and wrap there; a Homing Offset (within ±homing_limit) shifts them by
    # homing_sign · offset — and where `homing_wraps`, the servo wraps the shifted reading into
    # 0 … turn − 1 (Feetech STS: the offset moves where the readings wrap), else the reading is the
    # encoder's plus the offset, wrapping where the encoder does (Dynamixel: Present Position =
    # actual + Homing Offset, so no offset moves a joint's range off the encoder's wrap); Min/Max
    # Position Limits stop goals outside a range.
    homing_limit: ClassVar[int | None] = None
    homing_wraps: ClassVar[bool] = True
    has_torque_limit: ClassVar[bool] = False   # write_torque_limit does something on this bus
    homing_sign: ClassVar[int] = 1
    # LeRobot's calibration files (hil.lerobot.motor_calibration): the homing offsets its files may hold
    # for this bus (None: LeRobot does not drive it), and whether it mirrors a drive_mode 1 motor on
    # the host (else the servo's own Drive Mode register does)
    lerobot_homing_limit: ClassVar[int | None] = None
    lerobot_mirrors_on_host: ClassVar[bool] = False

    @classmethod
    def turn_ticks(cls, model_name: str | None) -> int | None:
        """Ticks in one turn where a servo model's readings wrap (None: they never do: a servo with
        a dead band or an end stop before a whole turn)."""
        return None

    def write_homing_offset(self, servo_id: int, ticks: int) -> bool | None:
        """Write the Homing Offset (torque off: it is in EEPROM); True when it reads back as written,
        None where the servo has none."""
        return None

    def write_position_limits(self, servo_id: int, lo: int, hi: int) -> bool | None:
        """Write the Min/Max Position Limits (torque off); True when they read back as written,
        None where the servo has none."""
        return None

    def position_limits(self, servo_id: int) -> tuple[int, int] | None:
        """The servo's Min/Max Position Limits (ticks), or None where it has none (or did not answer)."""
        return None

    def write_torque_limit(self, servo_id: int, fraction: float) -> bool | None:
        """Cap the servo's torque at `fraction` (0 … 1) of its own maximum (EEPROM: torque off); True
        when it reads back as written, None where hil sets none on this bus or this servo."""
        return None

    def arm_watchdog(self, ids: list[int], timeout_s: float) -> bool:
        """Make the servos stop by themselves after `timeout_s` without a command; False: cannot."""
        return False

    def watchdog_tripped(self, ids: list[int]) -> list[int]:
        """The servos among `ids` whose own watchdog has stopped them (and now refuse goals)."""
        return []

    @classmethod
    @abstractmethod
    def cycle_cost(cls, n: int, **options: bool) -> CycleCost:
        """Bytes and replies of one write-all + read-all cycle for `n` servos (with `options`, the
        keywords of `ServoBus.options` that a config turns on)."""


def wire_time_s(cost: CycleCost, baud: int, bits_per_byte: int, return_delay_s: float) -> float:
    """Seconds one cycle spends on the wire, return delays included (no adapter latency)."""
    return (cost.tx_bytes + cost.rx_bytes) * bits_per_byte / baud + cost.replies * return_delay_s
