"""`hil ports`: serial ports, and which board or servo bus answers on each."""

from __future__ import annotations

import os
import sys

from firmware_protocol.buses import FIRST_BUS, bus_list
from hil.cli.common import add_command


def register(sub) -> None:
    s = add_command(sub, "ports", "list serial ports (VID:PID, serial number); --probe asks each what answers",
                    "Lists the ports the OS knows (USB adapters, ACM devices, built-in UARTs), or only those "
                    "given on the command line (a pty from `hil emulate`, say). --probe asks each port, in turn: a Pololu "
                    "Maestro (Get Errors), an SSC-32 (VER), a hil board (HELLO), Dynamixel 2.0 servos (broadcast "
                    "PING), Dynamixel 1.0 or Feetech servos (PING to ids 0–31 at each rate, then the rest where "
                    "servos answered; with --bus and --baud every id), Kondo ICS servos (32 ids), each at its "
                    "usual baud rates, and lists the bus, baud rate, servo ids and models that answer. Only pings "
                    "and reads are written; a silent port takes about 2 s.",
                    ["hil ports", "hil ports --probe", "hil ports --probe /dev/pts/3",
                     f"hil ports --probe /dev/ttyUSB0 --bus {FIRST_BUS} --baud 1000000"])
    s.add_argument("--probe", action="store_true", help="ask each port which board or servo bus answers")
    s.add_argument("--baud", type=int, help="probe at this baud rate only (default: each bus's usual rates; "
                                            "1000000 for a hil board)")
    s.add_argument("--bus", help=f"probe for this servo bus only ({bus_list()}; or hil for a hil board)")
    s.add_argument("extra", nargs="*", metavar="PORT", help="list and probe these ports only (e.g. a pty from `hil emulate`)")
    s.set_defaults(func=run)




def probe_port(dev: str, baud: int | None, bus: str | None) -> tuple[str, bool]:
    """What answers on `dev`, as the text after the arrow, and whether anything did."""
    from firmware_protocol.buses import BUSES
    from firmware_protocol.buses.probe import probe_buses
    from firmware_protocol.protocol_errors import DeviceError
    from firmware_protocol.link import probe
    from firmware_protocol.serial_port import open_serial

    kinds = [k for k in BUSES if bus in (None, k)]
    first = list(dict.fromkeys(BUSES[k].probe for k in kinds if BUSES[k].probe_first))
    rest = list(dict.fromkeys(BUSES[k].probe for k in kinds if not BUSES[k].probe_first))
    try:
        found = None
        if first:  # before anything else: see firmware_protocol/buses/probe.py
            with open_serial(dev, baud or 115_200) as ser:
                found = probe_buses(ser, first, [baud] if baud else None)
        if found is None and bus in (None, "hil"):
            info = probe(dev, baud or 1_000_000)
            if info is not None:
                return f"hil board: {info.kind_name} fw {info.firmware}, {info.n_joints} joints, uid {info.uid}", True
        if found is None and rest and bus != "hil":
            with open_serial(dev, baud or 1_000_000) as ser:
                found = probe_buses(ser, rest, [baud] if baud else None, full=bool(bus and baud))
    except DeviceError as e:
        return e.strerror or str(e), False
    if found is not None:
        return found.text() + _kits(found), True
    asked = "a hil board" if bus == "hil" else (bus or "a hil board or any servo bus")
    rate = f"{baud} baud" if baud else "the usual baud rates"
    return (f"no answer from {asked} at {rate} (not powered, another baud rate — try --baud — or servos with "
            "their status return switched off)"), False


def _kits(found) -> str:
    """The shipped kits these servos are (ids and models), said after them."""
    from hil.board_config import kits_answering

    if not found.servos:
        return ""
    kits = kits_answering(found.bus, {s.servo_id: s.model_name for s in found.servos})
    return f"; looks like: {kits}" if kits else ""


def run(args) -> int:
    import serial.tools.list_ports

    from firmware_protocol.buses import BUSES
    from firmware_protocol.serial_port import list_ports
    from hil.errors import InputError
    from hil.inputs import number

    if args.baud is not None:
        number(args.baud, "--baud", 300, 20_000_000, "baud")
    if args.bus is not None and args.bus != "hil" and args.bus not in BUSES:
        raise InputError(f"--bus {args.bus!r}: buses are hil, {', '.join(BUSES)}")
    # ports named on the command line: those alone; else every port the OS lists
    ports = list(args.extra) if args.extra else [p.device for p in list_ports()]
    if not ports:
        print("no serial ports found. Plug the board in (USB), check `dmesg | tail`, or use `hil run --dry-run`.")
        return 0
    infos = {p.device: p for p in serial.tools.list_ports.comports()}
    silent = []
    for dev in ports:
        p = infos.get(dev)
        vidpid = f"{p.vid:04x}:{p.pid:04x}" if p is not None and p.vid is not None else "----:----"
        ser = f"SER={p.serial_number}" if p is not None and p.serial_number else "SER=-"
        desc = p.description if p is not None and p.description not in (None, "n/a") else ""
        line = f"{dev:<22} {vidpid}  {ser:<20} {desc!r:<28}"
        if args.probe:
            text, answered = probe_port(dev, args.baud, args.bus)
            line += f" → {text}"
            if not answered:
                silent.append(dev)
        elif args.extra and not os.path.exists(dev):
            line += " → no such port"
            silent.append(dev)
        print(line, flush=True)
    if silent and args.extra:
        # ports the user named: a script asking "is my robot there?" gets its answer in the exit code
        print(f"nothing answered on {', '.join(silent)}", file=sys.stderr)
        return 1
    return 0
