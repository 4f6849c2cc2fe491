"""Off-the-shelf servo buses (Dynamixel 2.0 and 1.0, Feetech, Kondo ICS, SSC-32, Maestro): one
module per vendor protocol, each a `servo_bus.ServoBus`; `board.BusBoard` makes any of them a board
the runtime drives like its own; `emulator` serves each byte-exactly on a pty.

A bus is registered once, here: everything outside this package (help texts, `hil ports --probe`,
the LeRobot calibration files, the emulated servos' model numbers) asks the registry, and names no
bus itself. The registry is read without importing the drivers (the command line's start-up)."""

from __future__ import annotations

import importlib
from dataclasses import dataclass


@dataclass(frozen=True)
class BusKind:
    module: str            # firmware_protocol.buses.<module>
    cls: str               # its ServoBus class
    probe: str             # the step of `probe.probe_buses` that finds it
    probe_first: bool = False   # probed before a hil board's HELLO: a PWM board answers nothing else
    echoes: bool = False   # its usual adapter reads back what it sends (Kondo's)


BUSES = {
    "dynamixel2": BusKind("dynamixel2", "Dynamixel2Bus", "dynamixel2"),
    "dynamixel1": BusKind("dynamixel1", "Dynamixel1Bus", "protocol1"),
    "feetech": BusKind("feetech", "FeetechBus", "protocol1"),
    "kondo-ics": BusKind("kondo_ics", "KondoIcsBus", "kondo-ics", echoes=True),
    "ssc32": BusKind("pwm", "Ssc32Bus", "ssc32", probe_first=True),
    "maestro": BusKind("pwm", "MaestroBus", "maestro", probe_first=True),
}
FIRST_BUS = next(iter(BUSES))   # the one examples and hints name


def bus_list(last: str = "or") -> str:
    """The bus kinds in words: "dynamixel2, dynamixel1, …, ssc32 or maestro"."""
    kinds = list(BUSES)
    return ", ".join(kinds[:-1]) + f" {last} {kinds[-1]}"


def bus_class(kind: str):
    """The `ServoBus` class of a bus kind; KeyError names the kinds there are."""
    try:
        entry = BUSES[kind]
    except KeyError:
        raise KeyError(f"unknown bus {kind!r}; buses: {', '.join(BUSES)}") from None
    return getattr(importlib.import_module(f"firmware_protocol.buses.{entry.module}"), entry.cls)


def bus_module(kind: str):
    return importlib.import_module(f"firmware_protocol.buses.{BUSES[kind].module}")


def model_numbers() -> dict[str, int]:
    """Every registered bus's servo models: name (lower case) → the number it reports."""
    out: dict[str, int] = {}
    for kind in BUSES:
        for model in getattr(bus_module(kind), "MODELS", {}).values():
            out.setdefault(model.name.lower(), model.number)
    return out
