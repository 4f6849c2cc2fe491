"""`hil ports`: serial ports, and which board answers on each."""

from __future__ import annotations

from hil.cli.common import add_command


def register(sub) -> None:
    s = add_command(sub, "ports", "list serial ports (VID:PID, serial number); --probe asks each for a board",
                    "Lists the ports the OS knows (USB adapters, ACM devices, built-in UARTs) and any given "
                    "on the command line (a pty from `hil emulate`). --probe sends HELLO and waits 0.5 s for "
                    "an answer; nothing else is written.",
                    ["hil ports", "hil ports --probe", "hil ports --probe /dev/pts/3"])
    s.add_argument("--probe", action="store_true", help="handshake on each port and say which board answers")
    s.add_argument("--baud", type=int, default=1_000_000, help="baud rate to probe at")
    s.add_argument("extra", nargs="*", metavar="PORT", help="more ports to list and probe (e.g. a pty from `hil emulate`)")
    s.set_defaults(func=run)


def run(args) -> int:
    import serial.tools.list_ports

    from firmware_protocol.errors import DeviceError
    from firmware_protocol.link import list_ports, probe
    from hil.inputs import number

    number(args.baud, "--baud", 300, 20_000_000)
    ports = [p.device for p in list_ports()] + list(args.extra or [])
    if not ports:
        print("no serial ports found. Plug the board in (USB), check `dmesg | tail`, or use `hil run --dry-run`.")
        return 0
    infos = {p.device: p for p in serial.tools.list_ports.comports()}
    for dev in ports:
        p = infos.get(dev)
        vidpid = f"{p.vid:04x}:{p.pid:04x}" if p is not None and p.vid is not None else "----:----"
        ser = f"SER={p.serial_number}" if p is not None and p.serial_number else "SER=-"
        desc = p.description if p is not None and p.description not in (None, "n/a") else ""
        line = f"{dev:<22} {vidpid}  {ser:<20} {desc!r:<28}"
        if args.probe:
            try:
                info = probe(dev, args.baud)
            except DeviceError as e:
                line += f" → {e.strerror or e}"
            else:
                line += (f" → {info.kind_name} fw {info.firmware}, {info.n_joints} joints, uid {info.uid}"
                         if info else f" → no answer to HELLO at {args.baud} baud (not a hil board, another baud "
                                      "rate, or not powered)")
        print(line)
    return 0
