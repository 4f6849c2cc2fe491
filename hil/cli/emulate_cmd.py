"""`hil emulate`: a board emulator on a pseudo-terminal."""

from __future__ import annotations

import os
import sys

from firmware_protocol.buses import BUSES, FIRST_BUS
from hil.cli.common import ROBOT_HELP, add_command, add_run_options
from hil.errors import InputError


ECHOING_BUS = next((k for k, b in BUSES.items() if b.echoes), FIRST_BUS)


def register(sub) -> None:
    s = add_command(sub, "emulate", "run a board emulator on a pseudo-terminal (prints its path)",
                    "The same firmware model `hil run --dry-run` uses, for connecting to it by hand "
                    "(`hil run --port PTY`, `hil calibrate --port PTY`), with hidden calibration errors and "
                    "faults to inject. Runs until Ctrl-C.",
                    ["hil emulate --robot humanoid17 --offsets-deg l_knee=1.7 --reverse r_knee",
                     "hil emulate --robot puma560 --fault drop:0.01 --latency-ms 16",
                     f"hil emulate --robot humanoid17 --bus {FIRST_BUS} --fault overload:3@5",
                     f"hil emulate --robot humanoid17 --bus {ECHOING_BUS} --echo",
                     "hil emulate --robot puma560 --impl c   # the C firmware (make host on first use)",
                     "hil emulate --robot humanoid17 --impl qemu   # its ARM image on QEMU's STM32F405"])
    s.add_argument("--robot", required=True, help=ROBOT_HELP)
    s.add_argument("--offsets-deg", help="hidden zero offsets: one per joint, or joint=deg pairs")
    s.add_argument("--reverse", help="hidden reversed joints: names or indices, comma-separated")
    s.add_argument("--fault", action="append",
                   help="fault injection, repeatable: drop:P corrupt:P garbage:P (probabilities), delay:MS, "
                        "stall:S@T, mute:S@T, disconnect@T, reboot@T, badstate@T (T seconds after start); "
                        "with --bus: silent:ID[@T[-T2]], overload:ID@T, overheat:ID@T, voltage:ID@T, blocked:ID@T "
                        "(the servo meets something it cannot move), disconnect@T")
    add_run_options(s, "bus", "board_config", "watchdog_ms", "bring_in")
    s.add_argument("--impl", choices=("python", "c", "qemu"), default="python",
                   help="the Python board model, the C reference firmware's host build (built on first use), or its "
                        "ARM image on QEMU's STM32F405 (make -C firmware_protocol/c qemu; built on first use)")
    s.add_argument("--echo", action="store_true", help="with --bus: read every request back first, as Kondo's "
                                                       "adapters and one-wire buses do (default: the config's echo)")
    s.add_argument("--return-delay-us", type=float, help="with --bus: each servo waits this long before replying "
                                                         "(Dynamixel's factory setting is 500)")
    s.add_argument("--uid", help="board unique id, 24 hex digits (default: random)")
    s.add_argument("--link", help="also create this symlink to the pty (a stable name, like udev's by-id)")
    s.add_argument("--baud", type=float, help="pace the emulated wire at this baud, 300 … 20000000 (default 1000000)")
    s.add_argument("--latency-ms", type=float, help="extra latency per frame (16 emulates an FTDI default; default 0)")
    s.add_argument("--noise-deg", type=float, help="measurement noise, 1 sigma, degrees (default: the board's own)")
    s.add_argument("--factory", action="store_true",
                   help="with --bus: the servos as they leave the factory (their whole turn as position limits, no "
                        "homing offset, their own return delay): what LeRobot's motor set-up and calibration start from")
    s.add_argument("--eeprom", metavar="FILE", help="with --bus: keep the servos' EEPROM in FILE across runs (a run "
                                                   "after another is a power cycle)")
    s.add_argument("--hand", nargs="?", const="sweep", action="append", metavar="ID:A:B@T0-T1[*]",
                   help="with --bus: a hand turns servos whose torque is off — alone, every joint through its range "
                        "and back, again and again (LeRobot's interactive calibration can then be done here); or "
                        "one servo from tick A to B between T0 and T1 s after the host first spoke to it (* repeats)")
    s.add_argument("--physics", action="store_true",
                   help="the robot in rigid-body physics behind the emulator (MuJoCo; pip install -e '.[physics]')")
    s.set_defaults(func=run)


def run(args) -> int:
    from hil import emulator_launch, robots

    model = robots.load(args.robot)
    if args.bring_in:
        raise InputError("--bring-in belongs to a run (hil run, play, walk, path): an emulator brings nothing in")
    if args.bus or args.board_config:
        return _bus(args, model)
    for flag in ("factory", "eeprom", "hand"):
        if getattr(args, flag):
            raise InputError(f"--{flag} is an option of a servo bus's emulator (--bus), not of the hil board's")
    offsets = emulator_launch.parse_joint_values(model, args.offsets_deg, "--offsets-deg")
    reverse = emulator_launch.parse_joint_list(model, args.reverse)
    emulator_launch.check_emulator_options(args.uid, args.link, args.baud, args.latency_ms, args.noise_deg)
    for spec in args.fault or ():
        emulator_launch.check_fault(spec)
    watchdog = None
    if args.watchdog_ms is not None:   # the board's command watchdog (CMD_TIMEOUT_MS), as hil run sets it
        from firmware_protocol.messages import CMD_TIMEOUT_MS_MAX, CMD_TIMEOUT_MS_MIN
        from hil.inputs import number

        watchdog = round(number(args.watchdog_ms, "--watchdog-ms", CMD_TIMEOUT_MS_MIN, CMD_TIMEOUT_MS_MAX, "ms"))
    argv = emulator_launch.emulator_argv(model, impl=args.impl, physics=args.physics, offsets_deg=offsets,
                                         reverse=reverse, faults=args.fault or (), uid=args.uid, link=args.link,
                                         baud=args.baud, latency_ms=args.latency_ms, noise_deg=args.noise_deg,
                                         watchdog_ms=watchdog)
    if reverse:
        print(f"hidden reversed joints: {', '.join(model.joint_names[j] for j in reverse)}", file=sys.stderr)
    _become_the_emulator(argv)   # it prints the pty path and runs until Ctrl-C
    return 0  # not reached


def _bus(args, model) -> int:
    """Become the servo bus emulator for the config (shipped for --bus, or --board-config)."""
    from hil import emulator_launch
    from hil.inputs import number
    from hil.runtime.supervisor import RunRequest, bus_config

    config = bus_config(RunRequest(robot=model.spec, bus=args.bus, board_config=args.board_config), model)
    if args.impl != "python":
        raise InputError(f"--impl {args.impl} is the hil board's firmware; a servo bus's emulator has one "
                         "implementation (leave out --impl)")
    for flag in ("offsets_deg", "reverse", "uid", "latency_ms", "noise_deg"):
        if getattr(args, flag) is not None:
            raise InputError(f"--{flag.replace('_', '-')} is an option of the hil board emulator, not of --bus")
    for spec in args.fault or ():
        emulator_launch.check_bus_fault(spec)
    if args.eeprom is not None:
        _check_eeprom(args.eeprom)
    if args.return_delay_us is not None:
        number(args.return_delay_us, "--return-delay-us", 0, 508, "µs")
    if args.baud is not None:
        number(args.baud, "--baud", 300, 2e7, "baud")
    emulator_launch.check_emulator_options(None, args.link, None, None, None)
    hands = [h for spec in args.hand or () for h in (emulator_launch.sweeping_hands(config) if spec == "sweep"
                                                      else [emulator_launch.check_hand(spec)])]
    argv = emulator_launch.bus_emulator_argv(config, model, faults=args.fault or (), echo=args.echo or None,
                                             baud=args.baud, return_delay_us=args.return_delay_us, link=args.link,
                                             physics=args.physics, hands=hands, factory=args.factory,
                                             eeprom=args.eeprom)
    print(f"servo bus config: {config.source}", file=sys.stderr)
    _become_the_emulator(argv)   # it prints the pty path (stdout) and its bus, servos and baud (stderr)
    return 0  # not reached


def _become_the_emulator(argv: list[str]) -> None:
    """Exec the emulator, scheduled as the processor it stands in for (as `--dry-run` starts it):
    at an ordinary share beside a busy machine's other jobs it stops answering, as a failing board
    would, and the host rightly faults."""
    from firmware_protocol.board_cpu import as_a_board_cpu

    as_a_board_cpu(0)
    sys.stdout.flush()
    os.execv(argv[0], argv)


def _check_eeprom(path: str) -> None:
    """--eeprom: a file the emulator wrote, or a new one it can write; never another file, which
    its first save would overwrite."""
    from firmware_protocol.buses.emulator import Eeprom
    from hil.inputs import writable_file

    try:
        Eeprom.read(path)
    except ValueError as e:
        raise InputError(f"--eeprom {e}") from None
    writable_file(path, "--eeprom")
