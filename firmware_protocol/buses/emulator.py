"""Byte-level emulators of the servo buses on a pseudo-terminal: `python -m
firmware_protocol.buses.emulator --bus KIND --servos JSON`.

Each emulated servo has its vendor's control table (or command set), a motor that moves toward its
goal at a limited speed while torque is on, a return delay before each reply, and faults to
inject. Replies are paced at the baud rate; `--echo` reads every request back first, as Kondo's
adapters and one-wire buses do. PWM controllers are open loop: they report the pulse they output.
The pty cannot carry parity: ICS's 8E1 framing is not modelled, only its timing (11 bits a byte).
"""

from __future__ import annotations

import argparse
import fcntl
import gc
import json
import math
import os
import select
import signal
import stat
import struct
import sys
import time
from dataclasses import dataclass, field

from firmware_protocol.buses import BUSES, bus_class, control_tables, dynamixel1, dynamixel2, feetech, kondo_ics, pwm
from firmware_protocol.buses.control_tables import ServoModel
from firmware_protocol.pty_host import close_pty, exit_with_parent, open_pty, stopped_code


@dataclass
class SimServo:
    """One servo: its motor, its registers' meaning, its latched errors."""

    servo_id: int
    model: int
    position: float            # ticks (true, for servos with feedback)
    goal: float
    vmax: float                # ticks per second
    lo: int = -(1 << 30)
    hi: int = 1 << 30
    torque: bool = False
    hw_error: int = 0          # latched (Dynamixel 2.0 bits: 0 voltage, 2 heat, 5 overload)
    silent_from: float | None = None
    watchdog_ticks: int = 0    # Dynamixel 2.0 Bus Watchdog, × 20 ms
    watchdog_tripped: bool = False
    quiet_s: float = 0.0       # bus time without an instruction for this servo (the watchdog's count)
    velocity: float = 0.0
    temperature: float = 31.0
    voltage: float = 7.4
    current_mA: float = 0.0    # what it reports as its current (a plant behind it sets it)
    homing_offset: int = 0     # what its Homing Offset register holds (ticks)
    blocked: bool = False      # its horn meets something it cannot move (fault `blocked`)
    stall_mA: float = 1400.0   # its current at full torque
    torque_share: float = 1.0  # its torque limit register, as a share of its full torque
    heard_once: bool = False   # the host has spoken to it
    encoder: float | None = None   # powered up with its shaft here (encoder ticks; None: `position` is its reading)
    profile_vmax: float | None = None   # a speed the host capped it at (Dynamixel's Profile Velocity), ticks/s
    baud: float = 0.0          # the rate it listens at (0: whatever the host sets)

    def hears(self, host_rate: float | None) -> bool:
        """Whether bytes sent at `host_rate` reach it (a servo set to another rate hears noise)."""
        return not self.baud or host_rate is None or abs(host_rate - self.baud) <= 0.03 * self.baud

    def heard(self) -> None:
        self.quiet_s = 0.0
        self.heard_once = True

    def goal_ticks(self) -> float:
        """The goal it drives to: inside its own position limits."""
        return min(self.hi, max(self.lo, self.goal))

    def watch(self, dt: float) -> None:
        """Its bus watchdog's count. A real servo's MCU watches the bus without pause; the
        emulator's own stalls on a busy host (the select wakes every 2 ms) are not the host's
        silence, so a step counts at most 10 ms."""
        self.quiet_s += min(dt, 0.010)
        if self.torque and self.watchdog_ticks and self.quiet_s > self.watchdog_ticks * 0.02:
            self.watchdog_tripped = True

    def step(self, dt: float) -> None:
        """The kinematic motor: toward the goal at vmax while torque is on."""
        self.watch(dt)
        if not self.torque or self.hw_error:
            self.velocity = 0.0
            self.current_mA = 0.0 if self.blocked else self.current_mA
            return
        err = self.goal_ticks() - self.position
        if self.blocked:   # it pushes as a position servo does, up to its stall current, and stays put
            self.velocity = 0.0
            most = self.stall_mA * self.torque_share
            self.current_mA = max(-most, min(most, self.stall_mA * err / BLOCKED_FULL_TICKS))
            return
        vmax = self.vmax if self.profile_vmax is None else min(self.vmax, self.profile_vmax)
        move = max(-vmax * dt, min(vmax * dt, err))
        self.position += move
        self.velocity = move / dt if dt > 0 else 0.0
        # what the motor draws to turn at that speed (its friction and back-EMF, no load: a
        # kinematic motor), signed with the motion: what Present Current / Present Load report
        self.current_mA = math.copysign(self.stall_mA * MOTION_CURRENT * abs(self.velocity) / max(self.vmax, 1e-9),
                                        move) if move else 0.0


MOTION_CURRENT = 0.2   # the share of its stall current a free servo draws at full speed

# a blocked servo reaches its stall current 57 ticks (5°) short of its goal, as a kid-size servo's
# stiffness (about 20 N·m/rad at 1.5 N·m, docs/physics.md) puts it
BLOCKED_FULL_TICKS = 57.0


@dataclass
class InjectedFault:
    kind: str                  # silent, overload, overheat, voltage, disconnect, blocked
    servo_id: int | None
    at: float
    until: float | None = None  # silent: answers again from here


def parse_faults(specs: list[str]) -> list[InjectedFault]:
    """silent:ID[@T[-T2]] overload:ID@T overheat:ID@T voltage:ID@T blocked:ID@T disconnect@T (T:
    seconds after start; a silent servo answers again from T2)."""
    out = []
    for spec in specs:
        head, _, at = spec.partition("@")
        kind, _, sid = head.partition(":")
        if kind not in ("silent", "overload", "overheat", "voltage", "blocked", "disconnect"):
            raise SystemExit(f"emulator: --fault {spec!r}: kinds are silent:ID[@T], overload:ID@T, overheat:ID@T, "
                             "voltage:ID@T, blocked:ID@T, disconnect@T")
        start, _, end = at.partition("-")
        try:
            t = float(start) if start else 0.0
            until = float(end) if end else None
            servo = int(sid) if sid else None
        except ValueError:
            raise SystemExit(f"emulator: --fault {spec!r}: ID is a servo id, T seconds") from None
        if until is not None and (kind != "silent" or not t < until < 1e7):
            raise SystemExit(f"emulator: --fault {spec!r}: only silent takes an end (silent:ID@T-T2, T < T2)")
        if (servo is None) != (kind == "disconnect") or not 0 <= t < 1e7:
            raise SystemExit(f"emulator: --fault {spec!r}: {kind} needs " + ("no id" if kind == "disconnect" else
                                                                              "a servo id (kind:ID@T)"))
        out.append(InjectedFault(kind, servo, t, until))
    return out


@dataclass
class Hand:
    """A hand moving a servo's horn while its torque is off, as a user does to show a joint's
    direction or record its range (`hil calibrate --method directions|range`): from where the horn
    stands to tick `a`, then to `b`, between `t0` and `t1` seconds after the host first spoke to the
    servo; with `repeat`, back to the start and round again every t1 − t0. Ticks may lie past the
    encoder's wrap, as a horn's travel may."""

    servo_id: int
    a: float
    b: float
    t0: float
    t1: float
    repeat: bool = False
    start: float | None = None
    t_heard: float | None = None

    # a hand rests this share of the way's time at A and at B each, as one pushing a joint to its
    # stop does (a host reading the servo a few times a second still sees the end)
    REST_SHARE = 0.05

    def move(self, s: SimServo, now: float) -> None:
        if self.t_heard is None:
            if s.heard_once:
                self.t_heard = now
            return
        t = now - self.t_heard - self.t0
        if s.torque or t < 0 or (t > self.t1 - self.t0 and not self.repeat):
            return
        if self.start is None:
            self.start = s.position
        stops = (self.start, self.a, self.b) + ((self.start,) if self.repeat else ())
        legs = [abs(q - p) for p, q in zip(stops, stops[1:])]
        rest = self.REST_SHARE * sum(legs)   # a rest, as the distance covered in its time
        # one speed along the whole way, a rest at A and at B (after the first and second legs)
        d = (t % (self.t1 - self.t0)) / (self.t1 - self.t0) * (sum(legs) + 2 * rest)
        for k, (p, q, length) in enumerate(zip(stops, stops[1:], legs)):
            if d <= length:
                s.position = p + (q - p) * (d / length if length else 1.0)
                return
            d -= length
            if k < 2:
                if d <= rest:
                    s.position = q
                    return
                d -= rest
        s.position = stops[-1]


def parse_hands(specs: list[str]) -> list[Hand]:
    """ID:A:B@T0-T1[*] (see Hand; * repeats)."""
    out = []
    for spec in specs:
        head, _, at = spec.partition("@")
        repeat = at.endswith("*")
        try:
            sid, a, b = head.split(":")
            t0, t1 = (float(x) for x in at.removesuffix("*").split("-"))
            hand = Hand(int(sid), float(a), float(b), t0, t1, repeat)
        except ValueError:
            raise SystemExit(f"emulator: --hand {spec!r}: ID:A:B@T0-T1[*] (a servo id, ticks A and B, seconds "
                             "T0 < T1 after the host first spoke to it; * repeats)") from None
        if not (0 <= hand.t0 < hand.t1 < 1e7 and all(abs(x) < 1e7 for x in (hand.a, hand.b))):
            raise SystemExit(f"emulator: --hand {spec!r}: T0 < T1, and ticks of a sensible size")
        out.append(hand)
    return out


# --------------------------------------------------------------------- register-based servos
@dataclass(frozen=True)
class Family:
    """What a servo family's registers mean to the emulated motor (names in control_tables), and
    the family's own rules: EEPROM writes refused with the torque on (Dynamixel X) or kept only while
    Lock is 0 (Feetech), how a Homing Offset shifts the readings (`ServoBus.homing_sign/_wraps`), and
    the status error bits an access or range error sets."""

    kind: str
    velocity: str = "Present_Velocity"
    voltage: str = "Present_Input_Voltage"
    current: str | None = "Present_Current"
    load: str | None = None                 # Present_Load (0.1 % of full torque)
    homing: str | None = "Homing_Offset"
    torque_cap: str | None = None           # the host's torque cap, and the EEPROM register it starts from
    torque_cap_eeprom: str | None = None
    hw_error: str | None = None             # Dynamixel X: Hardware Error Status
    status: str | None = None               # Feetech: the error flags as a register
    lock: str | None = None                 # Feetech: EEPROM writes kept only while it holds 0
    eeprom_needs_torque_off: bool = False
    access_error: int = 0                   # the status error for a refused write (0: ignored, no error)
    range_error: int = 0
    modes: bool = False                     # Operating Mode and Drive Mode (Dynamixel X)


FAMILIES = {
    "dynamixel2": Family("dynamixel2", hw_error="Hardware_Error_Status", torque_cap="PWM_Limit",
                         eeprom_needs_torque_off=True, access_error=7, range_error=4, modes=True),
    "dynamixel1": Family("dynamixel1", velocity="Present_Speed", voltage="Present_Voltage", current=None,
                         load="Present_Load", homing=None, torque_cap="Torque_Limit", torque_cap_eeprom="Max_Torque",
                         access_error=0x08, range_error=0x08),
    "feetech": Family("feetech", voltage="Present_Voltage", load="Present_Load", torque_cap="Torque_Limit",
                      torque_cap_eeprom="Max_Torque_Limit", status="Status", lock="Lock"),
}


class RegisterServo:
    """A SimServo behind its model's control table (control_tables): reads see the present values,
    writes drive the motor, as the servo does — factory values where the host has set nothing,
    read-only registers and EEPROM kept as the family keeps them, positions through the Homing
    Offset, the Drive Mode and the Operating Mode as the maker documents them."""

    def __init__(self, sim: SimServo, model: ServoModel, eeprom: "Eeprom | None" = None,
                 factory: bool = False) -> None:
        self.sim, self.m = sim, model
        self.f = FAMILIES[model.bus]
        self.t = model.table
        self.big_endian = model.big_endian
        self.eeprom = eeprom
        self.mem = bytearray(model.table_size)
        for name, reg in self.t.items():
            self.mem[reg.address:reg.address + reg.size] = reg.encode(model.factory(name), self.big_endian)
        self._put("Model_Number", model.number)
        self._put("ID", sim.servo_id)
        self.eeprom_end = min(r.address for r in self.t.values() if not r.eeprom)
        self.turn = model.ticks_per_rev if model.wraps else None
        self.has_homing = self.f.homing is not None and self.f.homing in self.t
        if not factory:   # as the kit is set up (hil's dry runs): its config's offset, limits and delay
            if self.has_homing:
                self._put(self.f.homing, sim.homing_offset)
            for name, value in (("Min_Position_Limit", sim.lo), ("Max_Position_Limit", sim.hi)):
                if name in self.t and self.turn:
                    self._put(name, min(max(value, 0), self.turn - 1))
            self._put("Return_Delay_Time", 0)
        self._power_up()

    # ------------------------------------------------------------- the registers
    def _put(self, name: str, value: int) -> None:
        reg = self.t[name]
        self.mem[reg.address:reg.address + reg.size] = reg.encode(int(value), self.big_endian)

    def _get(self, name: str) -> int:
        reg = self.t[name]
        return reg.decode(bytes(self.mem[reg.address:reg.address + reg.size]), self.big_endian)

    def _has(self, name: str | None) -> bool:
        return name is not None and name in self.t

    @property
    def return_delay_s(self) -> float:
        """How long it waits before it answers: Return Delay Time × 2 µs."""
        return self._get("Return_Delay_Time") * 2e-6

    def _homing(self) -> int:
        return self._get(self.f.homing) if self.has_homing else 0

    def _reversed(self) -> bool:
        return self.f.modes and bool(self._get("Drive_Mode") & 1)

    def _mode(self) -> int:
        return self._get("Operating_Mode") if self.f.modes else 3

    # ------------------------------------------------------------- power-up
    def _power_up(self) -> None:
        """What the servo holds and reads at power-up: its EEPROM as it was last written (where the
        emulator keeps one, --eeprom), its torque cap from its EEPROM's, its position read through
        its Homing Offset."""
        s = self.sim
        saved = self.eeprom.load(self.m.bus, s.servo_id) if self.eeprom is not None else None
        if saved is not None and len(saved) == self.eeprom_end:
            model, sid = self._get("Model_Number"), self._get("ID")
            self.mem[:self.eeprom_end] = saved
            self._put("Model_Number", model)
            self._put("ID", sid)
            if self.has_homing:
                s.homing_offset = self._homing()
        if self._has(self.f.torque_cap_eeprom) and self._has(self.f.torque_cap):
            self._put(self.f.torque_cap, self._get(self.f.torque_cap_eeprom))
        self._limits_changed()
        if self.turn:   # an absolute encoder reads where it stands within one turn
            if s.encoder is not None:   # powered up with its shaft here: read through its offset
                s.position = s.encoder + (self._homing_sign() * s.homing_offset if self.has_homing else 0)
            self._wrap()
        s.goal = s.position
        self._put("Goal_Position", int(round(s.goal)))

    def _homing_sign(self) -> int:
        return bus_class(self.m.bus).homing_sign

    def _wrap(self) -> None:
        """The reading brought into the turn the servo reports: 0 … turn − 1 where it wraps its
        offset readings (Feetech), else the encoder's turn shifted by the offset (Dynamixel:
        encoder + offset); not at all in extended position mode (multi-turn)."""
        s = self.sim
        if not self.turn or self._mode() in (4, 5):
            return
        if bus_class(self.m.bus).homing_wraps or not self.has_homing:
            s.position %= self.turn
            return
        shift = self._homing_sign() * self._homing()
        s.position = shift + (s.position - shift) % self.turn

    def _reading(self) -> int:
        """What Present Position holds (see `_wrap`)."""
        pos = int(round(self.sim.position))
        if not self.turn or self._mode() in (4, 5):
            return pos
        if bus_class(self.m.bus).homing_wraps or not self.has_homing:
            return pos % self.turn
        shift = self._homing_sign() * self._homing()
        return shift + (pos - shift) % self.turn

    # ------------------------------------------------------------- reads
    def refresh(self) -> None:
        s, f = self.sim, self.f
        self._put("Present_Position", self._reading())
        self._put(f.velocity, int(round(s.velocity / self._velocity_unit())))
        self._put(f.voltage, int(round(s.voltage * 10)))
        if self._has(f.current) and self.m.current_unit_mA:
            self._put(f.current, int(round(s.current_mA / self.m.current_unit_mA)))
        load = int(round(1000.0 * s.current_mA / max(s.stall_mA, 1e-9)))
        if self._has(f.load):
            self._put(f.load, max(-1023, min(1023, load)))
        elif self._has(f.current) and self.m.current_unit_mA is None:   # XL430: register 126 is load
            self._put(f.current, max(-1000, min(1000, load)))
        self._put("Present_Temperature", int(s.temperature))
        self._put("Torque_Enable", 1 if s.torque else 0)
        if self._has("Moving"):
            self._put("Moving", 1 if s.torque and (abs(s.velocity) > 0.5 or abs(s.goal_ticks() - s.position) > 1.0)
                      else 0)
        if self._has(f.hw_error):
            self._put(f.hw_error, s.hw_error)
        if self._has("Bus_Watchdog"):
            self.mem[self.t["Bus_Watchdog"].address] = 0xFF if s.watchdog_tripped else s.watchdog_ticks
        if self._has(f.status):
            self._put(f.status, _status_flags(s.hw_error))

    def _velocity_unit(self) -> float:
        """Ticks per second in one unit of Present Velocity."""
        return self.m.velocity_unit_rpm / 60.0 * self.m.ticks_per_rev

    def read(self, addr: int, size: int) -> bytes | None:
        if addr + size > len(self.mem) or size < 1:
            return None
        self.refresh()
        return bytes(self.mem[addr:addr + size])

    # ------------------------------------------------------------- writes
    def _touched(self, name: str | None, addr: int, size: int) -> bool:
        if name is None or name not in self.t:
            return False
        reg = self.t[name]
        return addr < reg.address + reg.size and reg.address < addr + size

    def write(self, addr: int, data: bytes) -> str | None:
        """Apply a write; an error name ('access', 'range') if refused (a family that refuses
        silently answers without one: `Family.access_error` 0)."""
        t, s, f = self.t, self.sim, self.f
        size = len(data)
        if addr + size > len(self.mem):
            return "access"
        if any(reg.read_only and self._touched(name, addr, size) for name, reg in t.items()):
            return "access"
        if addr < self.eeprom_end and s.torque and f.eeprom_needs_torque_off:
            return "access"
        if s.watchdog_tripped and self._touched("Goal_Position", addr, size):
            return "range"
        held, was_reversed, mode = self._homing(), self._reversed(), self._mode()
        if f.modes and self._touched("Operating_Mode", addr, size) and \
                data[t["Operating_Mode"].address - addr] not in self.m.modes:
            return "range"
        self.mem[addr:addr + size] = data
        self._eeprom_written(addr, size, held, was_reversed, mode)
        if self._touched("Torque_Enable", addr, size):
            if self.m.bus != "dynamixel2":   # Protocol 1.0 / Feetech: a torque write re-arms after an overload
                s.hw_error &= ~(1 << 5)
            s.torque = bool(self._get("Torque_Enable")) and not s.hw_error
            if s.torque and not self._touched("Goal_Position", addr, size):
                s.goal = s.position
        if self._touched("Goal_Position", addr, size):
            s.goal = float(self._get("Goal_Position"))
        if self._touched("Bus_Watchdog", addr, size):
            v = self.mem[t["Bus_Watchdog"].address]
            s.watchdog_ticks = v & 0x7F
            if v == 0:
                s.watchdog_tripped = False
        if self._touched("Baud_Rate", addr, size) and s.baud:   # it listens at the new rate from now on
            s.baud = _baud_of(self.m.bus, self._get("Baud_Rate")) or s.baud
        if self._touched(f.torque_cap, addr, size):
            full = self.m.factory(f.torque_cap_eeprom or f.torque_cap)
            s.torque_share = min(1.0, max(0.0, self._get(f.torque_cap) / max(full, 1)))
        self._profile_speed()
        return None

    def _eeprom_written(self, addr: int, size: int, held_homing: int, was_reversed: bool, mode: int) -> None:
        """A new Homing Offset shifts what the servo reports, a new Drive Mode mirrors it, new Min/Max
        Position Limits bound its goals; the EEPROM is kept (--eeprom) for the next power-up — on
        Feetech only while Lock is 0."""
        s, f = self.sim, self.f
        if addr >= self.eeprom_end:
            return
        kept = not (self._has(f.lock) and self._get(f.lock) != 0)
        if self.eeprom is not None and kept:
            self.eeprom.save(self.m.bus, s.servo_id, bytes(self.mem[:self.eeprom_end]))
        if self.has_homing and self._touched(f.homing, addr, size):
            shift = self._homing_sign() * (self._homing() - held_homing)
            s.position, s.goal = s.position + shift, s.goal + shift
        if self._reversed() != was_reversed:   # present = ±encoder + offset: mirrored about the offset
            mid = 2 * self._homing_sign() * self._homing()
            s.position, s.goal = mid - s.position, mid - s.position
        if self.turn and (self._touched(f.homing, addr, size) or self._reversed() != was_reversed
                          or self._mode() != mode):
            self._wrap()
            s.goal = s.position
        self._limits_changed()

    def _limits_changed(self) -> None:
        """Min/Max Position Limits bound the goals in position mode only (Dynamixel's extended and
        current-based position modes ignore them, as the manual says)."""
        s = self.sim
        if self._mode() in (4, 5) or not self._has("Min_Position_Limit"):
            s.lo, s.hi = -(1 << 30), 1 << 30
            return
        s.lo, s.hi = self._get("Min_Position_Limit"), self._get("Max_Position_Limit")
        if self.m.bus == "dynamixel1":
            s.lo, s.hi = self._get("CW_Angle_Limit"), self._get("CCW_Angle_Limit")

    def _profile_speed(self) -> None:
        """Dynamixel's Profile Velocity caps the motor's speed (0: none)."""
        if self._has("Profile_Velocity"):
            pv = self._get("Profile_Velocity")
            self.sim.profile_vmax = pv * self._velocity_unit() if pv > 0 else None


class Eeprom:
    """The servos' EEPROM kept in a file across the emulator's runs (a power cycle): each servo's
    bytes below its table's EEPROM end, by bus kind and id, as JSON of hex strings."""

    MAX_BYTES = 1 << 20   # 253 servos of any table fit in a few hundred KB

    def __init__(self, path: str) -> None:
        self.path = path
        self.data = self.read(path)

    @classmethod
    def read(cls, path: str) -> dict[str, bytes]:
        """The servos' saved bytes (none yet where the file does not exist). ValueError, naming the
        file, where it is not one this emulator wrote: it would be overwritten at the first save."""
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return {}
        except OSError as e:
            raise ValueError(f"{path}: cannot read it ({e.strerror or e})") from None
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"{path}: not a regular file; give a file name for the servos' EEPROM")
        why = "too big" if st.st_size > cls.MAX_BYTES else None
        if why is None:
            try:
                with open(path, encoding="ascii") as f:
                    raw = json.load(f)
                return {_eeprom_key(k): bytes.fromhex(v) for k, v in raw.items()}
            except OSError as e:
                raise ValueError(f"{path}: cannot read it ({e.strerror or e})") from None
            except (ValueError, TypeError, AttributeError) as e:
                why = str(e) or type(e).__name__
        raise ValueError(f"{path}: not a servos' EEPROM file this emulator wrote ({why}), and it would be "
                         "overwritten; give a new file name, or remove the file to start from the factory's")

    def load(self, kind: str, servo_id: int) -> bytes | None:
        return self.data.get(f"{kind}:{servo_id}")

    def save(self, kind: str, servo_id: int, mem: bytes) -> None:
        self.data[f"{kind}:{servo_id}"] = mem
        tmp = f"{self.path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="ascii") as f:
            json.dump({k: v.hex() for k, v in self.data.items()}, f)
        os.replace(tmp, self.path)


def _eeprom_key(key: str) -> str:
    """An EEPROM file's key, `bus:id` (as `Eeprom.save` writes them); ValueError otherwise."""
    bus, _, sid = key.partition(":")
    if bus not in ("dynamixel1", "dynamixel2", "feetech") or not sid.isdigit() or not 0 <= int(sid) <= 253:
        raise ValueError(f"key {key!r} is not a servo (bus:id)")
    return key


def _baud_of(bus: str, code: int) -> float | None:
    """The rate a Baud Rate register value selects (the vendors' tables; Protocol 1.0: 2 Mbps / (n + 1))."""
    if bus == "dynamixel1":
        return 2_000_000 / (code + 1)
    table = {"dynamixel2": dynamixel2.BAUD_CODES, "feetech": feetech.BAUD_CODES}[bus]
    return next((float(rate) for rate, c in table.items() if c == code), None)


def _status_flags(hw_error: int) -> int:
    """Dynamixel 1.0 and Feetech status flags (0x01 voltage, 0x04 heat, 0x20 overload) of the
    latched errors, which the emulator keeps in Dynamixel 2.0's bit numbering (0, 2, 5)."""
    return hw_error & 0x25


def _servo_model(bus: str, sim: SimServo) -> ServoModel:
    """A simulated servo's model (the bus's usual one where its number is none we know)."""
    found = control_tables.model(bus, sim.model)
    if found is not None:
        return found
    usual = control_tables.model_named(bus_class(bus).usual.model, bus)
    return usual


class Responder:
    """Bytes in, (delay, bytes) replies out, for one bus: each reply after its servo's return delay."""

    def __init__(self, servos: dict[int, SimServo], return_delay_s: float) -> None:
        self.servos = servos
        self.return_delay_s = return_delay_s
        self.buf = bytearray()
        self.now = 0.0

    def present(self, servo_id: int) -> bool:
        s = self.servos.get(servo_id)
        return s is not None and (s.silent_from is None or self.now < s.silent_from) and s.hears(self.host_rate)

    host_rate: float | None = None   # the baud rate the host's end of the pty is set to

    def feed(self, data: bytes, now: float, host_rate: float | None = None) -> list[tuple[float, bytes]]:
        self.now = now
        self.host_rate = host_rate
        self.buf += data
        return [r if isinstance(r, tuple) else (self.return_delay_s, r) for r in self.replies()]

    def replies(self) -> list:
        raise NotImplementedError


class RegisterResponder(Responder):
    """The servos behind control tables (Dynamixel 2.0 and 1.0, Feetech): one RegisterServo each."""

    def __init__(self, bus: str, servos, return_delay_s, eeprom: Eeprom | None = None, factory: bool = False,
                 delay_given: bool = True) -> None:
        super().__init__(servos, return_delay_s)
        self.bus = bus
        self.regs = {i: RegisterServo(s, _servo_model(bus, s), eeprom, factory) for i, s in servos.items()}
        if delay_given or not factory:   # the emulator's --return-delay-us, into each servo's register
            for reg in self.regs.values():
                reg._put("Return_Delay_Time", min(254, round(return_delay_s / 2e-6)))

    def _after(self, i: int, reply: bytes) -> tuple[float, bytes]:
        return self.regs[i].return_delay_s, reply

    def renumber(self) -> None:
        """A servo whose ID register was written answers at its new id from now on (LeRobot's motor
        set-up gives each new servo its id this way); one taken by another servo stays as it was."""
        for old, reg in list(self.regs.items()):
            new = reg._get("ID")
            if new != old and new not in self.regs:
                self.regs[new] = self.regs.pop(old)
                self.servos[new] = self.servos.pop(old)
                self.servos[new].servo_id = new

    def _in_order(self, sid: int, broadcast: int) -> list[int]:
        """The servos a packet for `sid` reaches, in id order (a broadcast's replies come so)."""
        return sorted(i for i in self.servos if self.present(i) and sid in (i, broadcast))


class Dxl2Responder(RegisterResponder):
    def __init__(self, servos, return_delay_s, eeprom: Eeprom | None = None, factory: bool = False,
                 delay_given: bool = True) -> None:
        super().__init__("dynamixel2", servos, return_delay_s, eeprom, factory, delay_given)

    def _status(self, i: int, error: int = 0, data: bytes = b"") -> tuple[float, bytes]:
        alert = 0x80 if self.servos[i].hw_error else 0
        return self._after(i, dynamixel2.status_packet(i, error | alert, data))

    def replies(self) -> list:
        out: list = []
        while True:
            pkt, used = dynamixel2.parse(self.buf)
            del self.buf[:used]
            if pkt is None:
                return out
            for i in self.servos:
                if pkt.servo_id in (i, dynamixel2.BROADCAST) and self.present(i):
                    self.servos[i].heard()
            out += self._handle(pkt)
            self.renumber()

    def _handle(self, pkt) -> list:
        d2, p, sid = dynamixel2, pkt.params, pkt.servo_id
        targets = self._in_order(sid, d2.BROADCAST)
        errors = {None: 0, "access": 7, "range": 4}
        if pkt.instruction == d2.PING:
            return [self._status(i, 0, struct.pack("<HB", self.regs[i].m.number, self.regs[i]._get("Firmware_Version")))
                    for i in targets]
        if pkt.instruction == d2.READ and sid != d2.BROADCAST and targets and len(p) == 4:
            addr, size = struct.unpack("<HH", p)
            data = self.regs[sid].read(addr, size)
            return [self._status(sid, 7 if data is None else 0, data or b"")]
        if pkt.instruction == d2.WRITE and len(p) >= 3:
            addr = p[0] | (p[1] << 8)
            out = []
            for i in targets:
                err = self.regs[i].write(addr, p[2:])
                if sid != d2.BROADCAST:
                    out.append(self._status(i, errors[err]))
            return out
        if pkt.instruction == d2.SYNC_WRITE and len(p) >= 4:
            addr, size = struct.unpack_from("<HH", p)
            for k in range(4, len(p) - size + 1, size + 1):
                i = p[k]
                if i in self.servos and self.present(i):
                    self.regs[i].write(addr, p[k + 1:k + 1 + size])
            return []
        if pkt.instruction == d2.FAST_SYNC_READ and len(p) >= 4:
            addr, size = struct.unpack_from("<HH", p)
            ids = [i for i in p[4:] if i in self.servos]
            if not all(self.present(i) for i in ids):   # the chain breaks at a silent servo
                return []
            return [(max((self.regs[i].return_delay_s for i in ids), default=0.0),
                     d2.fast_sync_reply([(0x80 if self.servos[i].hw_error else 0, i, self.regs[i].read(addr, size) or b"")
                                         for i in ids]))]
        if pkt.instruction == d2.SYNC_READ and len(p) >= 4:
            addr, size = struct.unpack_from("<HH", p)
            return [self._status(i, 0, self.regs[i].read(addr, size) or b"") for i in p[4:]
                    if i in self.servos and self.present(i)]
        if pkt.instruction == d2.REBOOT and targets and sid != d2.BROADCAST:
            s = self.servos[sid]
            s.hw_error, s.torque, s.watchdog_tripped, s.watchdog_ticks = 0, False, False, 0
            return [self._status(sid)]
        if targets and sid != d2.BROADCAST:
            return [self._status(sid, 2)]   # instruction error
        return []


class SumResponder(RegisterResponder):
    """Dynamixel 1.0 (no Sync Read) and Feetech (Sync Read on STS; SCS words big-endian)."""

    def __init__(self, bus: str, servos, return_delay_s, sync_read: bool, eeprom: Eeprom | None = None,
                 factory: bool = False, delay_given: bool = True) -> None:
        super().__init__(bus, servos, return_delay_s, eeprom, factory, delay_given)
        self.sync_read = sync_read
        self.errors = {None: 0, "access": FAMILIES[bus].access_error, "range": FAMILIES[bus].range_error}

    def _status(self, i: int, error: int = 0, data: bytes = b"") -> tuple[float, bytes]:
        return self._after(i, dynamixel1.packet(i, error | _status_flags(self.servos[i].hw_error), data))

    def replies(self) -> list:
        out: list = []
        while True:
            pkt, used = dynamixel1.parse(self.buf)
            del self.buf[:used]
            if pkt is None:
                return out
            out += self._handle(pkt)
            self.renumber()

    def _handle(self, pkt) -> list:
        d1, p, sid = dynamixel1, pkt.params, pkt.servo_id
        targets = self._in_order(sid, d1.BROADCAST)
        for i in targets:
            self.servos[i].heard()
        unicast = sid != d1.BROADCAST and bool(targets)
        if pkt.code == d1.PING:   # a broadcast ping: every servo answers, in id order
            return [self._status(i) for i in targets]
        if pkt.code == d1.READ and unicast and len(p) == 2:
            data = self.regs[sid].read(p[0], p[1])
            return [self._status(sid, self.errors["access"] or 0x08 if data is None else 0, data or b"")]
        if pkt.code == d1.WRITE and len(p) >= 2:
            errs = [self.regs[i].write(p[0], p[1:]) for i in targets]
            return [self._status(sid, self.errors[errs[0]])] if unicast else []
        if pkt.code == d1.SYNC_WRITE and len(p) >= 2:
            addr, size = p[0], p[1]
            for k in range(2, len(p) - size + 1, size + 1):
                i = p[k]
                if i in self.servos and self.present(i):
                    self.servos[i].heard()
                    self.regs[i].write(addr, p[k + 1:k + 1 + size])
            return []
        if pkt.code == d1.SYNC_READ and self.sync_read and len(p) >= 2:
            return [self._status(i, 0, self.regs[i].read(p[0], p[1]) or b"") for i in p[2:]
                    if i in self.servos and self.present(i)]
        return [self._status(sid, 0x40)] if unicast else []   # instruction error


class IcsResponder(Responder):
    LENGTHS = {0x80: 3, 0xA0: 2, 0xC0: 3, 0xE0: 4}

    def replies(self) -> list[bytes]:
        out: list[bytes] = []
        while self.buf:
            if not self.buf[0] & 0x80:
                del self.buf[0]   # a data byte where a command should start: resynchronise
                continue
            n = self.LENGTHS[self.buf[0] & 0xE0]
            restart = next((k for k in range(1, min(n, len(self.buf))) if self.buf[k] & 0x80), None)
            if restart is not None:  # a command byte inside the data: the partial command is void
                del self.buf[:restart]
                continue
            if len(self.buf) < n:
                return out
            cmd = bytes(self.buf[:n])
            del self.buf[:n]
            out += self._handle(cmd)
        return out

    def _handle(self, cmd: bytes) -> list[bytes]:
        kind, sid = cmd[0] & 0xE0, cmd[0] & 0x1F
        if kind == 0xE0:
            return []
        if not self.present(sid):
            return []
        s = self.servos[sid]
        s.heard()
        pos = int(round(s.position))
        if kind == 0x80:
            target = (cmd[1] << 7) | cmd[2]
            if target == kondo_ics.FREE:
                s.torque = False
            elif kondo_ics.POSITION_MIN <= target <= kondo_ics.POSITION_MAX and not s.hw_error:
                s.torque, s.goal = True, float(target)
            return [kondo_ics.position_reply(sid, pos)]
        if kind == 0xA0:
            sc = cmd[1]
            if sc == kondo_ics.SC_POSITION:
                return [bytes([0x20 | sid, sc]) + kondo_ics.position_reply(sid, pos)[1:]]
            value = {kondo_ics.SC_SPEED: 127, kondo_ics.SC_STRETCH: 60, kondo_ics.SC_CURRENT: 0,
                     kondo_ics.SC_TEMPERATURE: 80}.get(sc)
            return [] if value is None else [bytes([0x20 | sid, sc, value])]
        if kind == 0xC0:
            return [bytes([0x40 | sid, cmd[1], cmd[2]])]
        return []


class Ssc32Responder(Responder):
    """ASCII commands ending in CR; QP answers one byte per channel (pulse / 10 µs)."""

    def __init__(self, servos, return_delay_s) -> None:
        super().__init__(servos, return_delay_s)
        self.pulse = {i: 0 for i in range(32)}

    def replies(self) -> list[bytes]:
        out: list[bytes] = []
        while b"\r" in self.buf:
            line, _, rest = bytes(self.buf).partition(b"\r")
            self.buf = bytearray(rest)
            text = "".join(c for c in line.decode("ascii", "ignore").upper() if c.isalnum() or c == "#")
            out += self._handle(text)
        return out

    def _handle(self, text: str) -> list[bytes]:
        if text == "VER":
            return [b"SSC32-V2.50USB (hil emulator)\r"]
        if text.startswith("QP"):
            chans = [int(c) for c in text.split("QP")[1:] if c.isdigit() and int(c) < 32]
            return [bytes(min(255, self.pulse[c] // 10) for c in chans)]
        if text == "Q":
            return [b"."]
        for part in text.split("#")[1:]:
            ch, _, rest = part.partition("P")
            num = ""
            for c in rest:
                if not c.isdigit():
                    break
                num += c
            if ch.isdigit() and num and int(ch) < 32:
                self.pulse[int(ch)] = int(num)
                s = self.servos.get(int(ch))
                if s is not None:
                    s.torque = int(num) > 0
                    if int(num) > 0:
                        s.goal = float(num)
        return []


class MaestroResponder(Responder):
    """The compact protocol; Get Position answers the pulse being output, in ¼ µs."""

    def __init__(self, servos, return_delay_s) -> None:
        super().__init__(servos, return_delay_s)
        self.target = {i: 0 for i in range(24)}

    def replies(self) -> list[bytes]:
        out: list[bytes] = []
        while self.buf:
            c = self.buf[0]
            if c == pwm.SET_TARGET:
                if len(self.buf) < 4:
                    return out
                self._set(self.buf[1], self.buf[2] | (self.buf[3] << 7))
                del self.buf[:4]
            elif c == pwm.SET_MULTIPLE:
                if len(self.buf) < 3 or len(self.buf) < 3 + 2 * self.buf[1]:
                    return out
                count, first = self.buf[1], self.buf[2]
                for k in range(count):
                    self._set(first + k, self.buf[3 + 2 * k] | (self.buf[4 + 2 * k] << 7))
                del self.buf[:3 + 2 * count]
            elif c in (pwm.SET_SPEED, pwm.SET_ACCEL):
                if len(self.buf) < 4:
                    return out
                del self.buf[:4]
            elif c == pwm.GET_POSITION:
                if len(self.buf) < 2:
                    return out
                ch = self.buf[1]
                del self.buf[:2]
                out.append(struct.pack("<H", self.target.get(ch, 0)))
            elif c == pwm.GET_ERRORS:
                del self.buf[:1]
                out.append(b"\x00\x00")
            else:
                del self.buf[:1]
        return out

    def _set(self, ch: int, quarter_us: int) -> None:
        if ch in self.target:
            self.target[ch] = quarter_us
            s = self.servos.get(ch)
            if s is not None:
                s.torque = quarter_us > 0
                if quarter_us > 0:
                    s.goal = quarter_us / 4.0


# each bus kind's emulated servos (every kind in firmware_protocol.buses.BUSES has one: a test checks)
RESPONDERS = {   # (servos, return delay, EEPROM kept across runs or None, factory state, return delay given)
    "dynamixel2": lambda servos, delay, *state: Dxl2Responder(servos, delay, *state),
    "dynamixel1": lambda servos, delay, *state: SumResponder("dynamixel1", servos, delay, False, *state),
    "feetech": lambda servos, delay, *state: SumResponder("feetech", servos, delay, True, *state),
    "kondo-ics": lambda servos, delay, *state: IcsResponder(servos, delay),
    "ssc32": lambda servos, delay, *state: Ssc32Responder(servos, delay),
    "maestro": lambda servos, delay, *state: MaestroResponder(servos, delay),
}


def responder(bus: str, servos: dict[int, SimServo], return_delay_s: float, eeprom: Eeprom | None = None,
              factory: bool = False, delay_given: bool = True) -> Responder:
    if bus not in RESPONDERS:
        raise SystemExit(f"emulator: unknown bus {bus!r}")
    return RESPONDERS[bus](servos, return_delay_s, eeprom, factory, delay_given)


HW_BITS = {"overload": 1 << 5, "overheat": 1 << 2, "voltage": 1 << 0}
TCGETS2 = 0x802C542A   # Linux: struct termios2, whose c_ospeed holds any rate (custom ones too)


def host_baud(fd: int) -> int | None:
    """The baud rate the other end of the pty has set (None: cannot tell)."""
    buf = bytearray(44)
    try:
        fcntl.ioctl(fd, TCGETS2, buf)
    except OSError:
        return None
    return struct.unpack_from("<I", buf, 40)[0]


@dataclass
class Emulator:
    bus: str
    servos: dict[int, SimServo]
    baud: float
    echo: bool
    return_delay_s: float
    faults: list[InjectedFault] = field(default_factory=list)
    strict_baud: bool = True   # bytes sent at another rate are noise to the servos: no reply
    ignored_bytes: int = 0
    plant: object | None = None   # a firmware_protocol.plant.ServoBridge: the servos' joints in physics
    hands: list[Hand] = field(default_factory=list)
    eeprom: Eeprom | None = None   # the servos' EEPROM kept in a file across runs (--eeprom)
    factory: bool = False          # the servos as they leave the factory (--factory), not as the config set them up
    delay_given: bool = True       # --return-delay-us was given (else, with --factory, their factory delay)

    def _wrong_baud(self, host_rate: float | None) -> bool:
        """No servo listens at the rate the host set: what it sends is noise to them all."""
        return not any(s.hears(host_rate) for s in self.servos.values())

    def run(self, master: int, stop) -> int:
        if self.strict_baud and self.baud:   # each servo listens at its own rate (a Baud Rate write changes it)
            for s in self.servos.values():
                s.baud = float(self.baud)
        resp = responder(self.bus, self.servos, self.return_delay_s, self.eeprom, self.factory, self.delay_given)
        bits = bus_class(self.bus).bits_per_byte
        t0 = last = time.monotonic()
        pending = list(self.faults)
        # a full garbage collection of all that was built would stall the board tens of ms (as a
        # real board never does); frozen, collections walk only what the run makes
        gc.collect()
        gc.freeze()
        while not stop():
            ready = select.select([master], [], [], 0.002)[0]
            now = time.monotonic()
            for f in [f for f in pending if now - t0 >= f.at]:
                pending.remove(f)
                if f.kind == "disconnect":
                    return 0
                s = self.servos.get(f.servo_id)
                if s is None:
                    continue
                if f.kind == "silent":
                    s.silent_from = now
                    if f.until is not None:
                        pending.append(InjectedFault("answer", f.servo_id, f.until))
                elif f.kind == "answer":
                    s.silent_from = None
                elif f.kind == "blocked":
                    s.blocked = True
                else:
                    s.hw_error |= HW_BITS[f.kind]
                    if f.kind == "overload":
                        s.torque = False   # as the servo's Shutdown setting does
            for hand in self.hands:
                if hand.servo_id in self.servos:
                    hand.move(self.servos[hand.servo_id], now)
            if self.plant is None:
                for s in self.servos.values():
                    s.step(now - last)
            else:
                for s in self.servos.values():
                    s.watch(now - last)
                self.plant.step(self.servos, now)
            last = now
            if not ready:
                continue
            try:
                data = os.read(master, 4096)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                time.sleep(0.01)   # no one has the port open
                continue
            if self.echo:
                self._write(master, data)
            host_rate = host_baud(master)
            if self._wrong_baud(host_rate):
                self.ignored_bytes += len(data)
                continue
            self._reply(master, resp.feed(data, now, host_rate), bits)
        return 0

    def _reply(self, master: int, replies: list[tuple[float, bytes]], bits: int) -> None:
        """Each reply after its servo's return delay and the wire time of its bytes, on one schedule
        from now: a late wake-up of this process sends what is due at once instead of adding up."""
        due = time.monotonic()
        for delay, r in replies:
            due += delay + (len(r) * bits / self.baud if self.baud else 0.0)
            pause = due - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            self._write(master, r)

    @staticmethod
    def _write(fd: int, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                k = os.write(fd, view)
                view = view[k:]
            except BlockingIOError:
                select.select([], [fd], [], 0.01)


def build_servos(spec: list[dict]) -> dict[int, SimServo]:
    out = {}
    for s in spec:
        start = float(s["initial"] if "initial" in s else s["encoder"])
        sim = SimServo(int(s["id"]), int(s.get("model", 0)), start, start,
                       float(s.get("vmax", 4000.0)), int(s.get("lo", -(1 << 30))), int(s.get("hi", 1 << 30)),
                       homing_offset=int(s.get("homing", 0)), stall_mA=float(s.get("stall_mA", 1400.0)),
                       encoder=float(s["encoder"]) if "encoder" in s else None)
        out[sim.servo_id] = sim
    return out


def parser() -> argparse.ArgumentParser:

    p = argparse.ArgumentParser(allow_abbrev=False, prog="python -m firmware_protocol.buses.emulator",
                                description="servo bus emulator on a pseudo-terminal (prints its path)")
    p.add_argument("--bus", required=True, choices=list(BUSES))
    p.add_argument("--servos", required=True,
                   help='JSON list: [{"id": 1, "model": 1020, "initial": 2048, "vmax": 4000, "lo": 0, "hi": 4095, '
                            '"homing": 0}, …]')
    p.add_argument("--baud", type=float, default=1_000_000, help="pace replies at this baud (0: no pacing)")
    p.add_argument("--echo", action="store_true", help="read every request back first (a one-wire adapter)")
    p.add_argument("--return-delay-us", type=float, help="each servo's return delay before replying, µs (its Return "
                                                         "Delay Time register; default 0, with --factory its own)")
    p.add_argument("--fault", action="append", default=[],
                   help="silent:ID[@T[-T2]] overload:ID@T overheat:ID@T voltage:ID@T blocked:ID@T disconnect@T")
    p.add_argument("--hand", action="append", default=[],
                   help="ID:A:B@T0-T1[*]: a hand moves servo ID (torque off) to tick A, then B, resting a moment at "
                        "each, from T0 to T1 s after the host first spoke to it (*: back to the start, and again every "
                        "T1 - T0 s)")
    p.add_argument("--any-baud", action="store_true",
                   help="answer whatever baud rate the host set (default: only at --baud, as real servos do)")
    p.add_argument("--factory", action="store_true",
                   help="servos as they leave the factory: their own position limits, homing offset and return delay "
                        "(what LeRobot's set-up and calibration start from), not the config's")
    p.add_argument("--eeprom", metavar="FILE", help="keep the servos' EEPROM (ids, homing offsets, limits …) in FILE "
                                                    "across runs: a run after another is a power cycle")
    p.add_argument("--link", help="also make this symlink point at the pty")
    p.add_argument("--parent-pid", type=int, help="exit when this process ends")
    return p


def main(argv: list[str] | None = None, bridge_for=None) -> int:
    """`bridge_for(servos)`: a firmware_protocol.plant.ServoBridge that drives the servos' joints
    (e.g. in physics, hil.physics.emulate); default each servo's kinematic motor."""
    args = parser().parse_args(argv)
    try:
        servos = build_servos(json.loads(args.servos))
    except (ValueError, KeyError, TypeError) as e:
        raise SystemExit(f"emulator: --servos: {e}") from None
    faults = parse_faults(args.fault)
    hands = parse_hands(args.hand)
    try:
        eeprom = Eeprom(args.eeprom) if args.eeprom else None
    except ValueError as e:
        raise SystemExit(f"emulator: --eeprom {e}") from None
    if args.parent_pid is not None:
        exit_with_parent(args.parent_pid)
    stopping: list[int] = []
    # before the path is said: whoever reads it may stop us at once, and the link must still go
    signal.signal(signal.SIGTERM, lambda s, f: stopping.append(s))
    signal.signal(signal.SIGINT, lambda s, f: stopping.append(s))
    master, slave, path = open_pty(args.link)
    print(path, flush=True)
    print(f"servo bus emulator: {args.bus}, {len(servos)} servos (ids {', '.join(str(i) for i in servos)}) on "
          f"{path} at {args.baud:.0f} baud", file=sys.stderr, flush=True)
    emu = Emulator(args.bus, servos, args.baud, args.echo, (args.return_delay_us or 0.0) * 1e-6, faults,
                   strict_baud=not args.any_baud, plant=None if bridge_for is None else bridge_for(servos),
                   hands=hands, eeprom=eeprom, factory=args.factory,
                   delay_given=args.return_delay_us is not None)
    try:
        code = emu.run(master, lambda: bool(stopping))
    finally:
        close_pty(master, slave, path, args.link)
    return stopped_code(stopping, code)


if __name__ == "__main__":
    sys.exit(main())
