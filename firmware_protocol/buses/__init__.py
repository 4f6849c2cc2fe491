"""Off-the-shelf servo buses (Dynamixel 2.0 and 1.0, Feetech, Kondo ICS, SSC-32, Maestro): one
module per vendor protocol, each a `servo_bus.ServoBus`; `board.BusBoard` makes any of them a board
the runtime drives like its own; `emulator` serves each byte-exactly on a pty."""

from __future__ import annotations

import importlib

# bus kind → (module, class)
BUSES = {
    "dynamixel2": ("dynamixel2", "Dynamixel2Bus"),
    "dynamixel1": ("dynamixel1", "Dynamixel1Bus"),
    "feetech": ("feetech", "FeetechBus"),
    "kondo-ics": ("kondo_ics", "KondoIcsBus"),
    "ssc32": ("pwm", "Ssc32Bus"),
    "maestro": ("pwm", "MaestroBus"),
}


def bus_class(kind: str):
    """The `ServoBus` class of a bus kind; KeyError names the kinds there are."""
    try:
        module, name = BUSES[kind]
    except KeyError:
        raise KeyError(f"unknown bus {kind!r}; buses: {', '.join(BUSES)}") from None
    return getattr(importlib.import_module(f"firmware_protocol.buses.{module}"), name)
