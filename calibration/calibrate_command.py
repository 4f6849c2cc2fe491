"""`hil calibrate`: run a calibration procedure on a board and save the calibration file.

The library is imported inside the functions (lazily): `hil --help` imports this module to build
its parser, and the runtime with its kernels would add a second to every command.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

from firmware_protocol.buses import bus_list
from hil.errors import HilError, did_you_mean
from hil.inputs import number, writable_file


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--robot", required=True, help="robot: a shipped name, a URDF file or a robot .toml file")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--port", help="serial port of the board")
    g.add_argument("--dry-run", action="store_true", help="calibrate the board emulator (see --emulate-*)")
    p.add_argument("--method", choices=["reference", "directions", "range", "poses", "eye"],
                   help="reference: average the readings with the robot held in --pose and save the offsets (on a "
                        "servo bus: the zero ticks, placed inside one turn of each servo); directions: jog each joint "
                        "±5° and save which way it moves (on a servo bus: you move each joint by hand its positive "
                        "way, torque off); range: you sweep each joint by hand end to end, torque off, and its limits "
                        "become what it reached (servo buses); poses: fit the PUMA's offsets to measured tool "
                        "points (--poses); eye: for PWM servos that cannot say where they stand (a PWM controller's), "
                        "drive them to --pose and nudge each joint until the robot looks like the twin (an "
                        "estimate)")
    p.add_argument("--nudge-deg", metavar="JOINT=DEG,…",
                   help="method eye: nudges to apply first (e.g. measured with a protractor); with --yes the only "
                        "ones, else more are typed in (`JOINT DEG`, `done`)")
    p.add_argument("--pose", default="home", help="reference pose name (method reference)")
    p.add_argument("--poses", metavar="FILE.csv", help="method poses: q1..q6 (deg), x, y, z (mm) per line")
    p.add_argument("--lengths", action="store_true", help="method poses: also fit a2 and d4")
    p.add_argument("--samples", type=int, default=200, help="method reference: readings to average, 10 … 100000")
    p.add_argument("--jog-deg", type=float, default=5.0, help="method directions: how far each joint is jogged, "
                                                              "1 … 15°")
    p.add_argument("--jog-speed-deg-s", type=float, default=10.0, help="method directions: jog speed, 1 … 60 °/s")
    p.add_argument("--settle-s", type=float, default=0.4, help="method directions: wait this long after each jog "
                                                               "before reading where the joint is, 0.05 … 5 s")
    p.add_argument("--sweep-s", type=float, metavar="S",
                   help="methods range and directions on a servo bus: record for S seconds, 1 … 3600 (default: until "
                        "Enter on a terminal, else 20 s)")
    p.add_argument("--emulate-range-deg", metavar="JOINT=LO:HI,…",
                   help="dry run on a bus: where a hand takes the joints for --method range (default: each joint's "
                        "whole range)")
    p.add_argument("--watchdog-ms", type=int, metavar="MS",
                   help="methods directions on hil's boards and eye on a bus: the board's command watchdog while it "
                        "moves the joints (10 … 1000 ms; default the board's own): more margin on a machine busy "
                        "with other work")
    p.add_argument("--out", metavar="FILE.toml", help="calibration file (default: the board's own, by id)")
    p.add_argument("--yes", action="store_true", help="do not ask; assume the robot is ready")
    p.add_argument("--headless", action="store_true", help="do not open the twin to show before and after")
    p.add_argument("--show-s", type=float, default=8.0, help="how long the twin shows before/after (s)")
    p.add_argument("--emulate-offsets-deg", help="dry run: hidden zero offsets (one per joint or joint=deg)")
    p.add_argument("--emulate-reverse", help="dry run: hidden reversed joints (names)")
    p.add_argument("--bus", help=f"a servo bus instead of a hil board ({bus_list()}): the result goes into the "
                                 "board config's zero ticks and directions")
    p.add_argument("--board-config", metavar="FILE", help="the robot ↔ servo mapping (default: the one shipped for "
                                                          "--bus; then --out names where the calibrated copy goes)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--import-lerobot", metavar="FILE.json", help="make a board config (--out FILE.toml) from a LeRobot "
                                                                 "calibration file: ids, drive modes, homing offsets, "
                                                                 "ranges; nothing connects")
    g.add_argument("--export-lerobot", metavar="FILE.json", help="write --board-config's servos as a LeRobot "
                                                                 "calibration file; nothing connects")
    p.add_argument("--role", choices=("follower", "leader"), help="--import-lerobot: the file is a follower's or a "
                                                                  "leader's (default: from its path, LeRobot keeps "
                                                                  "leaders' under teleoperators/)")


def _lerobot(args, model) -> int:
    """--import-lerobot / --export-lerobot: files only, no robot."""
    from hil import board_config
    from hil.lerobot import motor_calibration as lerobot_calibration
    from hil.errors import InputError

    if args.port or args.dry_run or args.method:
        raise InputError("--import-lerobot and --export-lerobot convert files and connect to nothing: leave out "
                         "--port, --dry-run and --method")
    if args.import_lerobot:
        if not args.out:
            raise InputError("--import-lerobot needs --out CONFIG.toml: the board config to write")
        if args.board_config:
            raise InputError("--import-lerobot makes a board config: leave out --board-config (the file's values go "
                             "on the one shipped for the robot and --bus)")
        config = lerobot_calibration.import_file(model, args.import_lerobot, args.bus, args.role)
        note = (f"from the LeRobot calibration {args.import_lerobot} (`hil calibrate --import-lerobot`), a {config.role}; "
                "the middle of each recorded range where the kit's own config has tick 2048, the gripper's whole "
                "range on the robot's")
        Path(args.out).write_text(board_config.to_toml(config, note))
        print(f"saved the board config: {args.out} (use it with --board-config {args.out})")
        return 0
    if not args.board_config:
        raise InputError("--export-lerobot needs --board-config CONFIG.toml: the servo map to export")
    config = board_config.resolve(model, args.bus, args.board_config)
    text, notes = lerobot_calibration.export_text(config)
    for line in notes:
        print("note: " + line)
    Path(args.export_lerobot).write_text(text)
    print(f"saved the LeRobot calibration: {args.export_lerobot} ({len(config.joints)} motors)")
    return 0


def main(args: argparse.Namespace) -> int:
    from firmware_protocol.link import Link
    from hil import board_config, calibration_files, robots

    from calibration import procedures as P

    model = robots.load(args.robot)
    writable_file(args.out, "--out")
    writable_file(args.export_lerobot, "--export-lerobot")
    if args.import_lerobot or args.export_lerobot:
        return _lerobot(args, model)
    bus = board_config.resolve(model, args.bus, args.board_config)
    _check_options(args, model, bus)
    emu = None
    if args.dry_run and args.method != "poses":
        emu = _start_emulator(args, model, bus)
        args.port = emu.path
    try:
        if args.method == "poses":
            return _poses(args, model, P, calibration_files)
        if bus is not None:
            from calibration import bus_command

            return bus_command.calibrate(args, model, bus)
        link = Link.connect(args.port, expect_joints=model.n)
        try:
            _on_the_board(args, model, link)
        finally:
            link.close()
    finally:
        if emu is not None:
            emu.stop()
    return 0


def _check_options(args: argparse.Namespace, model, bus) -> None:
    """Every option checked against the method, the robot and the bus, before anything connects."""
    from firmware_protocol import messages as M
    from hil.errors import InputError

    if args.method is None:
        raise InputError("hil calibrate needs --method reference, directions, range, poses or eye (or "
                         "--import-lerobot / --export-lerobot to convert a LeRobot calibration file)")
    number(args.samples, "--samples", 10, 100_000)
    number(args.show_s, "--show-s", 0, 3600, "s")
    number(args.jog_deg, "--jog-deg", 1, 15, "°")
    number(args.jog_speed_deg_s, "--jog-speed-deg-s", 1, 60, "°/s")
    number(args.settle_s, "--settle-s", 0.05, 5, "s")
    if args.method == "poses":
        if "dh" not in model.meta:
            raise InputError("--method poses fits the PUMA 560's joint offsets; use reference for the humanoid")
        if not args.poses:
            raise InputError("--method poses needs --poses FILE.csv (q1..q6 in deg, x y z in mm per line)")
    elif not (args.port or args.dry_run):
        raise InputError("hil calibrate needs --port PORT (see `hil ports`) or --dry-run")
    if bus is not None and args.method == "poses":
        raise InputError("--method poses fits the PUMA's offsets on hil's own board; on a servo bus use reference")
    if bus is None and args.method == "range":
        raise InputError("--method range records a servo bus kit's ranges by hand (with --bus); hil's own boards hold "
                         "their joint limits from the robot model")
    if args.watchdog_ms is not None:
        number(args.watchdog_ms, "--watchdog-ms", M.CMD_TIMEOUT_MS_MIN, M.CMD_TIMEOUT_MS_MAX, "ms")
    if args.sweep_s is not None:
        number(args.sweep_s, "--sweep-s", 1, 3600, "s")
    if bus is None and args.method == "eye":
        raise InputError("--method eye is for PWM servos on a servo bus (with --bus), which cannot say where they "
                         "stand; hil's own boards measure their joints: use --method reference")
    if args.nudge_deg and args.method != "eye":
        raise InputError("--nudge-deg belongs to --method eye")
    if bus is not None and args.method != "poses":
        from calibration.bus_command import check_method

        check_method(args.method, bus)
    if args.emulate_range_deg and not (args.dry_run and bus is not None and args.method == "range"):
        raise InputError("--emulate-range-deg belongs to a dry run of --method range on a servo bus")
    if bus is not None and args.out is None and bus.shipped:
        raise InputError(f"the calibrated mapping is a new board config: name it with --out FILE.toml (the shipped "
                         f"{bus.source} is not changed)")


def _on_the_board(args: argparse.Namespace, model, link) -> None:
    """--method reference or directions on one of hil's boards: measured, said, saved for its uid."""
    from calibration.views import clear_latched_fault
    from firmware_protocol import messages as M
    from hil import calibration_files

    if args.watchdog_ms is not None:   # a busy machine's margin, for the jogs (as hil run's option)
        link.keep_param(M.Param.CMD_TIMEOUT_MS, int(args.watchdog_ms))
    uid = link.info.uid
    clear_latched_fault(args, link)
    path = Path(args.out) if args.out else calibration_files.default_path(uid)
    old_off, old_sign = np.zeros(model.n), np.ones(model.n)
    # what the board already has: the file being rewritten, else (with --out) the board's own
    known = path if path.exists() else calibration_files.default_path(uid)
    if known.exists():
        old_off, old_sign, _ = calibration_files.load(known, model, uid)
        if known != path:
            print(f"keeping the board's saved directions and offsets from {known} in {path}")
    if args.method == "reference":
        _reference(args, model, link, uid, path, old_off, old_sign)
    else:
        _directions(args, model, link, uid, path, old_off, old_sign)
    print(f"saved calibration for board {uid} ({model.name}): {path}")


def _reference(args: argparse.Namespace, model, link, uid: str, path: Path, old_off, old_sign) -> None:
    """Each joint's offset from the robot held in a known pose, torque off; shown before and after."""
    from calibration.views import CalibrationView, ask
    from hil import calibration_files
    from hil.errors import InputError

    from calibration import procedures as P

    if args.pose not in model.poses:
        raise InputError(f"unknown pose {args.pose!r}{did_you_mean(args.pose, model.poses)}; poses: "
                         f"{', '.join(model.poses)}")
    ask(args, f"Put the robot in the reference pose '{args.pose}' (shown by `hil twin --screenshot "
               f"... --robot {model.name}`), torque off.")
    print(f"reading {args.samples} samples per joint …")
    q_ref = model.poses[args.pose]
    view = CalibrationView(model, None if args.headless else args.start_twin)
    # before: the readings through the calibration in force (nominal when there is none)
    before = old_sign * (P.read_samples(link, 20).mean(axis=0) - old_off)
    view.show(before, q_ref, "calibration: before (solid: measured, ghost: reference pose)")
    res = P.reference(link, model, q_ref, old_sign, args.samples)
    print(f"{'joint':<18} {'offset (deg)':>13} {'spread (deg)':>13}")
    for i, name in enumerate(model.joint_names):
        print(f"{name:<18} {math.degrees(res.offsets[i]):>+13.3f} {math.degrees(res.spread[i]):>13.3f}")
    for w in res.warnings:
        print("warning: " + w)
    calibration_files.save(path, model, uid, "reference", res.offsets, old_sign, res.spread)
    after = old_sign * (P.read_samples(link, 20).mean(axis=0) - res.offsets)
    view.show(after, q_ref, "calibration: after (solid: measured with the new offsets, ghost: reference)")
    worst = float(np.max(np.abs(after - q_ref)))
    print(f"after: measured pose within {math.degrees(worst):.3f}° of the reference")
    view.close(args.show_s)


def _directions(args: argparse.Namespace, model, link, uid: str, path: Path, old_off, old_sign) -> None:
    """Each joint jogged both ways: which turn backwards, which by the wrong amount, which not at all."""
    from calibration.views import ask
    from hil import calibration_files

    from calibration import procedures as P

    jog = f"±{args.jog_deg:g}° at {args.jog_speed_deg_s:g}°/s"
    ask(args, f"The robot will jog every joint by {jog}. Keep clear.")
    print(f"jogging each joint {jog} …")
    res = P.directions(link, model, math.radians(args.jog_deg), math.radians(args.jog_speed_deg_s),
                       settle_s=args.settle_s)
    if res.reversed:
        print("reversed: " + ", ".join(res.reversed))
    if res.misscaled:
        print("mis-scaled (measured/commanded off by more than 10%): " + ", ".join(res.misscaled))
    if res.stuck:
        print("did not follow (moved less than half the command; direction unknown, sign left as it "
              "was — check the servo and run again): " + ", ".join(res.stuck))
    if not res.reversed and not res.misscaled and not res.stuck:
        print("all joints move the commanded way and amount")
    calibration_files.save(path, model, uid, "directions", old_off, res.signs_over(old_sign), None)


def _start_emulator(args, model, bus):
    """The emulator for a dry run, hiding the calibration errors the options name."""
    from hil import board_config, emulator_launch

    offsets = emulator_launch.parse_joint_values(model, args.emulate_offsets_deg, "--emulate-offsets-deg")
    reverse = emulator_launch.parse_joint_list(model, args.emulate_reverse)
    if bus is None:
        emu = emulator_launch.start_emulator(model, offsets_deg=offsets, reverse=reverse)
        print(f"board emulator: {model.name} on {emu.path}")
        return emu
    hidden = np.radians(offsets) if offsets is not None else np.zeros(model.n)
    signs = np.ones(model.n)
    signs[reverse] = -1.0
    # the servos' truth: the config with the hidden zero errors and reversals folded in
    truth = board_config.with_joint_map(bus, hidden, signs)
    emu = emulator_launch.start_bus_emulator(truth, model, hands=_hands(args, model, bus, truth))
    print(f"servo bus emulator: {bus.bus} on {emu.path}")
    return emu


def _hands(args, model, bus, truth) -> list[str]:
    """A dry run's hand (the bus emulator's --hand) for the methods done by hand: each joint swept
    through its range, over and over (range), or moved 20° its positive way once (directions)."""
    from firmware_protocol.buses import bus_class
    from hil import emulator_launch

    if args.method not in ("range", "directions"):
        return []
    ranges = emulator_launch.parse_joint_ranges(model, args.emulate_range_deg, "--emulate-range-deg")
    cls, out = bus_class(bus.bus), []
    for i, j in enumerate(truth.joints):
        home = float(model.home[i])
        if args.method == "range":
            lo, hi = ranges.get(j.name, (j.min_rad, j.max_rad))
            a, b, when = j.ticks(lo), j.ticks(hi), "1-5*"
        else:
            a = b = j.ticks(min(home + math.radians(20.0), float(model.upper[i]) - math.radians(1.0)))
            when = "3-4"
        turn = cls.turn_ticks(j.model)
        shift = 0 if not turn else (j.ticks(home) % turn) - j.ticks(home)   # the servo reads within one turn
        out.append(f"{j.servo_id}:{a + shift}:{b + shift}@{when}")
    return out


def _poses(args, model, P, calibration_files) -> int:
    q, p = P.load_pose_file(args.poses, model.n)
    res = P.fit_poses(model, q, p, fit_lengths=args.lengths)
    print(f"fit of {len(q)} poses: rms residual {res.rms_mm:.3f} mm, max {res.residuals_mm.max():.3f} mm, "
          f"condition number {res.condition:.3g}")
    print(f"{'parameter':<22} {'value':>12} {'± 1σ':>10}")
    for i, name in enumerate(model.joint_names):
        if res.names[i] in res.undetermined:
            print(f"{'offset ' + name:<22} {'not determined by these points':>23}")
            continue
        print(f"{'offset ' + name:<22} {math.degrees(res.offsets[i]):>+11.4f}° {math.degrees(res.sigma[i]):>9.4f}°")
    for k, (name, v) in enumerate(res.lengths.items()):
        print(f"{name:<22} {v * 1e3:>10.3f}mm {res.sigma[model.n + k] * 1e3:>8.3f}mm")
    for w in res.warnings:
        print("warning: " + w)
    if args.out and res.undetermined:
        raise HilError(f"not saved to {args.out}: {', '.join(res.undetermined)} cannot be determined from these "
                       "points (see the warning above); a calibration with guessed offsets would be worse than none")
    if args.out:
        calibration_files.save(args.out, model, "unknown", "poses", res.offsets, np.ones(model.n),
                            np.full(model.n, res.rms_mm * 1e-3))
        print(f"saved: {args.out} (set board_uid in it to the board's id before use)")
    return 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser(allow_abbrev=False, prog="python -m calibration.calibrate_command")
    add_arguments(ap)
    sys.exit(main(ap.parse_args()))
