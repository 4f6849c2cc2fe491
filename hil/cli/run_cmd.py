"""`hil run`: the real-time loop on a board or on the built-in emulator."""

from __future__ import annotations

from firmware_protocol.buses import FIRST_BUS
from hil.cli.common import (ROBOT_HELP, add_bus_options, add_command, add_compensation_option, add_emulator_option,
                            add_pace_options, add_record_options, servo_for, speed_of)
from hil.cli.running import twin_beside_a_run
from hil.errors import InputError


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
    g = s.add_mutually_exclusive_group()
    g.add_argument("--port", help="serial port or pyserial URL of the board (see `hil ports`)")
    g.add_argument("--dry-run", action="store_true", help="start the board emulator on a pty and use it")
    s.add_argument("--rate", type=float, help="loop rate in Hz, 10 … 1000 (default: 500 PUMA, 200 humanoid)")
    s.add_argument("--duration", type=float, help="stop after this many seconds of the control loop, counted from its "
                                                          "first cycle (default: run until stopped)")
    s.add_argument("--headless", action="store_true", help="no twin window; print a live status line")
    s.add_argument("--shadow", action="store_true",
                   help="a shadow twin: the robot in physics (MuJoCo) driven with the same commands, beside the "
                        "run; the residual measured − predicted per joint in the twin and the run's lines (with "
                        "--record, FILE.shadow.npy), flagged where it points to an offset, a reversed joint, "
                        "backlash or a stall (pip install -e '.[physics]')")
    s.add_argument("--view", choices=("front", "side", "top", "iso"),
                   help="the twin's camera: front (from +x, y to the right), side (from −y, x to the right), top (down z) — "
                        "drawn as orthographic views — or iso; the robot fitted in it (keys: F fits again, R resets)")
    add_record_options(s)
    s.add_argument("--stats-json", metavar="FILE", help="write timing statistics to FILE at exit")
    s.add_argument("--motion", help="hold (default; jogs from the twin or `hil ctl jog` are followed with any "
                                    "motion), demo, a motion file (.toml/.json, see `hil play`) or a trajectory .npz "
                                    "(t, q); started by Start in the twin, or by --enable")
    s.add_argument("--enable", action="store_true",
                   help="enable the board at start and start the motion once ramped in (once; otherwise nothing "
                        "moves until you enable in the twin or with `hil ctl enable`)")
    s.add_argument("--exit-when-done", action="store_true",
                   help="stop when the motion is finished (a motion file or trajectory: hold and demo never "
                        "finish); headless, also (exit code 1) when it can no longer finish (fault, e-stop, link "
                        "lost, held more than 3 s)")
    s.add_argument("--no-realtime", action="store_true", help="do not ask for SCHED_FIFO and CPU pinning")
    s.add_argument("--allow-cpu-idle", action="store_true",
                   help="let the CPUs enter idle states between cycles (saves power; each wake-up then pays the "
                        "idle state's exit latency; default: kept awake where permitted)")
    s.add_argument("--spin-us", type=float, default=None,
                   help="busy-wait this long before each deadline instead of sleeping (default 500; less saves "
                        "CPU, more absorbs late wake-ups)")
    s.add_argument("--port-io", choices=("process", "thread", "inline"), default=None,
                   help="where the serial port's reads and writes run: a process of their own (default: the loop "
                        "shares no GIL with them), a thread of the loop's process, or the loop itself")
    s.add_argument("--calibration", metavar="FILE", help="calibration file (default: the board's own, by id)")
    add_compensation_option(s)
    add_pace_options(s)
    add_bus_options(s)
    add_emulator_option(s)
    s.add_argument("--fault", action="append", help="dry-run only: inject emulator faults (see `hil emulate`)")
    z = s.add_argument_group("Zenoh (pip install -e '.[zenoh]'): the run seen from other machines")
    z.add_argument("--zenoh", action="store_true",
                   help="start a bridge process that publishes the loop's state under hil/<board id>/… (read-only: "
                        "remote e-stop only); `hil twin --zenoh` and `hil robots --zenoh` elsewhere")
    z.add_argument("--zenoh-config", metavar="FILE", help="Zenoh's own config file (JSON5: mode, endpoints, TLS, "
                                                          "access control); default: peer mode, multicast scouting")
    z.add_argument("--zenoh-rate", type=float, default=100.0, help="joint states published per second")
    z.add_argument("--zenoh-control", action="store_true",
                   help="accept remote jog, enable, start … too; needs --zenoh-config with access control or TLS")
    s.set_defaults(func=run)


def run(args) -> int:
    from hil import robots
    from hil.runtime import supervisor
    from hil.runtime.motion_sources import make_motion

    req = supervisor.RunRequest(
        robot=args.robot, port=args.port, dry_run=args.dry_run, rate_hz=args.rate, duration_s=args.duration,
        headless=args.headless, record=args.record, record_errors=args.on_record_error, stats_json=args.stats_json,
        motion=args.motion,
        enable=args.enable, exit_when_done=args.exit_when_done, realtime=not args.no_realtime,
        keep_cpu_awake=not args.allow_cpu_idle, spin_us=args.spin_us, port_io=args.port_io,
        calibration=args.calibration, faults=tuple(args.fault or ()), bus=args.bus, board_config=args.board_config,
        emulator=args.emulator, physics=args.physics, compensate=not args.no_compensation,
        stabilise=not args.no_stabiliser, zenoh=args.zenoh, zenoh_config=args.zenoh_config, zenoh_rate_hz=args.zenoh_rate,
        zenoh_control=args.zenoh_control, speed=speed_of(args), strict=args.strict, view=args.view,
        shadow=args.shadow, watchdog_ms=args.watchdog_ms, bring_in=args.bring_in)
    model = robots.load(args.robot)
    supervisor.check(req, model, supervisor.bus_config(req, model))
    if args.exit_when_done and args.duration is None and (args.motion or "hold") in ("hold", "jog", "demo"):
        raise InputError(f"--exit-when-done: the motion {args.motion or 'hold'!r} never finishes (it runs until "
                         "stopped), so the run would not end: give --duration S, or a motion file or trajectory")
    if args.motion:
        # a bad motion file is refused before anything starts
        motion = make_motion(args.motion, model, servo_for(args, model), not args.no_compensation, speed_of(args),
                             args.strict)
        if getattr(motion, "note", ""):
            print(f"{args.motion}: {motion.note}")
        if getattr(motion, "torques", None) is not None:
            print(f"{args.motion}: {motion.torques.summary()}")
    return supervisor.run(req, twin=twin_beside_a_run(), bridge=_zenoh_bridge() if args.zenoh else None)


def _zenoh_bridge():
    from hil.remote.zenoh_bridge import main   # Zenoh, an optional extra, only when --zenoh asks for it

    return main
