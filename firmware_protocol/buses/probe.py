"""Which servo bus answers on a port, at which baud rate, with which servo ids and models.

Only pings and reads are written. The order matters for what those bytes could mean elsewhere:
a Maestro takes any byte it does not understand as an error and sends its channels home, so it
is asked first (Get Errors, which means nothing to the others); the SSC-32 next (ASCII VER);
then Dynamixel 2.0 (one broadcast PING per baud rate), the Protocol 1.0 framing that Dynamixel
1.0 and Feetech share (one PING per id: neither has a broadcast ping), and Kondo ICS (32 ids).
"""

from __future__ import annotations

import termios
import time
from dataclasses import dataclass, field

import serial

from firmware_protocol.buses import dynamixel1, dynamixel2, feetech
from firmware_protocol.buses.kondo_ics import KondoIcsBus
from firmware_protocol.buses.pwm import GET_ERRORS
from firmware_protocol.buses.servo_bus import PATIENT_REPLY_S, Identity, Wire


QUICK_IDS = 32
FACTORY_RETURN_DELAY_S = 0.0005   # Dynamixel's (and many Feetech's) factory Return Delay Time
# the rates each scan tries, most likely first (fewer than each bus allows: a scan of 254 ids at
# 9600 baud alone would take 3 s); `hil ports --probe --baud B` tries any other
PROBE_BAUDS = {"ssc32": (115_200, 9_600, 38_400), "dynamixel2": (57_600, 1_000_000, 115_200, 2_000_000, 3_000_000,
                                                                 4_000_000),
               "protocol1": (1_000_000, 57_600, 115_200, 500_000), "kondo-ics": (115_200, 1_250_000, 625_000)}


@dataclass
class Found:
    bus: str
    baud: int
    servos: list[Identity] = field(default_factory=list)
    note: str = ""

    def text(self) -> str:
        if not self.servos:
            return f"{self.bus} at {self.baud} baud{': ' + self.note if self.note else ''}"
        models: dict[str, list[int]] = {}
        for s in self.servos:
            models.setdefault(s.model_name, []).append(s.servo_id)
        parts = [f"{name} ids {_ranges(ids)}" for name, ids in models.items()]
        count = f"{len(self.servos)} servo{'s' if len(self.servos) > 1 else ''}"
        return f"{self.bus} at {self.baud} baud: {count} ({'; '.join(parts)})"


def _ranges(ids: list[int]) -> str:
    ids = sorted(ids)
    out, start = [], ids[0]
    for a, b in zip(ids, ids[1:] + [None]):
        if b != a + 1:
            out.append(f"{start}" if start == a else f"{start}–{a}")
            start = b
    return ", ".join(out)


def _set_baud(ser, baud: int, parity=serial.PARITY_NONE) -> bool:
    try:
        ser.baudrate = baud
        if ser.parity != parity:
            ser.parity = parity
        return True
    except (OSError, ValueError, termios.error, serial.SerialException):
        try:
            ser.parity = serial.PARITY_NONE
        except (OSError, ValueError, termios.error, serial.SerialException):
            pass
        return parity != serial.PARITY_NONE   # a pty takes no parity: ask anyway


def _echoes(wire: Wire) -> bool:
    """Does the adapter read back what it sends? (Else an echoed Protocol 1.0 PING parses as a
    servo's answer.) A PING to an id no servo has, and look."""
    frame = dynamixel1.packet(0xFD, dynamixel1.PING)
    wire.drain()
    wire.ser.write(frame)
    return wire.read(len(frame), PATIENT_REPLY_S + wire.byte_time(len(frame))) == frame


def _maestro(wire: Wire) -> Found | None:
    """Get Errors, twice: each answered with exactly two bytes holding the nine defined bits (a
    board that happens to send something meanwhile is not taken for a Maestro)."""
    replies = []
    for _ in range(2):
        wire.drain()
        wire.write(bytes([GET_ERRORS]))
        reply = wire.read(8, 0.03)
        if len(reply) != 2 or reply[1] > 0x01:
            return None
        replies.append(reply)
    errors = replies[0][0] | (replies[0][1] << 8)
    return Found("maestro", wire.baud, note=f"Pololu Maestro (error bits {errors:#06x}); channels are not "
                                            "probed (a PWM controller answers for every channel)")


def _ssc32(wire: Wire, bauds) -> Found | None:
    for baud in bauds:
        if not _set_baud(wire.ser, baud):
            continue
        wire.drain()
        wire.write(b"\rVER\r")   # the CR first ends whatever another probe left on its line
        text = wire.read(40, 0.05 + wire.byte_time(44))
        if text.upper().startswith(b"SSC32") or b"SSC" in text.upper():
            return Found("ssc32", baud, note=text.decode("ascii", "replace").strip())
    return None


def _dynamixel2(wire: Wire, bauds) -> Found | None:
    for baud in bauds:
        if not _set_baud(wire.ser, baud):
            continue
        bus = dynamixel2.Dynamixel2Bus(wire)
        wire.drain()
        wire.write(dynamixel2.packet(dynamixel2.BROADCAST, dynamixel2.PING))
        found, buf = [], bytearray()
        deadline = time.monotonic() + 0.05 + wire.byte_time(14)
        while time.monotonic() < deadline:
            chunk = wire.read(14, max(0.0, deadline - time.monotonic()))
            buf += chunk
            while True:
                pkt, used = dynamixel2.parse(buf)
                del buf[:used]
                if pkt is None:
                    break
                if pkt.instruction == dynamixel2.STATUS and len(pkt.params) >= 3:
                    number = pkt.params[0] | (pkt.params[1] << 8)
                    model = dynamixel2.MODELS.get(number)
                    found.append(Identity(pkt.servo_id, number, model.name if model else f"model {number}",
                                          pkt.params[2]))
                    deadline = time.monotonic() + 0.02 + wire.byte_time(14)   # the next servo's turn
        if found:
            # replies lost in the broadcast's crowd: the ids between those found, asked one by one
            have = {s.servo_id for s in found}
            bus.reply_timeout_s = 0.02
            for i in range(min(have), max(have)):
                if i not in have:
                    ident = bus.ping(i)
                    if ident is not None:
                        found.append(ident)
            return Found("dynamixel2", baud, sorted(found, key=lambda s: s.servo_id))
    return None


def _protocol1(wire: Wire, bauds, full: bool) -> Found | None:
    """Ids 0–31 at each rate (every kit we know numbers its servos there), then the rest at the
    rate where servos answered; `full`: all 254 ids at every rate."""
    for baud in bauds:
        if not _set_baud(wire.ser, baud):
            continue
        bus = dynamixel1.Dynamixel1Bus(wire, reply_timeout_s=0.001, return_delay_s=FACTORY_RETURN_DELAY_S)

        def answers(i: int) -> bool:
            return bus._transact(dynamixel1.packet(i, dynamixel1.PING), i, 6) is not None

        ids = [i for i in range(254 if full else QUICK_IDS) if answers(i)]
        if not ids:
            continue
        if not full:
            ids += [i for i in range(QUICK_IDS, 254) if answers(i)]
        # the quick ids and the gaps among those found that did not answer are asked again, more
        # patiently: a busy host (or adapter) can miss a 1 ms reply
        bus.reply_timeout_s = 0.02
        again = set(range(QUICK_IDS)) | set(range(min(ids), max(ids)))
        ids = sorted(set(ids) | {i for i in sorted(again) if i not in ids and answers(i)})
        bus.reply_timeout_s = 0.02
        dxl = {i: bus.ping(i) for i in ids}
        if all(d is not None and d.model in dynamixel1.MODELS for d in dxl.values()):
            return Found("dynamixel1", baud, list(dxl.values()))
        ft = feetech.FeetechBus(wire, reply_timeout_s=0.02, return_delay_s=FACTORY_RETURN_DELAY_S)
        fts = {i: ft.ping(i) for i in ids}
        # a servo answers when asked again; one that does not was a stray reply (the port's own
        # echo, bytes of another bus's answer arriving late after a change of baud rate)
        ids = [i for i in ids if dxl[i] is not None or fts[i] is not None]
        if not ids:
            continue
        found = [fts[i] or Identity(i, None, "unknown model") for i in ids]
        if all(f.model in feetech.MODELS for f in found):
            return Found("feetech", baud, found)
        return Found("dynamixel1 or feetech", baud, found, note="models not known to hil")
    return None


def _ics(wire: Wire, bauds) -> Found | None:
    for baud in bauds:
        if not _set_baud(wire.ser, baud, serial.PARITY_EVEN):
            continue
        bus = KondoIcsBus(wire, reply_timeout_s=0.003)
        found = [s for s in (bus.ping(i) for i in range(32)) if s is not None]
        if not found:   # the kit's first ids asked again, patiently: a busy host can miss every 3 ms reply
            with bus.patient(0.02):
                found = [s for s in (bus.ping(i) for i in range(2)) if s is not None]
        if found:
            have = {s.servo_id for s in found}
            bus.reply_timeout_s = 0.02   # those that did not answer, asked again more patiently (a busy host)
            found += [s for s in (bus.ping(i) for i in range(32) if i not in have) if s is not None]
            found.sort(key=lambda s: s.servo_id)
            return Found("kondo-ics", baud, found, note="the adapter echoes" if wire.echo else "")
    return None


def probe_buses(ser: serial.SerialBase, kinds: list[str] | None = None,
                bauds: list[int] | None = None, full: bool = False) -> Found | None:
    """The first servo bus that answers on an open port (None: none). `full`: Protocol 1.0 ids
    32–253 at every rate too (slow: about 0.5 s per rate)."""
    wire = Wire(ser)
    wire.echo = _echoes(wire)
    kinds = kinds or ["maestro", "ssc32", "dynamixel2", "protocol1", "kondo-ics"]

    def rates(kind: str) -> list[int]:
        return bauds or list(PROBE_BAUDS[kind])

    steps = {"maestro": lambda: _maestro(wire), "ssc32": lambda: _ssc32(wire, rates("ssc32")),
             "dynamixel2": lambda: _dynamixel2(wire, rates("dynamixel2")),
             "protocol1": lambda: _protocol1(wire, rates("protocol1"), full),
             "kondo-ics": lambda: _ics(wire, rates("kondo-ics"))}
    for kind in kinds:
        found = steps[kind]()
        if found is not None:
            return found
    return None
