"""`hil run`: the real-time loop on a board or on the built-in emulator."""

from __future__ import annotations

import dataclasses

from firmware_protocol.buses import FIRST_BUS
from hil.cli.common import ROBOT_HELP, add_command, dry_run_bus, servo_for, speed_of
from hil.cli.running import twin_beside_a_run
from hil.errors import InputError
from hil.options import add_options, check_options, from_args
from hil.runtime.run_request import RunRequest


def register(sub) -> None:
    s = add_command(sub, "run", "run the real-time loop on a board (--port) or the built-in emulator (--dry-run)",
                    "Connects, opens the twin (or prints a status line with --headless) and runs until stopped. "
                    "Nothing moves until you enable (the twin's Enable…, `hil ctl enable`, or --enable). "
                    "The status line: time | board state | lifecycle state and activity, motion progress | loop "
                    "rate, period jitter | cycle time | missed deadlines, stale states | tracking error "
                    "(see docs/lifecycle.md for the states).",
                    ["hil run --robot puma560 --dry-run --headless --duration 10 --enable --motion demo",
                     "hil run --robot humanoid17 --port /dev/ttyACM0 --record run.npy --stats-json stats.json",
                     "hil run --robot humanoid17 --dry-run --enable --motion examples/wave.toml --exit-when-done",
                     f"hil run --robot humanoid17 --dry-run --bus {FIRST_BUS} --headless --duration 5",
                     f"hil run --robot humanoid17 --port /dev/ttyUSB0 --bus {FIRST_BUS} --board-config my_kit.toml"])
    s.add_argument("--robot", required=True, help=ROBOT_HELP)
    add_options(s.add_mutually_exclusive_group(), RunRequest, ("port", "dry_run"))
    add_options(s, RunRequest, ("rate_hz", "duration_s", "headless", "shadow", "view", "record", "record_errors",
                                "stats_json", "motion", "enable", "exit_when_done", "realtime", "keep_cpu_awake",
                                "spin_us", "port_io", "calibration", "stabilise", "compensate", "speed", "strict",
                                "bus", "board_config", "watchdog_ms", "bring_in", "emulator", "physics", "faults"))
    add_options(s.add_argument_group("Zenoh (pip install -e '.[zenoh]'): the run seen from other machines"),
                RunRequest, ("zenoh", "zenoh_config", "zenoh_rate_hz", "zenoh_control"))
    s.set_defaults(func=run, check_before_loading=check_before_loading)


def check_before_loading(args) -> RunRequest:
    """The run's options, checked where they need no robot model."""
    req = from_args(RunRequest, args, speed=speed_of(args))
    check_options(req)   # each value against what its option declares (again with the robot: supervisor.check)
    if req.exit_when_done and req.duration_s is None and (req.motion or "hold") in ("hold", "jog", "demo"):
        raise InputError(f"--exit-when-done: the motion {req.motion or 'hold'!r} never finishes (it runs until "
                         "stopped), so the run would not end: give --duration S, or a motion file or trajectory")
    return req


def run(args) -> int:
    from hil import robots
    from hil.runtime import supervisor
    from hil.runtime.motion_sources import make_motion

    req = check_before_loading(args)
    model = robots.load(args.robot)
    req = dataclasses.replace(req, bus=dry_run_bus(model, req.dry_run, req.bus, req.board_config, "run"))
    supervisor.check(req, model, supervisor.bus_config(req, model))
    if req.motion:
        # a bad motion file is refused before anything starts
        motion = make_motion(req.motion, model, servo_for(args, model), req.compensate, req.speed, req.strict)
        if getattr(motion, "note", ""):
            print(f"{req.motion}: {motion.note}")
        if getattr(motion, "torques", None) is not None:
            print(f"{req.motion}: {motion.torques.summary()}")
    return supervisor.run(req, twin=twin_beside_a_run(), bridge=_zenoh_bridge() if req.zenoh else None,
                          model=model)


def _zenoh_bridge():
    from hil.remote.zenoh_bridge import main   # Zenoh, an optional extra, only when --zenoh asks for it

    return main
