"""`hil rt-check`: what this machine (and adapter) give the loop."""

from __future__ import annotations

import json
import math

from hil.cli.common import add_command
from hil.errors import InputError
from hil.inputs import writable_file


def register(sub) -> None:
    s = add_command(sub, "rt-check", "measure what this machine gives the real-time loop (before connecting a robot)",
                    "Runs the loop's timing skeleton (its scheduling request, no work) and reports jitter, missed "
                    "deadlines by cause and what to change; with --port or --dry-run also the command → STATE "
                    "round trip through the adapter (nothing moves). Exit code 0 when the goal is met.",
                    ["hil rt-check --rate 1000", "hil rt-check --rate 500 --port /dev/ttyUSB0 --json rt.json"])
    s.add_argument("--rate", type=float, default=1000.0, help="loop rate to check, Hz")
    s.add_argument("--seconds", type=float, default=5.0, help="how long to measure, s")
    s.add_argument("--no-realtime", action="store_true", help="as `hil run --no-realtime`")
    s.add_argument("--allow-cpu-idle", action="store_true", help="as `hil run --allow-cpu-idle`")
    s.add_argument("--json", metavar="FILE", help="also write the findings to FILE")
    g = s.add_mutually_exclusive_group()
    g.add_argument("--port", help="also time command → STATE round trips with the board on this port (nothing moves)")
    g.add_argument("--dry-run", action="store_true", help="time them with the built-in emulator (--robot) instead")
    s.add_argument("--robot", default="puma560", help="the emulator's robot for --dry-run")
    s.set_defaults(func=run)


def run(args) -> int:
    from hil import emulator_launch, robots
    from hil.runtime import rtcheck

    if not (math.isfinite(args.rate) and 1.0 <= args.rate <= 10_000.0):
        raise InputError(f"--rate {args.rate:g} is outside 1 … 10000 Hz")
    if not (math.isfinite(args.seconds) and 0.1 <= args.seconds <= 3600.0):
        raise InputError(f"--seconds {args.seconds:g} is outside 0.1 … 3600 s")
    if args.json:  # refused before measuring, not after
        try:
            writable_file(args.json, "--json")
        except InputError:
            raise InputError(f"--json {args.json}: cannot write there (no such folder, or not writable)") from None
    facts = rtcheck.machine_facts()
    port = None
    if args.port or args.dry_run:  # first: a port that cannot be opened fails before the long part
        emu = emulator_launch.start_emulator(robots.load(args.robot), baud=None) if args.dry_run else None
        try:
            port = rtcheck.measure_port(emu.path if emu is not None else args.port, args.rate)
        finally:
            if emu is not None:
                emu.stop()
    print(f"measuring the loop's timing floor for {args.seconds:g} s at {args.rate:g} Hz …", flush=True)
    floor = rtcheck.measure_floor(args.rate, args.seconds, realtime=not args.no_realtime,
                                  keep_cpu_awake=not args.allow_cpu_idle)
    print(rtcheck.report(facts, floor, port))
    ok = rtcheck.meets_goal(floor, port)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": facts, "floor": floor, "port": port, "meets_goal": ok,
                       "advice": rtcheck.advice(facts, floor)}, f, indent=1)
    return 0 if ok else 1
