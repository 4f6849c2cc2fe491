"""A chain of smart servos (or a PWM controller) as a board: `BusBoard` offers what
`firmware_protocol.link.Link` offers the runtime — STATEs in the joint frame, commands, enable,
disable, e-stop, clear fault, reconnect — and runs on the host the board state machine that our
own firmware runs (SPEC.md §4.2, §7, §9): it comes up DISABLED and never enables itself, writes
goals only while ENABLED, clamps every goal to the joint's limits and its step per command, keeps
a servo's last value (STALE) when it does not answer and faults with SERVO_BUS after a few cycles
of that, latches a servo's overload/overheat/voltage error as a fault, and faults with WATCHDOG
when commands stop coming.

It does its bus I/O inside `poll()` (one cycle: the newest goals out, every servo's state in), so
it belongs on a thread or process of its own (`hil.runtime.port_process`), never the loop's.
"""

from __future__ import annotations

import errno
import hashlib
import math
import os
import random
import termios
import threading
import time
from dataclasses import dataclass, field

import numpy as np
import serial

from firmware_protocol import messages as M
from firmware_protocol.board_behaviour import Effect, BoardRequest, clamp_target, react
from firmware_protocol.board_data import BoardInfo, StateSample
from firmware_protocol.joint_map import JointMap
from firmware_protocol.servo_mix import ServoMix
from firmware_protocol.buses import bus_class
from firmware_protocol.buses.servo_bus import (PATIENT_REPLY_S, CycleCost, Reading, ServoError, Wire, error_text,
                                               wire_time_s)
from firmware_protocol.protocol_errors import CommandRejectedError, DeviceError, HandshakeError, LinkLostError
from firmware_protocol.serial_port import open_serial

# plain ints: flag arithmetic on IntFlag members costs microseconds each, 17 joints a cycle
FAULT_OF_ERROR = tuple((int(e), int(f)) for e, f in (
    (ServoError.OVERHEAT, M.Fault.OVERTEMP), (ServoError.VOLTAGE, M.Fault.UNDERVOLT),
    (ServoError.ENCODER, M.Fault.ENCODER)))
JFLAG_OF_ERROR = tuple((int(e), int(f)) for e, f in (
    (ServoError.OVERHEAT, M.JointFlag.OVERTEMP), (ServoError.OVERLOAD, M.JointFlag.OVERLOAD),
    (ServoError.SHOCK, M.JointFlag.OVERLOAD), (ServoError.VOLTAGE, M.JointFlag.VOLTAGE),
    (ServoError.ENCODER, M.JointFlag.ENCODER)))
# errors the servo acts on by itself (cuts torque, or will): the board stops driving and faults
LATCHING = int(ServoError.OVERLOAD | ServoError.OVERHEAT | ServoError.VOLTAGE | ServoError.ENCODER
               | ServoError.SHOCK | ServoError.HARDWARE | ServoError.WATCHDOG)
STALE, TORQUE_ON = int(M.JointFlag.STALE), int(M.JointFlag.TORQUE_ON)
SERVO_BUS, WATCHDOG = int(M.Fault.SERVO_BUS), int(M.Fault.WATCHDOG)
# A servo is silent (SERVO_BUS) after `stale_cycles` cycles in a row without an answer and at
# least this long: at a fast bus rate a handful of cycles is a few tens of ms, which a host busy
# with other work (or a USB adapter's hiccup) can take from a healthy bus. The servos keep getting
# their goals meanwhile, and their own watchdog (100 ms) is the same order.
SILENT_MIN_S = 0.1


@dataclass(frozen=True)
class ServoJoint:
    """One joint on the bus: which servo, and how its ticks map to the joint's radians:
    angle = direction · (ticks − zero_tick) / ticks_per_rad."""

    name: str
    servo_id: int
    ticks_per_rad: float
    zero_tick: float
    direction: int
    min_rad: float
    max_rad: float
    model: str | None = None   # the model the servo must report (None: any)
    start_rad: float = 0.0     # open-loop servos with their pulses off: where they are taken to be
    # from a LeRobot calibration file, kept so that it exports as it came (hil.lerobot.motor_calibration):
    # the Homing Offset the servo's EEPROM holds, its drive mode and the range recorded in ticks
    homing_offset: int | None = None
    drive_mode: int | None = None
    range_min: int | None = None
    range_max: int | None = None
    torque_limit: float | None = None   # its servo's torque capped at this share of its own (written at connect)

    def ticks(self, rad: float) -> int:
        return int(round(self.zero_tick + self.direction * rad * self.ticks_per_rad))

    def rad(self, ticks: float) -> float:
        return self.direction * (ticks - self.zero_tick) / self.ticks_per_rad


@dataclass(frozen=True)
class BusConfig:
    """A robot on a bus (from a `--board-config` file; see hil/board_config.py)."""

    robot: str
    bus: str
    baud: int
    joints: tuple[ServoJoint, ...]
    echo: bool | None = None           # None: found out at connect
    reply_timeout_ms: float = 6.0
    return_delay_us: float = 0.0       # what the servos' Return Delay Time is set to
    watchdog_ms: float = 100.0         # the servos' own bus watchdog, where they have one
    command_timeout_ms: float = 100.0  # the host-side watchdog: no command for this long → FAULT
    max_step_rad: float = 0.2          # per command
    stale_cycles: int = 5              # a servo silent this many cycles in a row (and SILENT_MIN_S) → SERVO_BUS
    options: dict = field(default_factory=dict)   # the bus's own true/false keys (its ServoBus.options)
    source: str = ""
    shipped: bool = False              # one of hil's own configs: a user edits a copy, not it
    generated: bool = False            # made from the bus's usual kit for a robot none ships for
    servo: dict | None = None          # the kit's servos as a physics model ([servo] table: hil.robots.servos)
    check_servo_limits: bool = True    # at connect: the servos' own position limits hold the config's ranges
    role: str = "follower"             # "leader": an arm a hand moves, read with its torque off (hil teleop)
    # servos on a transmission's input: joint k's slot holds a servo whose angle mixes the joints
    # (firmware_protocol.servo_mix); its ServoJoint's range and ticks are the servo's own angle's
    mix: ServoMix | None = None

    @property
    def where(self) -> str:
        """Where a user fixes a setting of this config."""
        if self.shipped:
            return f"a copy of {self.source} (then pass the copy with --board-config)"
        return self.source or "the board config"

    @property
    def n(self) -> int:
        return len(self.joints)

    def uid(self) -> str:
        """A stable id for this setup (24 hex digits), to match calibration files by."""
        key = f"{self.bus}|{self.robot}|" + ",".join(f"{j.name}:{j.servo_id}" for j in self.joints)
        return hashlib.sha256(key.encode()).hexdigest()[:24].upper()

    def driver_options(self) -> dict[str, bool]:
        """The options turned on, as the keywords the bus's driver (and its cycle_cost) take."""
        names = bus_class(self.bus).options
        return {names[k]: True for k, on in self.options.items() if on}


def cycle_cost(config: BusConfig) -> CycleCost:
    """One cycle of this config's bus, as its options make it."""
    return bus_class(config.bus).cycle_cost(config.n, **config.driver_options())


ADAPTER_TURNAROUND_S = 1e-3   # a USB serial adapter's delay per round trip (an FTDI at its 1 ms latency timer)
RATE_MARGIN = 1.2             # a bus cycle's share of a loop cycle's time, inverted: the OS, the adapter
                              # or a servo late by a fifth still leaves every cycle a new state


def cycle_note(config: BusConfig) -> tuple[str, float]:
    """What one cycle costs on this bus and the loop rate it holds (its wire time and a 1 ms
    adapter per round trip, with RATE_MARGIN to spare): (sentence, Hz)."""
    cls = bus_class(config.bus)
    cost = cycle_cost(config)
    wire = wire_time_s(cost, config.baud, cls.bits_per_byte, config.return_delay_us * 1e-6)
    cycle = wire + cost.round_trips * ADAPTER_TURNAROUND_S
    rate = 1.0 / (RATE_MARGIN * cycle) if cycle > 0 else math.inf
    baud = f"{config.baud / 1e6:g} Mbaud" if config.baud >= 1_000_000 else f"{config.baud} baud"
    text = (f"{config.bus} at {baud}: {config.n} servos, {cost.how}: {cost.tx_bytes + cost.rx_bytes} bytes, "
            f"{wire * 1e3:.1f} ms on the wire")
    if config.return_delay_us:
        text += f" (return delays {cost.replies} × {config.return_delay_us:g} µs included)"
    text += f", {cost.round_trips} round trip{'s' if cost.round_trips > 1 else ''} through the adapter; "
    text += f"a loop of ≤ {rate:.0f} Hz gets a new state every cycle (a 1 ms USB adapter, a fifth to spare)"
    faster = [b for b in cls.bauds if b > config.baud]
    if config.return_delay_us or faster:
        tips = []
        if config.return_delay_us:
            tips.append("set the servos' return delay to 0")
        if faster:
            tips.append(f"{max(faster) / 1e6:g} Mbaud" if max(faster) >= 1e6 else f"{max(faster)} baud")
        text += f"; {' and '.join(tips)} for more"
    return text, rate


@dataclass
class _JointState:
    b: float = 0.0          # the servo's radians, last reading (board-frame: a joint's, unless mixed)
    v: float = 0.0
    current: float = 0.0
    temperature: float = 0.0
    stale: int = 0          # cycles in a row without an answer
    silent_since: float = 0.0   # when the first of them was asked
    errors: int = 0         # the servo's latest error flags
    torque: bool = False
    target: float | None = None   # board-frame radians last written (None: not since enable)
    flags: int = 0
    ever: bool = False


@dataclass
class BusStats:
    cycles: int = 0
    missing_replies: int = 0
    cycle_s: list = field(default_factory=list)


class BusBoard:
    """See the module docstring. Make one with `BusBoard.connect(port, config)`."""

    def __init__(self, port: str, config: BusConfig, link_timeout_s: float = M.LINK_TIMEOUT_S) -> None:
        self.port = port
        self.config = config
        self.link_timeout_s = link_timeout_s
        self.cls = bus_class(config.bus)
        self.ids = [j.servo_id for j in config.joints]
        self.info: BoardInfo | None = None
        self.joint_map = JointMap.identity(config.n)
        self.stats = BusStats()
        self.state = M.BoardState.DISABLED
        self.faults = 0
        self.notes: list[str] = []
        self._lock = threading.RLock()
        self._joints = [_JointState() for _ in config.joints]
        self._cmd: np.ndarray | None = None
        self._cmd_hold = False
        self._cmd_fresh = False
        self._cmd_seq = 0
        self._applied_seq = 0
        self._last_cmd_at = 0.0
        self._last_cycle = 0.0
        self._latest: StateSample | None = None
        self._lost: str | None = None
        self._estop_pending = False
        self._ser = None
        self.bus = None
        self._t0 = time.monotonic()
        self._seq = 0
        self._watchdog_armed = False
        self._stopped_by_watchdog: tuple[list[int], float] = ([], 0.0)   # servo ids, the host's silence (s)
        self._servo_limits: dict[int, tuple[int, int]] = {}   # each servo's own Min/Max, as read at connect

    # ------------------------------------------------------------------ opening
    @classmethod
    def connect(cls, port: str, config: BusConfig, link_timeout_s: float = M.LINK_TIMEOUT_S,
                expect_joints: int | None = None) -> "BusBoard":
        if expect_joints is not None and expect_joints != config.n:
            raise HandshakeError(errno.EPROTO, f"{config.source or 'the board config'} maps {config.n} joints, the "
                                               f"robot model has {expect_joints}")
        board = cls(port, config, link_timeout_s)
        board.open()
        return board

    def _open_port(self, baud: int):
        ser = open_serial(self.port, baud)
        # a pty (an emulator) has no parity to set; a real adapter that cannot is refused
        if self.cls.parity != serial.PARITY_NONE and not os.path.realpath(self.port).startswith("/dev/pts/"):
            try:
                ser.parity = self.cls.parity
            except (termios.error, OSError, ValueError, serial.SerialException):
                ser.close()
                raise DeviceError(errno.EINVAL, f"{self.port}: cannot set {self.cls.title}'s parity "
                                                f"({self.cls.parity}) on this adapter") from None
        if hasattr(ser, "set_low_latency_mode") and "://" not in self.port:
            try:
                ser.set_low_latency_mode(True)
            except (ValueError, OSError):
                pass
        return ser

    def _make_bus(self, ser, echo: bool):
        wire = Wire(ser, echo=echo, bits_per_byte=self.cls.bits_per_byte)
        return self.cls(wire, self.config.reply_timeout_ms * 1e-3, self.config.return_delay_us * 1e-6,
                        **self.config.driver_options())

    def _detect_echo(self, ser) -> bool:
        """Does the adapter read back what it sends? Ask the first configured servo and look at what
        comes back first: the request itself, or its answer (which ends the wait at once, so a
        plain adapter costs no time; only a silent bus waits the whole patient while)."""
        wire = self._make_bus(ser, False).wire
        frame = self.cls.ping_frame(self.ids[0])
        ser.reset_input_buffer()
        ser.write(frame)
        deadline = time.monotonic() + PATIENT_REPLY_S + wire.byte_time(len(frame))
        got = b""
        while len(got) < len(frame) and frame.startswith(got):
            chunk = wire.read_some(len(frame) - len(got), deadline - time.monotonic())
            if not chunk:
                break
            got += chunk
        return got == frame

    def open(self) -> BoardInfo:
        t0 = time.monotonic()
        self._ser = self._open_port(self.config.baud)
        try:
            echo = self.config.echo if self.config.echo is not None else self._detect_echo(self._ser)
            if self.config.echo is None and echo:
                self.notes.append(f"{self.port}: the adapter echoes what it sends; reading the echo off each request")
            self.bus = self._make_bus(self._ser, echo)
            self._check_servos()
        except BaseException:
            self._close_port()
            raise
        # whatever robot they move, servos a host drives are the protocol's SERVOS board (SPEC.md §9)
        self.info = BoardInfo(self.port, int(M.BoardKind.SERVOS), self.config.n,
                              f"{self.cls.title} (host driver)", self.config.uid(), random.getrandbits(32) | 1, 0,
                              0 if self.cls.measures_position else int(M.Capability.POSITION_ESTIMATED),
                              f"{self.config.bus} {self.config.baud}", (time.monotonic() - t0) * 1e3, None, None)
        self._lost = None
        self._cycle()
        return self.info

    def _identities(self) -> dict:
        """Who answers at each configured id: one quick pass, then the silent ones asked again with
        the connect's patience (only the first of them if nothing answered: a wrong baud rate)."""
        ids = {j.servo_id: self.bus.ping(j.servo_id) for j in self.config.joints}
        silent = [i for i, ident in ids.items() if ident is None]
        with self.bus.patient(PATIENT_REPLY_S):
            for n, i in enumerate(silent):
                ids[i] = self.bus.ping(i)
                if n == 0 and ids[i] is None and len(silent) == len(ids):
                    break
        return ids

    def _check_servos(self) -> None:
        """Every servo of the config answers, and is the model the config names; otherwise say which not, and why."""
        silent, wrong = [], []
        idents = self._identities()
        for j in self.config.joints:
            ident = idents[j.servo_id]
            if ident is None:
                silent.append(j)
            elif j.model and ident.model_name.lower() != j.model.lower() and ident.model is not None:
                wrong.append(f"{j.name} (id {j.servo_id}) is a {ident.model_name}, the config says {j.model}")
        where = self.config.where
        if wrong:
            raise HandshakeError(errno.EPROTO, f"{self.port}: {'; '.join(wrong)}. Fix `model` in {where} (or the "
                                               "servo's id, if two servos were swapped)")
        if len(silent) == len(self.config.joints):
            others = self._answers_at_other_bauds()
            hint = (f"servos answer at {others} baud: set baud = {others} in {where}" if others else
                    "check the servo power supply, the cable and the adapter, and that the servos are "
                    f"{self.cls.title} servos (`hil ports --probe {self.port}` scans every baud rate)")
            raise HandshakeError(errno.ETIMEDOUT, f"{self.port}: no servo answered at {self.config.baud} baud "
                                                  f"({self.cls.title}); {hint}")
        if silent:
            names = ", ".join(f"{j.name} (id {j.servo_id})" for j in silent)
            raise HandshakeError(errno.ETIMEDOUT, f"{self.port}: no answer from {names}. Check that servo's cable "
                                                  "and power, and its id (`hil ports --probe` lists the ids that "
                                                  f"answer); or fix servo_id in {where}")
        with self.bus.patient(PATIENT_REPLY_S):
            self._check_homing_offsets()
            if self.config.check_servo_limits:
                self._check_servo_limits()
            self._write_torque_limits()

    def _check_servo_limits(self) -> None:
        narrower = self.narrower_servo_limits()
        if narrower:
            raise HandshakeError(errno.EPROTO, f"{self.port}: {'; '.join(narrower)}. The servos would stop short of "
                                               f"goals hil sends: calibrate again (`hil calibrate --method reference "
                                               f"--bus {self.config.bus}` writes each servo's limits to its joint's "
                                               f"range), or narrow min_deg/max_deg in {self.config.where}")

    def _write_torque_limits(self) -> None:
        """Each joint's torque limit into its servo (EEPROM; the servos' torque is off at connect)."""
        failed = []
        for j in self.config.joints:
            if j.torque_limit is not None and not self._written(self.bus.write_torque_limit, j.servo_id,
                                                                 j.torque_limit):
                failed.append(f"{j.name} (id {j.servo_id})")
        if failed:
            raise HandshakeError(errno.EIO, f"{self.port}: the torque limit did not read back as written on "
                                            f"{', '.join(failed)} (EEPROM locked?): power-cycle the servos, or "
                                            f"take torque_limit_pct out of {self.config.where}")

    def _check_homing_offsets(self) -> None:
        """A config that names the Homing Offset its ticks were recorded with (a LeRobot calibration)
        matches the servos' EEPROM: with another offset every reading is shifted by the difference,
        and the robot would be driven to the wrong place."""
        wrong = []
        for j in self.config.joints:
            if j.homing_offset is None:
                continue
            held = self._register(self.bus.homing_offset, j.servo_id)
            if held is not None and held != j.homing_offset:
                off = abs(held - j.homing_offset) / j.ticks_per_rad
                wrong.append(f"{j.name} (id {j.servo_id}) holds {held}, the config says {j.homing_offset} "
                             f"(its readings would be {math.degrees(off):.1f}° off)")
        if wrong:
            raise HandshakeError(errno.EPROTO, f"{self.port}: Homing Offset: {'; '.join(wrong)}. The servos were "
                                               f"calibrated again since {self.config.where} was made: import their "
                                               "new LeRobot calibration (`hil calibrate --import-lerobot`), or "
                                               "delete homing_offset from those joints and measure their zeros with "
                                               "`hil calibrate --method reference`")

    def _answers_at_other_bauds(self) -> int | None:
        """The first other usual baud rate at which a configured servo answers (reads only)."""
        for baud in self.cls.bauds:
            if baud == self.config.baud:
                continue
            try:
                self._ser.baudrate = baud
                bus = self._make_bus(self._ser, self.bus.wire.echo)
                if any(bus.ping(i) for i in self.ids[:3]):
                    return baud
            except (OSError, ValueError, serial.SerialException):
                continue
            finally:
                try:
                    self._ser.baudrate = self.config.baud
                except (OSError, ValueError, serial.SerialException):
                    pass
        return None

    # ------------------------------------------------------------------ every cycle
    @property
    def lost(self) -> str | None:
        return self._lost

    @property
    def rejected_frames(self) -> int:
        return self.stats.missing_replies

    def fileno(self) -> int | None:
        return None   # replies are read inside poll(); nothing to select on between cycles

    def send_positions(self, q: np.ndarray, hold: bool = False) -> None:
        with self._lock:
            self._cmd = np.array(q, dtype=np.float64)
            self._cmd_hold = hold
            self._cmd_fresh = True
            self._cmd_seq = (self._cmd_seq + 1) & 0xFFFF
            self._last_cmd_at = time.monotonic()

    def poll(self) -> StateSample | None:
        """Run one bus cycle if a command is waiting (or nothing was read for 100 ms); the newest state."""
        self._check()
        now = time.monotonic()
        if self._cmd_fresh or self._estop_pending or now - self._last_cycle > 0.1:
            with self._lock:
                self._cycle()
        return self._latest

    def read_now(self) -> StateSample:
        """One bus cycle now, whatever is waiting (a goal only where one was sent and the board is
        enabled): the newest state. A leader arm, read as fast as its bus goes, is read this way."""
        self._check()
        with self._lock:
            self._cycle()
        return self._latest

    def _check(self) -> None:
        if self._lost is not None:
            raise LinkLostError(errno.EIO, f"link to {self.port} lost: {self._lost}. Check the adapter's cable; "
                                           "hil reconnects when it comes back")

    def _io(self, fn, *args):
        try:
            return fn(*args)
        except (OSError, serial.SerialException) as e:
            self._lost = f"I/O error on the servo bus: {e}"
            raise LinkLostError(errno.EIO, f"link to {self.port} lost: {self._lost}") from e

    def _cycle(self) -> None:
        now = time.monotonic()
        if self._estop_pending:
            self._estop_pending = False
            self._io(self.bus.torque_off_all)
        if self.state == M.BoardState.ENABLED and now - self._last_cmd_at > self.config.command_timeout_ms * 1e-3:
            self._fault(WATCHDOG)   # hold: goals stop; the servos keep the last one
        if self._watchdog_armed and self.state == M.BoardState.ENABLED:
            self._check_servo_watchdogs(now - self._last_cycle)
        fresh, self._cmd_fresh = self._cmd_fresh, False
        if fresh and self.state == M.BoardState.ENABLED and not self._cmd_hold and self._cmd is not None:
            b = self.joint_map.to_board(self._cmd)
            self._write_goals(b if self.config.mix is None else self.config.mix.servo_angles(b))
        readings = self._io(self.bus.read_present, self.ids)
        self._take(readings, now)
        self._last_cycle = now
        self.stats.cycles += 1

    def _check_servo_watchdogs(self, silent_s: float) -> None:
        """After a silence on the bus that may have tripped the servos' own watchdogs, ask them: a
        tripped servo refuses every goal without a reply, so the board must not look ENABLED."""
        if silent_s < 0.5 * self.config.watchdog_ms * 1e-3:
            return
        tripped = self._io(self.bus.watchdog_tripped, self.ids)
        if tripped:
            self._stopped_by_watchdog = (tripped, silent_s)
            self._fault(WATCHDOG)

    def _write_goals(self, b: np.ndarray) -> None:
        goals = []
        for k, (j, js) in enumerate(zip(self.config.joints, self._joints)):
            if not math.isfinite(b[k]):
                continue
            prev = js.target if js.target is not None else js.b
            js.target, js.flags = clamp_target(float(b[k]), prev, j.min_rad, j.max_rad, self.config.max_step_rad)
            goals.append((j.servo_id, j.ticks(js.target)))
        self._io(self.bus.write_goals, goals)
        self._applied_seq = self._cmd_seq

    def _take(self, readings: dict[int, Reading], now: float) -> None:
        latched = 0
        for j, js in zip(self.config.joints, self._joints):
            r = readings.get(j.servo_id)
            if r is None:
                if not js.stale:
                    js.silent_since = now
                js.stale += 1
                self.stats.missing_replies += 1
                if self._silent(js, now) and js.ever:
                    latched |= SERVO_BUS
                continue
            js.stale = 0
            js.ever = True
            # a PWM channel that is off outputs nothing: the estimate is where the robot rests
            js.b = j.start_rad if (r.ticks == 0 and not self.cls.measures_position) else j.rad(r.ticks)
            js.v = 0.0 if r.velocity is None else j.direction * r.velocity / j.ticks_per_rad
            js.current = r.current_mA or 0.0
            js.temperature = r.temperature_C or 0.0
            js.errors = r.errors
            if r.torque_on is not None:
                js.torque = r.torque_on
            if r.errors & LATCHING:
                latched |= SERVO_BUS
                for err, fault in FAULT_OF_ERROR:
                    if r.errors & err:
                        latched |= fault
        if latched:
            self._fault(latched)
        self._publish(now)

    def _fault(self, faults: int) -> None:
        """The command watchdog (WATCHDOG alone) or what the servos report, as the board table says."""
        if not faults & ~self.faults and self.state in (M.BoardState.FAULT, M.BoardState.ESTOP):
            return
        request = BoardRequest.WATCHDOG if faults == WATCHDOG and self.state == M.BoardState.ENABLED else BoardRequest.HW_FAULT
        self._take_reaction(react(request, self.state, self.faults, int(faults)))

    def _take_reaction(self, r) -> None:
        """The table's state and faults; its torque-off is the caller's bus write."""
        self.state, self.faults = r.state, r.faults

    def _publish(self, now: float) -> None:
        n = self.config.n
        b = np.array([js.b for js in self._joints])
        v = np.array([js.v for js in self._joints])
        if self.config.mix is not None:   # the servos' own angles, as the joints they turn
            b, v = self.config.mix.joint_angles(b), self.config.mix.joint_rates(v)
        cur = np.array([js.current for js in self._joints])
        flags = np.zeros(n)
        for k, js in enumerate(self._joints):
            f = js.flags
            if js.stale:
                f |= STALE
            if js.torque:
                f |= TORQUE_ON
            for err, jf in JFLAG_OF_ERROR:
                if js.errors & err:
                    f |= jf
            flags[k] = f
        self._seq = (self._seq + 1) & 0xFFFF
        jm = self.joint_map
        self._latest = StateSample(now, int((now - self._t0) * 1e6), self._seq, self._applied_seq, int(self.state),
                                   int(self.faults), jm.to_joint(b), jm.velocity_to_joint(v), cur, flags, 0)

    # ------------------------------------------------------------------ transactions
    def estop(self, reason: int = 0) -> None:
        """Torque off on every servo at once (or on the next cycle, if one is on the bus now); latched."""
        self._take_reaction(react(BoardRequest.ESTOP, self.state, self.faults))
        if self._lock.acquire(timeout=0.05):
            try:
                self._io(self.bus.torque_off_all)
                for js in self._joints:
                    js.torque = False
                self._publish(time.monotonic())
            finally:
                self._lock.release()
        else:
            self._estop_pending = True

    def enable(self, joint_mask: int = 0xFFFFFFFF) -> None:
        """Targets := measured, then torque on (SPEC.md ENABLE); the board table says when."""
        with self._lock:
            reaction = self._allowed(BoardRequest.ENABLE, "ENABLE")
            if not reaction.effects & Effect.SEED_TARGETS:
                return   # already enabled: nothing changes
            readings = self._io(self.bus.read_present, self.ids)
            with self.bus.patient(PATIENT_REPLY_S):
                for _ in range(2):   # a reply lost on the bus (or late) is asked again before enable gives up
                    again = [i for i in self.ids if i not in readings]
                    if not again:
                        break
                    readings.update(self._io(self.bus.read_present, again))
            missing = [f"{j.name} (id {j.servo_id})" for j in self.config.joints if j.servo_id not in readings]
            if missing:
                raise CommandRejectedError(errno.EIO, f"{self.port}: ENABLE refused: no answer from "
                                                      f"{', '.join(missing)}")
            self._refuse_outside_servo_limits(readings)
            goals = []
            for j, js in zip(self.config.joints, self._joints):
                r = readings[j.servo_id]
                js.b = j.start_rad if (r.ticks == 0 and not self.cls.measures_position) else j.rad(r.ticks)
                # where it stands, even outside its range (then the host brings it in): a goal at the
                # range's end would be driven at the servo's full speed (see clamp_target)
                js.target = js.b
                goals.append((j.servo_id, j.ticks(js.target)))
            self._io(self.bus.write_goals, goals)
            self._io(self.bus.set_torque, self.ids, True)
            for js in self._joints:
                js.torque = True
            if self.cls.has_watchdog and self.config.watchdog_ms > 0:
                self._watchdog_armed = self._io(self.bus.arm_watchdog, self.ids, self.config.watchdog_ms * 1e-3)
            self._last_cmd_at = time.monotonic()
            self._take_reaction(reaction)
            self._cycle()

    def _refuse_outside_servo_limits(self, readings: dict) -> None:
        """A servo standing outside its own Min/Max Position Limits drives itself to the nearer one
        at its full speed once its torque is on, whatever goal it is given: no ENABLE, each named."""
        out = []
        for j in self.config.joints:
            held, t = self._servo_limits.get(j.servo_id), readings[j.servo_id].ticks
            if held is not None and not held[0] - 1 <= t <= held[1] + 1:
                out.append(f"{j.name} (id {j.servo_id}) stands at tick {t}, outside its servo's own limits "
                           f"{held[0]} … {held[1]}")
        if out:
            raise CommandRejectedError(errno.ERANGE, f"{self.port}: ENABLE refused: {'; '.join(out)}. With its "
                                                     "torque on such a servo drives itself to its nearer limit at "
                                                     "full speed: move the joint inside by hand (torque off), then "
                                                     "enable")

    def _allowed(self, request: BoardRequest, name: str, bits: int = 0):
        """The table's reaction, or CommandRejectedError naming the result as a board's ACK would."""
        r = react(request, self.state, self.faults, bits)
        if not r.ok:
            raise CommandRejectedError(errno.EPERM, f"{self.port}: board refused {name}: {r.result.name} (board is "
                                                    f"{M.BoardState(self.state).name})")
        return r

    def disable(self, joint_mask: int = 0xFFFFFFFF) -> None:
        with self._lock:
            r = self._allowed(BoardRequest.DISABLE, "DISABLE")
            self._io(self.bus.set_torque, self.ids, False)   # whatever the state: torque off is always safe
            for js in self._joints:
                js.torque = False
                js.target = None
            self._take_reaction(r)
            self._cycle()

    def clear_faults(self, fault_mask: int = 0xFFFFFFFF) -> None:
        """Clear latched faults: servos that report an error are recovered (rebooted where the bus
        can), torque goes off, and the board is DISABLED — never ENABLED — once no latched fault
        (e-stop, watchdog) is left."""
        with self._lock:
            r = self._allowed(BoardRequest.CLEAR_FAULT, "CLEAR_FAULT", int(fault_mask))
            for j, js in zip(self.config.joints, self._joints):
                if js.errors:
                    self._io(self.bus.recover, j.servo_id)
                    js.errors = 0
            self._io(self.bus.set_torque, self.ids, False)
            for js in self._joints:
                js.torque = False
                js.target = None
                js.stale = 0
            self._take_reaction(r)
            if not self.faults & M.Fault.WATCHDOG:
                self._stopped_by_watchdog = ([], 0.0)
            self._cycle()

    # ------------------------------------------------------------------ for tools (calibration)
    def latest(self) -> StateSample | None:
        """The newest state without running a cycle (with `start_cycling`, a thread runs them)."""
        return self._latest

    def start_cycling(self, period_s: float = 0.005) -> None:
        """Run the bus cycles on a thread of their own, for tools that stream commands and read
        `latest()` at their own pace (the runtime calls `poll()` from its port process instead)."""
        def cycle() -> None:
            while self._ser is not None and self._lost is None:
                try:
                    self.poll()
                except (LinkLostError, DeviceError):
                    return
                time.sleep(period_s)
        self._cycler = threading.Thread(target=cycle, name=f"hil-bus {self.port}", daemon=True)
        self._cycler.start()

    def narrower_servo_limits(self) -> list[str]:
        """The joints whose servo's own Min/Max Position Limits cut into the config's range: a goal
        there would be refused or stopped by the servo while hil believes the joint gets there (one
        knee straight, the other bent, no fault). One line each; none where the servos agree."""
        with self._lock:
            out = []
            for j in self.config.joints:
                held = self._register(self.bus.position_limits, j.servo_id)
                if held is None or held[0] == held[1]:     # none, or both 0: a servo in multi-turn mode
                    continue
                self._servo_limits[j.servo_id] = held
                a, b = sorted((j.ticks(j.min_rad), j.ticks(j.max_rad)))
                if a < held[0] - 1 or b > held[1] + 1:
                    out.append(f"{j.name} (id {j.servo_id}): its servo's limits are ticks {held[0]} … {held[1]}, "
                               f"the config's range [{math.degrees(j.min_rad):.1f}, {math.degrees(j.max_rad):.1f}]° "
                               f"is ticks {a} … {b}")
            return out

    def read_homing_offsets(self) -> list[int | None]:
        """Each joint's servo's Homing Offset register (None: it has none, or it answered none of
        the patient asks)."""
        with self._lock:
            return [self._register(self.bus.homing_offset, j.servo_id) for j in self.config.joints]

    def _register(self, read, servo_id: int):
        """A register read out of the cycle (None: the servo has none, or never answered). A reading
        lost to a busy host would pass for "the servo has no such register" and change what
        calibration writes: it is asked patiently."""
        return self._patiently(read, servo_id, done=lambda value: value is not None)

    def _patiently(self, fn, *args, done, tries: int = 3):
        """fn(*args) out of the cycle: a late reply (a busy host) waited for, a lost one asked
        again, until `done(result)` or `tries` asks; the last result."""
        with self.bus.patient(PATIENT_REPLY_S):
            for _ in range(tries):
                result = self._io(fn, *args)
                if done(result):
                    break
        return result

    def write_servo_setup(self, joint: int, homing: int | None, limits: tuple[int, int] | None) -> list[str]:
        """Write a joint's servo's Homing Offset and Min/Max Position Limits (EEPROM: only with
        torque off, so never while ENABLED); the registers that did not read back as written."""
        with self._lock:
            if self.state == M.BoardState.ENABLED:
                raise CommandRejectedError(errno.EPERM, "servo EEPROM is written with torque off: disable first")
            j, failed = self.config.joints[joint], []
            if homing is not None and not self._written(self.bus.write_homing_offset, j.servo_id, homing):
                failed.append(f"Homing Offset {homing}")
            if limits is not None and not self._written(self.bus.write_position_limits, j.servo_id, *limits):
                failed.append(f"Min/Max Position Limits {limits[0]} … {limits[1]}")
            return failed

    def _written(self, write, *args) -> bool:
        """A register write that reads back as written (None: the servo has no such register),
        asked patiently."""
        ok = self._patiently(write, *args, done=lambda ok: ok is None or ok)
        return ok is None or bool(ok)

    def param_get(self, param_id: int, joint: int = 0xFF) -> int:
        """The parameters a host tool reads from a board: TARGET (the joint's current target, µrad,
        board frame)."""
        if param_id != M.Param.TARGET or not 0 <= joint < self.config.n:
            raise CommandRejectedError(errno.EPERM, f"{self.port}: PARAM_GET {param_id:#06x}: UNKNOWN_PARAM "
                                                    "(a servo bus has no such parameter)")
        js = self._joints[joint]
        return int(round((js.target if js.target is not None else js.b) * 1e6))

    def _silent(self, js: _JointState, now: float) -> bool:
        return js.stale >= self.config.stale_cycles and now - js.silent_since >= SILENT_MIN_S

    def describe_faults(self) -> str:
        """Which joints are at fault and what to do, one clause per joint."""
        parts = []
        now = time.monotonic()
        for j, js in zip(self.config.joints, self._joints):
            if self._silent(js, now):
                parts.append(f"{j.name} (id {j.servo_id}): no answer for {js.stale} cycles "
                             f"({(now - js.silent_since) * 1e3:.0f} ms) — check its cable and power; clear the fault "
                             "once it answers")
            elif js.errors:
                parts.append(f"{j.name} (id {j.servo_id}): {error_text(js.errors)}")
        ids, silent_s = self._stopped_by_watchdog
        if ids and self.faults & M.Fault.WATCHDOG:
            names = ", ".join(f"{j.name} (id {j.servo_id})" for j in self.config.joints if j.servo_id in ids)
            parts.append(f"{names}: stopped by their own bus watchdog (nothing on the bus for {silent_s * 1e3:.0f} ms: "
                         "the host stalled); they refuse goals until the fault is cleared")
        elif self.faults & M.Fault.WATCHDOG:
            parts.append(f"no command for {self.config.command_timeout_ms:g} ms (the host stalled): the servos hold "
                         "their last goal")
        return "; ".join(parts)

    def round_trips_ms(self, count: int = 5) -> list[float]:
        """`count` full bus cycles (the goals, if enabled, and every servo's state), each timed."""
        out = []
        with self._lock:
            for _ in range(count):
                t = time.perf_counter()
                self._cycle()
                out.append((time.perf_counter() - t) * 1e3)
        return out

    def reconnect(self, candidates=None, timeout_s: float = 5.0) -> BoardInfo:
        """Reopen the port and find every servo again; the board comes back DISABLED."""
        self._close_port()
        deadline = time.monotonic() + timeout_s
        last = None
        while time.monotonic() < deadline:
            try:
                with self._lock:
                    self.state = M.BoardState.DISABLED
                    self.faults = 0
                    self._cmd_fresh = False
                    for js in self._joints:
                        js.target, js.stale, js.errors = None, 0, 0
                    return self.open()
            except (DeviceError, OSError) as e:
                last = e
                time.sleep(0.2)
        raise LinkLostError(errno.EIO, f"{self.port}: the servo bus did not come back within {timeout_s:.0f} s "
                                       f"({last})")

    def _close_port(self) -> None:
        if self._ser is not None:
            try:
                self._ser.close()
            except (OSError, serial.SerialException):
                pass
            self._ser = None

    def close(self) -> None:
        """Close the port. The servos keep their state (their bus watchdog, where armed, stops them)."""
        with self._lock:
            self._close_port()
            if self._lost is None:
                self._lost = "closed"
        cycler = getattr(self, "_cycler", None)
        if cycler is not None and cycler is not threading.current_thread():
            cycler.join(timeout=1.0)

    def __enter__(self) -> "BusBoard":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

