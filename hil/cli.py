"""The `hil` command line. Degrees and millimetres at this boundary, SI inside.

Subcommands import what they need lazily so that `hil --version` and `hil --help` stay fast.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
from typing import Sequence

import hil
import hil.errors
from hil.inputs import number, read_text, writable_file


def _rpy_deg(R) -> tuple[float, float, float]:
    """Roll, pitch, yaw (degrees) of R = Rz(yaw) Ry(pitch) Rx(roll)."""
    pitch = math.atan2(-R[2][0], math.hypot(R[0][0], R[1][0]))
    if abs(math.cos(pitch)) < 1e-9:  # gimbal lock: put everything into yaw
        roll = 0.0
        yaw = math.atan2(-R[0][1], R[1][1])
    else:
        roll = math.atan2(R[2][1], R[2][2])
        yaw = math.atan2(R[1][0], R[0][0])
    return math.degrees(roll), math.degrees(pitch), math.degrees(yaw)


def cmd_robots(args: argparse.Namespace) -> int:
    from hil import robots

    names = [args.robot] if args.robot else robots.available()
    for name in names:
        m = robots.load(name)
        print(f"{m.name}: {m.meta.get('description', '')}")
        print(f"  {m.n} joints, base frame {m.base_frame!r}, tool frame {m.tool_frame!r}, "
              f"mass {m.total_mass:.2f} kg")
        print(f"  {'#':>3} {'joint':<18} {'min (deg)':>10} {'max (deg)':>10} {'home':>8} {'vmax (deg/s)':>13}")
        for i, j in enumerate(m.joints):
            print(f"  {i:>3} {j.name:<18} {math.degrees(j.lower):>10.1f} {math.degrees(j.upper):>10.1f} "
                  f"{math.degrees(m.home[i]):>8.2f} {math.degrees(j.velocity_limit):>13.0f}")
        print(f"  frames: {', '.join(m.frame_names)}")
        print(f"  poses: {', '.join(m.poses)}")
    return 0


def cmd_fk(args: argparse.Namespace) -> int:
    import numpy as np

    from hil import robots

    m = robots.load(args.robot)
    if args.pose:
        if args.pose not in m.poses:
            raise hil.errors.InputError(f"{m.name}: unknown pose {args.pose!r}; poses: {', '.join(m.poses)}")
        q = m.poses[args.pose]
    elif args.q_deg is not None:
        if len(args.q_deg) != m.n:
            raise hil.errors.InputError(
                f"{m.name} has {m.n} joints ({', '.join(m.joint_names)}); --q-deg got {len(args.q_deg)} values")
        q = np.radians(np.asarray(args.q_deg, dtype=float))
    else:
        q = m.home
    frame = args.frame or m.tool_frame
    T = m.fk_frame(q, frame)
    roll, pitch, yaw = _rpy_deg(T[:3, :3])
    print(f"{m.name} {frame} in {m.base_frame} at q = [{', '.join(f'{math.degrees(v):.3f}' for v in q)}] deg")
    print(f"  position (mm): x {T[0, 3] * 1e3:.3f}  y {T[1, 3] * 1e3:.3f}  z {T[2, 3] * 1e3:.3f}")
    print(f"  rpy (deg):     roll {roll:.3f}  pitch {pitch:.3f}  yaw {yaw:.3f}")
    print("  T (m):")
    for r in range(4):
        print("    [" + "  ".join(f"{T[r, c]:+.6f}" for c in range(4)) + "]")
    bad = m.limit_violations(q)
    if bad:
        print("  warning: outside joint limits: " + "; ".join(bad))
    return 0


def cmd_emulate(args: argparse.Namespace) -> int:

    from hil import emulation, robots

    model = robots.load(args.robot)
    offsets = emulation.parse_joint_values(model, args.offsets_deg, "--offsets-deg")
    reverse = emulation.parse_joint_list(model, args.reverse)
    emulation.check_emulator_options(args.uid, args.link, args.baud, args.latency_ms, args.noise_deg)
    for spec in args.fault or ():
        emulation.check_fault(spec)
    argv = emulation.emulator_argv(model, offsets_deg=offsets, reverse=reverse, faults=args.fault or (), uid=args.uid,
                                   link=args.link, baud=args.baud, latency_ms=args.latency_ms,
                                   noise_deg=args.noise_deg)
    if reverse:
        print(f"hidden reversed joints: {', '.join(model.joint_names[j] for j in reverse)}", file=sys.stderr)
    sys.stdout.flush()
    # become the emulator: it prints the pty path and runs until Ctrl-C
    os.execv(argv[0], argv)
    return 0  # not reached


def cmd_ports(args: argparse.Namespace) -> int:
    from firmware_protocol.errors import DeviceError
    from firmware_protocol.link import list_ports, probe

    ports = [p.device for p in list_ports()] + list(args.extra or [])
    if not ports:
        print("no serial ports found. Plug the board in (USB), check `dmesg | tail`, or use `hil run --dry-run`.")
        return 0
    from firmware_protocol.link import serial

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


def cmd_rt_check(args: argparse.Namespace) -> int:
    from hil.runtime import rtcheck

    if not 1.0 <= args.rate <= 10_000.0:
        raise hil.errors.InputError(f"--rate {args.rate:g} is outside 1 … 10000 Hz")
    if not 0.1 <= args.seconds <= 3600.0:
        raise hil.errors.InputError(f"--seconds {args.seconds:g} is outside 0.1 … 3600 s")
    if args.json:  # refused before measuring, not after
        folder = os.path.dirname(os.path.abspath(args.json))
        if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
            raise hil.errors.InputError(f"--json {args.json}: cannot write there (no such folder, or not writable)")
    facts = rtcheck.machine_facts()
    port = None
    if args.port or args.dry_run:  # first: a port that cannot be opened fails before the long part
        emu = None
        if args.dry_run:
            from hil import emulation, robots

            emu = emulation.start_emulator(robots.load(args.robot), baud=None)
        try:
            port = rtcheck.measure_port(emu.path if emu is not None else args.port, args.rate)
        finally:
            if emu is not None:
                emu.stop()
    print(f"measuring the loop's timing floor for {args.seconds:g} s at {args.rate:g} Hz …", flush=True)
    floor = rtcheck.measure_floor(args.rate, args.seconds, realtime=not args.no_realtime,
                                  keep_cpu_awake=not args.allow_cpu_idle)
    print(rtcheck.report(facts, floor, port))
    ok = rtcheck.meets_goal(floor)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": facts, "floor": floor, "port": port, "meets_goal": ok,
                       "advice": rtcheck.advice(facts, floor)}, f, indent=1)
    return 0 if ok else 1


def cmd_run(args: argparse.Namespace) -> int:
    from hil.runtime import supervisor

    if not args.dry_run and not args.port:
        raise hil.errors.InputError("hil run needs --port PORT (see `hil ports`) or --dry-run")
    if args.motion:
        from hil import robots
        from hil.runtime.motion import make_motion

        make_motion(args.motion, robots.load(args.robot))  # a bad motion file is refused before anything starts
    return supervisor.run(args)


def cmd_warmup(args: argparse.Namespace) -> int:
    from hil.warmup import cache_is_cold, compile_all

    cold = cache_is_cold()
    print("compiling every kernel (about 1–2 minutes the first time) …" if cold else "kernels already compiled; "
          "checking each loads …", flush=True)
    seconds = compile_all(lambda text: print(f"  {text}", flush=True))
    print(f"done in {seconds:.1f} s: `hil run` and the planners now start without compiling")
    return 0


def cmd_ctl(args: argparse.Namespace) -> int:
    from firmware_protocol.messages import fault_names
    from hil.runtime.lifecycle import Activity, Mode
    from hil.runtime.shared import BOARD_STATES, LoopClient, describe_loops, progress_text

    if args.action == "list":
        lines = describe_loops()
        print("\n".join(lines) if lines else "no hil loop is running")
        return 0
    client = LoopClient(args.loop)
    try:
        if args.action == "status":
            s = client.snapshot()
            print(f"{client.name}: {Mode(int(s.mode)).name} ({Activity(int(s.activity)).name.lower()}, motion "
                  f"{progress_text(s.motion_progress)}), board {BOARD_STATES.get(int(s.board_state), '?')}, "
                  f"faults {fault_names(int(s.faults))}, t {s.t:.2f} s, cycle {int(s.cycle)}, "
                  f"misses {int(s.misses)}")
            print(f"last event: {s.event}")
            return 0
        {"estop": client.estop, "enable": client.enable, "disable": client.disable,
         "clear-fault": client.clear_fault, "start": client.start_motion, "stop": client.stop_motion,
         "shutdown": client.shutdown}[args.action]()
        print(f"{args.action} sent to {client.name}; `hil ctl status` shows what the loop made of it")
        return 0
    finally:
        client.close()


def cmd_replay(args: argparse.Namespace) -> int:
    from hil.runtime.replay import replay

    return replay(args.file, args.speed, args.headless, args.loop)


def cmd_calibrate(args: argparse.Namespace) -> int:
    from calibration.cli import main as cal_main

    return cal_main(args)


def cmd_twin(args: argparse.Namespace) -> int:
    from twin.cli import main as twin_main

    return twin_main(args)


def _floats(text: str, n: int, what: str) -> list[float]:
    try:
        vals = [float(v) for v in text.replace(" ", ",").split(",") if v]
    except ValueError:
        raise hil.errors.InputError(f"{what}: expected {n} comma-separated numbers, got {text!r}") from None
    if len(vals) != n:
        raise hil.errors.InputError(f"{what}: expected {n} comma-separated numbers, got {len(vals)}")
    return vals


def cmd_path(args: argparse.Namespace) -> int:

    import numpy as np

    from hil import robots
    from hil.motion import gcode, path

    model = robots.load(args.robot)
    if "dh" not in model.meta:
        raise hil.errors.InputError(f"hil path drives the PUMA 560; {model.name} is not a PUMA")
    prog = gcode.parse(read_text(args.file, "G-code program"), args.file)
    T_place = path.placement(*_floats(args.place, 6, "--place x,y,z,roll,pitch,yaw (mm, deg)"))
    tool = np.eye(4)
    tool[:3, 3] = np.array(_floats(args.tool_mm, 3, "--tool-mm x,y,z")) * 1e-3
    rate = args.rate or float(model.meta.get("default_rate_hz", 500))
    plan = path.plan_path(model, prog, T_place, tool, args.chord_mm, rate)
    print(plan.summary())
    out = _trajectory_out(args, "hil-path-", "traj.npz")
    if out:
        plan.save(out)
        print(f"trajectory: {out} (t, q, p_prog, line)")
    if not (args.dry_run or args.port):
        return 0
    return _run_motion_file(args, model, out, rate=rate, path_file=out)


def _trajectory_out(args: argparse.Namespace, prefix: str, filename: str) -> str | None:
    """Where a planned trajectory is saved: --out, else a fresh temporary file when it is about to
    run on a robot (the loop process reads it from disk), else nowhere."""
    if args.out is None and (args.dry_run or args.port):
        return os.path.join(tempfile.mkdtemp(prefix=prefix), filename)
    return args.out


def _run_motion_file(args: argparse.Namespace, model, path: str, rate: float | None = None,
                     path_file: str | None = None) -> int:
    """Run a planned motion through the loop: enable, ramp in, play it, stop when it is done."""
    from hil.runtime import supervisor

    run_args = argparse.Namespace(robot=model.name, dry_run=args.dry_run, port=args.port,
                                  rate=rate if rate is not None else args.rate, duration=None,
                                  headless=args.headless, record=args.record, stats_json=args.stats_json,
                                  motion=path, enable=True, exit_when_done=True, no_realtime=False,
                                  calibration=None, fault=None, path_file=path_file)
    return supervisor.run(run_args)


def cmd_walk(args: argparse.Namespace) -> int:

    import numpy as np

    from hil import robots
    from hil.motion import keyframes, walking

    model = robots.load(args.robot)
    if "l_sole" not in model.frame_names:
        raise hil.errors.InputError(f"hil walk needs a humanoid; {model.name} has no soles")
    rate = args.rate or float(model.meta.get("default_rate_hz", 200))
    params = walking.WalkParams(steps=args.steps, stride=args.stride, width=args.width, side=args.side,
                                turn_deg=args.turn, period=args.period, lift=args.lift,
                                knee_stretched=args.knee_stretched, rate_hz=rate)
    res = walking.generate(model, params)
    print(res.summary())
    out = _trajectory_out(args, "hil-walk-", "walk.npz")
    if out:
        res.save(out)
        print(f"walk: {out} (t, q, support, com_w, zmp_w, zmp_ref)")
    if args.motion_out:
        frames = []
        step = 0.03  # the 30 ms frames of paper 000's motion driver
        for tk in np.arange(step, res.t[-1] + 1e-9, step):
            k = int(min(round(tk * rate), len(res.t) - 1))
            sup = {0: "both", 1: "left", 2: "right"}[int(res.support[k])]
            frames.append(keyframes.Keyframe(float(res.t[k]), res.q[k].copy(), sup))
        motion = keyframes.KeyframeMotion(os.path.splitext(os.path.basename(args.motion_out))[0], model.name,
                                          "cubic", frames, res.q[0].copy(), dynamic=True)
        keyframes.save_motion(args.motion_out, motion, model)
        print(f"motion file: {args.motion_out} ({len(frames)} frames of 30 ms)")
    if not (args.dry_run or args.port):
        return 0
    return _run_motion_file(args, model, out)


def cmd_play(args: argparse.Namespace) -> int:
    from hil import robots
    from hil.runtime.motion import make_motion

    model = robots.load(args.robot)
    motion = make_motion(args.file, model)  # validates the file (errors name keyframe and joint)
    from hil.safety import SafetyChecker

    stride = max(1, len(motion.q) // 400)  # ~400 samples are enough to catch a bad pose in a keyframe motion
    checker = SafetyChecker(model)
    bad_row, flags = checker.check_path(motion.q[::stride])
    if bad_row >= 0 and not getattr(motion, "dynamic_balance_checked", False):
        reasons = checker.explain(int(flags[bad_row]), motion.q[bad_row * stride])
        raise hil.errors.UnreachableError(f"{args.file}: refused before any motion: " + "; ".join(reasons))
    print(f"{args.file}: {motion.name}, {motion.duration:.2f} s, {len(motion.q)} samples; checks ok")
    if not (args.dry_run or args.port):
        return 0
    return _run_motion_file(args, model, args.file)


def _add_run_target(s: argparse.ArgumentParser) -> None:
    """Where a planned motion runs (plan only when neither is given) and how the run is reported:
    the options `hil path`, `hil walk` and `hil play` share."""
    g = s.add_mutually_exclusive_group()
    g.add_argument("--dry-run", action="store_true", help="run it on the board emulator")
    g.add_argument("--port", help="run it on the board at this port")
    s.add_argument("--headless", action="store_true", help="no twin window; print a live status line")
    s.add_argument("--record", metavar="FILE", help="record every cycle to FILE (.npy)")
    s.add_argument("--stats-json", metavar="FILE", help="write timing statistics to FILE at exit")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hil", description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--version", action="version", version=f"hil {hil.__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    s = sub.add_parser("robots", help="list robot models, joints and limits (degrees)")
    s.add_argument("--robot", help="only this robot")
    s.set_defaults(func=cmd_robots)

    s = sub.add_parser("fk", help="forward kinematics: print a frame's pose")
    s.add_argument("--robot", required=True, help="puma560 or humanoid17")
    g = s.add_mutually_exclusive_group()
    g.add_argument("--q-deg", type=float, nargs="+", metavar="DEG", help="joint angles in degrees")
    g.add_argument("--pose", help="a named pose (see `hil robots`)")
    s.add_argument("--frame", help="frame name (default: the tool frame)")
    s.set_defaults(func=cmd_fk)

    s = sub.add_parser("emulate", help="run a board emulator on a pseudo-terminal (prints its path)")
    s.add_argument("--robot", required=True, help="puma560 or humanoid17")
    s.add_argument("--offsets-deg", help="hidden zero offsets: one per joint, or joint=deg pairs")
    s.add_argument("--reverse", help="hidden reversed joints: names or indices, comma-separated")
    s.add_argument("--fault", action="append",
                   help="fault injection: drop:P corrupt:P garbage:P delay:MS stall:S@T disconnect@T reboot@T")
    s.add_argument("--uid", help="board unique id (24 hex digits)")
    s.add_argument("--link", help="also create this symlink to the pty (a stable name, like udev's by-id)")
    s.add_argument("--baud", type=float, help="pace the emulated wire at this baud (default 1000000)")
    s.add_argument("--latency-ms", type=float, help="extra latency per frame (16 emulates an FTDI default)")
    s.add_argument("--noise-deg", type=float, help="measurement noise, 1 sigma, degrees")
    s.set_defaults(func=cmd_emulate)

    s = sub.add_parser("run", help="run the real-time loop on a board (--port) or the built-in emulator (--dry-run)")
    s.add_argument("--robot", required=True, help="puma560 or humanoid17")
    g = s.add_mutually_exclusive_group()
    g.add_argument("--port", help="serial port or pyserial URL of the board")
    g.add_argument("--dry-run", action="store_true", help="start the board emulator on a pty and use it")
    s.add_argument("--rate", type=float, help="loop rate in Hz (default: 500 PUMA, 200 humanoid; up to 1000)")
    s.add_argument("--duration", type=float, help="stop after this many seconds")
    s.add_argument("--headless", action="store_true", help="no twin window; print a live status line")
    s.add_argument("--record", metavar="FILE", help="record every cycle to FILE (.npy, numpy.load reads it)")
    s.add_argument("--stats-json", metavar="FILE", help="write timing statistics to FILE at exit")
    s.add_argument("--motion", help="hold (default), jog, demo, or a trajectory .npz (t, q)")
    s.add_argument("--enable", action="store_true",
                   help="enable the board at start (otherwise nothing moves until you enable in the twin)")
    s.add_argument("--exit-when-done", action="store_true", help="stop when the motion is finished")
    s.add_argument("--no-realtime", action="store_true", help="do not ask for SCHED_FIFO and CPU pinning")
    s.add_argument("--allow-cpu-idle", action="store_true",
                   help="let the loop's CPU enter idle states between cycles (saves power; each wake-up "
                        "then pays the idle state's exit latency; default: kept awake where permitted)")
    s.add_argument("--spin-us", type=float, default=None,
                   help="busy-wait this long before each deadline instead of sleeping (default 500; less "
                        "saves CPU, more absorbs late wake-ups)")
    s.add_argument("--port-io", choices=("process", "thread", "inline"), default=None,
                   help="where the serial port's reads and writes run: a process of their own (default: the "
                        "loop shares no GIL with them), a thread of the loop's process, or the loop itself")
    s.add_argument("--calibration", metavar="FILE", help="calibration file (default: the board's own, by id)")
    s.add_argument("--fault", action="append", help="dry-run only: inject emulator faults (see `hil emulate`)")
    s.set_defaults(func=cmd_run)

    s = sub.add_parser("rt-check", help="measure what this machine gives the real-time loop (before connecting a robot)")
    s.add_argument("--rate", type=float, default=1000.0, help="loop rate to check, Hz (default 1000)")
    s.add_argument("--seconds", type=float, default=5.0, help="how long to measure (default 5)")
    s.add_argument("--no-realtime", action="store_true", help="as `hil run --no-realtime`")
    s.add_argument("--allow-cpu-idle", action="store_true", help="as `hil run --allow-cpu-idle`")
    s.add_argument("--json", metavar="FILE", help="also write the findings to FILE")
    g = s.add_mutually_exclusive_group()
    g.add_argument("--port", help="also time command → STATE round trips with the board on this port (nothing moves)")
    g.add_argument("--dry-run", action="store_true", help="time them with the built-in emulator (--robot) instead")
    s.add_argument("--robot", default="puma560", help="the emulator's robot for --dry-run (default puma560)")
    s.set_defaults(func=cmd_rt_check)

    s = sub.add_parser("path", help="plan a G-code contour on the PUMA (and run it: --dry-run or --port)")
    s.add_argument("file", metavar="FILE.nc", help="G-code program (mm or inch, G0 G1 G2 G3)")
    s.add_argument("--robot", default="puma560")
    s.add_argument("--place", default="200,500,-300,0,0,0",
                   help="workpiece frame in the base: x,y,z (mm),roll,pitch,yaw (deg); default 200,500,-300,0,0,0")
    s.add_argument("--tool-mm", default="0,0,150", help="tool tip in the flange frame (mm); default 0,0,150")
    s.add_argument("--chord-mm", type=float, default=0.05, help="largest chord error of the discretisation")
    s.add_argument("--rate", type=float, help="trajectory sample rate = loop rate (Hz)")
    s.add_argument("--out", metavar="TRAJ.npz", help="write t, q, p_prog, line to this file")
    _add_run_target(s)
    s.set_defaults(func=cmd_path)

    s = sub.add_parser("walk", help="plan a walk for the humanoid (ZMP preview control, prioritised IK)")
    s.add_argument("--robot", default="humanoid17")
    s.add_argument("--steps", type=int, default=6)
    s.add_argument("--stride", type=float, default=0.03, help="forward step length (m)")
    s.add_argument("--width", type=float, help="distance between the soles (m); default as at home")
    s.add_argument("--side", type=float, default=0.0, help="sideways step per step (m, + left)")
    s.add_argument("--turn", type=float, default=0.0, help="turn per step (degrees)")
    s.add_argument("--period", type=float, default=0.8, help="time per step (s)")
    s.add_argument("--lift", type=float, default=0.012, help="swing foot clearance (m)")
    s.add_argument("--knee-stretched", action="store_true", help="walk as tall as the legs allow")
    s.add_argument("--rate", type=float, help="sample rate = loop rate (Hz)")
    s.add_argument("--out", metavar="WALK.npz", help="write t, q, support, COM and ZMP")
    s.add_argument("--motion-out", metavar="FILE.toml", help="write it as a motion file (30 ms keyframes)")
    _add_run_target(s)
    s.set_defaults(func=cmd_walk)

    s = sub.add_parser("play", help="play a motion file (keyframes .toml/.json, or a trajectory .npz)")
    s.add_argument("file", metavar="FILE")
    s.add_argument("--robot", default="humanoid17")
    s.add_argument("--rate", type=float, help="loop rate (Hz)")
    _add_run_target(s)
    s.set_defaults(func=cmd_play)

    s = sub.add_parser("warmup", help="compile the Numba kernels now, so the first `hil run` starts at once",
                       description="Compile (and cache on disk) every kernel the loop, the planners and IK use. "
                                   "Example: hil warmup")
    s.set_defaults(func=cmd_warmup)

    s = sub.add_parser("ctl", help="control a running loop without the twin: e-stop, enable, clear a fault, status",
                       description="Send a request to a running `hil run` loop (the same as the twin's buttons). "
                                   "Example: hil ctl clear-fault && hil ctl enable")
    s.add_argument("action", choices=("estop", "enable", "disable", "clear-fault", "start", "stop", "shutdown",
                                      "status", "list"),
                   help="estop; enable (torque on, holds the measured pose); disable; clear-fault (a latched "
                        "watchdog or e-stop; the board comes back disabled); start/stop the loaded motion; "
                        "shutdown the run; status of the loop; list the running loops")
    s.add_argument("--loop", metavar="NAME", help="which loop (`hil ctl list`); needed when more than one runs")
    s.set_defaults(func=cmd_ctl)

    s = sub.add_parser("replay", help="play a recording (from hil run --record) into the twin")
    s.add_argument("file", metavar="FILE.npy")
    s.add_argument("--speed", type=float, default=1.0, help="playback speed factor")
    s.add_argument("--headless", action="store_true", help="no twin; print progress")
    s.add_argument("--loop", action="store_true", help="repeat until Ctrl-C")
    s.set_defaults(func=cmd_replay)

    s = sub.add_parser("calibrate", help="calibrate joint offsets and directions, save the board's file")
    from calibration.cli import add_arguments as cal_args

    cal_args(s)
    s.set_defaults(func=cmd_calibrate)

    s = sub.add_parser("twin", help="the 3D digital twin: attach to a running loop, or --screenshot one frame")
    from twin.cli import add_arguments

    add_arguments(s)
    s.set_defaults(func=cmd_twin)

    s = sub.add_parser("ports", help="list serial ports (VID:PID, serial number); --probe asks each for a board")
    s.add_argument("--probe", action="store_true", help="handshake on each port and say which board answers")
    s.add_argument("--baud", type=int, default=1_000_000)
    s.add_argument("extra", nargs="*", help="more ports to list and probe (e.g. a pty from `hil emulate`)")
    s.set_defaults(func=cmd_ports)
    return p


COMPILING_COMMANDS = {"run", "path", "walk", "play", "calibrate", "fk"}


def main(argv: Sequence[str] | None = None) -> int:
    from hil.runtime.process_life import exit_with_parent_from_env

    exit_with_parent_from_env()  # a twin started by `hil run` ends with it
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    from firmware_protocol.errors import ProtocolLibError

    try:
        if args.command in COMPILING_COMMANDS:
            from hil.warmup import say_if_compiling

            say_if_compiling()  # a minute of silence otherwise, on the first run on a machine
        return int(args.func(args) or 0)
    except (hil.errors.HilError, ProtocolLibError) as e:
        # expected failures (bad input, a port that cannot be opened, a board that does not answer):
        # their message names what and where, a traceback would only bury it
        text = e.strerror if isinstance(e, OSError) and e.strerror else e  # without "[Errno 2]"
        print(f"hil {args.command}: error: {text}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"hil {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
