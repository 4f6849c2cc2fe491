"""`hil calibrate --bus …`: a servo bus kit's calibration, into its board config.

A servo reports its own ticks, so its calibration is the board config's mapping from ticks to the
robot's radians: zero ticks from the robot held in a known pose (`reference`), directions and
ranges of motion from the joints moved by hand with torque off (`directions`, `range`, see
calibration.by_hand). What is written to the servos (Homing Offset, Min/Max Position Limits) is
read back; the config is saved and loaded back before the command says it is done.
"""

from __future__ import annotations

import dataclasses
import math
import select
import sys
import time
from pathlib import Path

import numpy as np

from calibration import bus_zeros, by_eye, by_hand
from calibration import procedures as P
from calibration.views import CalibrationView, ask, clear_latched_fault
from firmware_protocol.buses import bus_class
from firmware_protocol.buses.bus_board import BusBoard
from hil import board_config, robots
from hil.emulator_launch import parse_joint_values
from hil.errors import HilError, InputError, did_you_mean


def calibrate(args, model, bus) -> int:
    """`hil calibrate --bus …` for each method."""
    cls = check_method(args.method, bus)
    geared = [bus.joints[k].name for k in bus.mix.mixed()] if bus.mix is not None else []
    if geared and args.method != "reference":
        raise InputError(f"--method {args.method} reads or moves the joints one servo each; {', '.join(geared)} sit "
                         "on transmissions (a servo's angle is a ratio of its joints'): set their directions and "
                         "ranges in the board config by hand, and find the zero ticks with --method reference")
    if args.method == "eye":
        return _by_eye(args, model, bus, cls)
    if args.method == "range":
        return _ranges(args, model, bus)
    if args.method == "directions":
        return _directions(args, model, bus)
    return _reference(args, model, bus)


def check_method(method: str, bus):
    """The bus's servo class, if `method` can calibrate its servos; else InputError saying which can."""
    cls = bus_class(bus.bus)
    if not cls.measures_position and method != "eye":
        raise InputError(f"--method {method} reads where each servo stands; {cls.title} servos cannot say "
                         "(the controller reports only the pulse it sends): use --method eye, which drives them to "
                         "the reference pose and lets you nudge each joint until the robot looks like the twin")
    if cls.measures_position and method == "eye":
        raise InputError(f"--method eye is for servos that cannot say where they stand; {cls.title} servos can: use "
                         "--method reference (the robot held in the reference pose, torque off)")
    return cls


def _reference(args, model, bus) -> int:
    """The robot held in a known pose gives each joint's zero tick, placed so that its whole range
    lies inside one turn of its servo (calibration.bus_zeros); any Homing Offset and Min/Max
    Position Limits that takes are written to the servos and read back."""
    q_ref = model.poses.get(args.pose)
    if q_ref is None:
        raise HilError(f"unknown pose {args.pose!r}{did_you_mean(args.pose, model.poses)}; poses: "
                       f"{', '.join(model.poses)}")
    view = CalibrationView(model, None if args.headless else args.start_twin)
    try:
        link = _connect(args, model, bus)
        try:
            held = link.read_homing_offsets()     # before the bus cycles on its own thread
            link.start_cycling()
            clear_latched_fault(args, link)
            ask(args, f"Put the robot in the reference pose '{args.pose}', torque off.")
            samples = P.read_samples(link, args.samples)
            view.show(samples.mean(axis=0), q_ref, "calibration: before (solid: measured, ghost: reference pose)")
            placements = _place_zeros(link, model, bus, *_as_the_servos_turn(bus, q_ref, samples), held)
            _write_servo_setup(link, bus, placements)
        finally:
            link.close()
        calibrated = _calibrated_config(bus, placements)
        with BusBoard.connect(args.port, calibrated, expect_joints=model.n) as after:   # the servos agree with it
            after.start_cycling()
            measured = P.read_samples(after, 20).mean(axis=0)
        view.show(measured, q_ref, "calibration: after (solid: measured with the new zeros, ghost: reference)")
        _check_after(model, calibrated, measured, q_ref)
        out = _save(args, bus, calibrated)
        print(f"saved the calibrated board config: {out} (use it with --board-config {out})")
        view.close(args.show_s)
    finally:
        view.shared.close()
    return 0


def _connect(args, model, bus):
    # the servos' own limits are what a calibration may be about to rewrite: not held against it
    return BusBoard.connect(args.port, dataclasses.replace(bus, check_servo_limits=False), expect_joints=model.n)


AFTER_TOLERANCE_DEG = 1.0   # the reference pose read back with the new zeros: this close, or a few ticks


def _check_after(model, calibrated, measured: np.ndarray, q_ref: np.ndarray) -> None:
    """The servos, read through the calibrated config, put the robot in the reference pose: within a
    degree (or three of its servo's ticks, where those are coarser), joint by joint; HilError naming
    every joint that is not, before anything is saved."""
    off = np.abs(measured - q_ref)
    worst = int(np.argmax(off))
    bad = []
    for i, j in enumerate(calibrated.joints):
        tol = max(math.radians(AFTER_TOLERANCE_DEG), 3.0 / j.ticks_per_rad)
        if not off[i] <= tol:
            bad.append(f"{model.joint_names[i]} reads {math.degrees(measured[i]):+.1f}° where the reference has "
                       f"{math.degrees(q_ref[i]):+.1f}° (tolerance {math.degrees(tol):.2f}°)")
    if bad:
        raise HilError("after: the servos, read with the new zeros, do not put the robot in the reference pose: "
                       + "; ".join(bad) + ". Nothing was saved; hold the robot still in the pose and calibrate again "
                       "(a joint a whole turn off has its range across its servo's wrap: turn its horn)")
    print(f"after: measured pose within {math.degrees(float(off[worst])):.3f}° of the reference (largest: "
          f"{model.joint_names[worst]})")


def _save(args, bus, calibrated, how: str = "") -> str:
    """Write the calibrated config to --out (a user's own config in place) and read it back: what
    is saved must load as the run will load it."""
    out = args.out or bus.source
    note = f"calibrated by `hil calibrate --method {args.method}` from {bus.source}{how}"
    fresh = Path(out).with_name(Path(out).name + ".new")   # the file in place stays until this one loads
    fresh.write_text(board_config.to_toml(calibrated, note))
    try:
        board_config.load(str(fresh), robots.load(args.robot))
    except InputError as e:
        fresh.unlink()
        raise HilError(f"the calibrated config does not load back ({e}); {out} was left as it was") from None
    fresh.replace(out)
    return out


def _as_the_servos_turn(bus, q_ref, samples):
    """The reference pose and the readings (joints) as each servo's own angle: a servo on a
    transmission turns through its ratios (firmware_protocol.servo_mix); the others, as they are."""
    if bus.mix is None:
        return q_ref, samples
    return bus.mix.servo_angles(q_ref), np.array([bus.mix.servo_angles(row) for row in samples])


def _place_zeros(link, model, bus, q_ref, samples, held) -> list:
    """Each servo's placement from its readings (rad through the config) in the reference pose."""
    cls, out, refused = type(link.bus), [], []
    print(f"{'joint':<18} {'zero tick':>10} {'moved':>9} {'range (ticks)':>15}  homing offset")
    for i, j in enumerate(bus.joints):
        turn = cls.turn_ticks(j.model)
        ticks = j.zero_tick + j.direction * samples[:, i] * j.ticks_per_rad
        try:
            p = bus_zeros.place(j, bus_zeros.mean_ticks(ticks, turn), float(q_ref[i]), turn, held[i],
                                cls.homing_limit, cls.homing_sign, cls.homing_wraps)
        except bus_zeros.PlacementError as e:
            refused.append(str(e))
            continue
        moved = p.zero_tick - p.shift - j.zero_tick
        if turn:   # the same place a turn up or down
            moved = (moved + turn / 2) % turn - turn / 2
        moved = math.degrees(j.direction * moved / j.ticks_per_rad)
        limits = f"{p.limits[0]} … {p.limits[1]}" if p.limits else "-"
        homing = "-" if p.homing_offset is None else f"{p.homing_offset}" + (" (written)" if p.shift else "")
        print(f"{j.name:<18} {p.zero_tick:>10.1f} {moved:>+8.3f}° {limits:>15}  {homing}")
        out.append(p)
    if refused:
        raise InputError("cannot place every joint's range inside one turn of its servo (nothing was written): "
                         + "; ".join(refused))
    return out


def _write_servo_setup(link, bus, placements) -> None:
    """The Homing Offsets that moved and each servo's Min/Max Position Limits; read back."""
    failed = []
    for i, p in enumerate(placements):
        bad = link.write_servo_setup(i, p.homing_offset if p.shift else None, p.limits)
        failed += [f"{bus.joints[i].name} (id {bus.joints[i].servo_id}): {what}" for what in bad]
    if failed:
        raise HilError("the servos did not keep what was written (EEPROM locked, or torque on?): "
                       + "; ".join(failed) + ". Nothing was saved; power-cycle the servos and calibrate again")


def _calibrated_config(bus, placements):
    """The config with the new zero ticks and homing offsets; a LeRobot range recorded for the old
    zero no longer applies (hil.lerobot.motor_calibration exports one from the limits)."""
    joints = tuple(board_config.remapped(j, zero_tick=p.zero_tick, homing_offset=p.homing_offset)
                   for j, p in zip(bus.joints, placements))
    return dataclasses.replace(bus, joints=joints, shipped=False)


# ---------------------------------------------------------------------------- by hand, torque off
class _Ended:
    """Whether the user said they are done: Enter on a terminal, or --sweep-s gone by."""

    def __init__(self, args, default_s: float) -> None:
        interactive = not args.yes and sys.stdin is not None and sys.stdin.isatty()
        self.deadline = time.monotonic() + (args.sweep_s if args.sweep_s is not None else
                                            (3600.0 if interactive else default_s))
        self.interactive = interactive

    def __call__(self) -> bool:
        if time.monotonic() >= self.deadline:
            return True
        if self.interactive and select.select([sys.stdin], [], [], 0)[0]:
            sys.stdin.readline()
            return True
        return False


def _follow(link, view, ghost, ended, every) -> by_hand.Unwrapped:
    """Readings followed across the wrap until `ended()` or `every(track)` says so; the twin shows
    them live (solid) against `ghost`."""
    first = P.read_samples(link, 5)[-1]
    track = by_hand.Unwrapped(first, by_hand.turn_rad(link.config))
    last_seq, shown = None, 0.0
    while not ended():
        s = link.latest()
        if s is not None and s.seq != last_seq:
            last_seq = s.seq
            track.add(s.q)
            if every(track):
                break
        now = time.monotonic()
        if now - shown > 0.05:
            view.show(track.q, ghost, "")
            shown = now
        link.send_positions(np.zeros(link.info.n_joints), hold=True)
        time.sleep(0.01)
    return track


def _ranges(args, model, bus) -> int:
    """Each joint swept by hand end to end: its limits become the narrower of the robot's and the
    sweep, written to the servos' Min/Max Position Limits and the config."""
    view = CalibrationView(model, None if args.headless else args.start_twin)
    try:
        with _connect(args, model, bus) as link:
            link.start_cycling()
            clear_latched_fault(args, link)
            how = ("press Enter when every joint has been" if _Ended(args, 0).interactive else
                   f"recording for {args.sweep_s if args.sweep_s is not None else 20:g} s; every joint")
            print(f"Torque is off. Move each joint by hand slowly from one end of its range to the other ({how} "
                  "moved end to end)")
            track = _follow(link, view, model.home, _Ended(args, 20.0), lambda track: False)
            result = by_hand.ranges(bus, model, track.lo, track.hi)
            _print_ranges(result)
            calibrated = by_hand.ranged_config(bus, result)
            _write_limits(link, bus, calibrated)
        out = _save(args, bus, calibrated)
        print(f"saved the board config with the recorded ranges: {out} (use it with --board-config {out})")
        view.close(0.0)
    finally:
        view.shared.close()
    return 0


def _print_ranges(result) -> None:
    print(f"{'joint':<18} {'swept (deg)':>17} {'limits kept (deg)':>19}  note")
    for r in result:
        swept = f"{math.degrees(r.swept[0]):+.1f} … {math.degrees(r.swept[1]):+.1f}"
        kept = f"{math.degrees(r.limits[0]):+.1f} … {math.degrees(r.limits[1]):+.1f}"
        print(f"{r.name:<18} {swept:>17} {kept:>19}  {r.note}")


def _write_limits(link, bus, calibrated) -> None:
    """The servos' Min/Max Position Limits for the joints whose limits changed; read back."""
    failed = []
    for i, (old, new) in enumerate(zip(bus.joints, calibrated.joints)):
        if (old.min_rad, old.max_rad) == (new.min_rad, new.max_rad):
            continue
        limits = tuple(sorted((new.ticks(new.min_rad), new.ticks(new.max_rad))))
        failed += [f"{new.name} (id {new.servo_id}): {what}" for what in link.write_servo_setup(i, None, limits)]
    if failed:
        raise HilError("the servos did not keep what was written (EEPROM locked, or torque on?): " + "; ".join(failed)
                       + ". Nothing was saved; power-cycle the servos and record again")


def _directions(args, model, bus) -> int:
    """Each joint moved by hand its positive way (the twin's ghost shows it): a reading that went
    down is a servo mounted the other way round, and its direction turns."""
    threshold = math.radians(args.jog_deg)
    view = CalibrationView(model, None if args.headless else args.start_twin)
    try:
        with _connect(args, model, bus) as link:
            link.start_cycling()
            clear_latched_fault(args, link)
            rest = P.read_samples(link, 5)[-1]
            ghost = np.clip(rest + math.radians(15.0), model.lower, model.upper)
            print(f"Torque is off. Move each joint by hand at least {args.jog_deg:g}° the robot's positive way (the "
                  "twin's ghost shows it: each joint 15° on), one at a time or together, then back"
                  + (" (press Enter when done)" if _Ended(args, 0).interactive else ""))
            decided = np.zeros(model.n, dtype=bool)
            moved = np.zeros(model.n)

            def note(track) -> bool:   # the first move past the threshold decides a joint
                d = track.q - track_start
                new = ~decided & (np.abs(d) >= threshold)
                moved[new] = d[new]
                decided[new] = True
                return bool(decided.all())
            track_start = rest
            _follow(link, view, ghost, _Ended(args, 20.0), note)
        result = by_hand.directions(bus, moved, threshold)
        _print_directions(result)
        calibrated = by_hand.directed_config(bus, result)
        out = _save(args, bus, calibrated)
        print(f"saved the board config with the directions: {out}; next, `hil calibrate --method reference "
              f"--board-config {out}` finds the zero ticks")
        view.close(0.0)
    finally:
        view.shared.close()
    return 0


def _print_directions(result) -> None:
    for r in result:
        if r.direction == 0:
            verdict = "did not move far enough: direction kept (move it further and run again)"
        else:
            verdict = "as configured" if r.moved > 0 else "reversed: direction turned"
        print(f"{r.name:<18} moved {math.degrees(r.moved):+7.1f}°  {verdict}")


# ---------------------------------------------------------------------------- by eye, PWM servos
def _by_eye(args, model, bus, cls) -> int:
    """Servos that report only their pulse: driven to the reference pose as the config places it,
    nudged by the user until the robot looks like the twin; the pulses held become the zeros."""
    q_ref = model.poses.get(args.pose)
    if q_ref is None:
        raise InputError(f"unknown pose {args.pose!r}{did_you_mean(args.pose, model.poses)}; poses: "
                         f"{', '.join(model.poses)}")
    lower = np.array([j.min_rad for j in bus.joints])
    upper = np.array([j.max_rad for j in bus.joints])
    outside = [f"{n} {math.degrees(q):+.1f}°" for n, q, a, b in zip(model.joint_names, q_ref, lower, upper)
               if not a <= q <= b]
    if outside:
        raise InputError(f"the pose {args.pose!r} lies outside the limits of {bus.where} at {', '.join(outside)}: "
                         "choose another --pose")
    first = parse_joint_values(model, args.nudge_deg, "--nudge-deg")
    # a busy machine's margin while the servos are held (as hil run's option); not saved in the config
    held = bus if args.watchdog_ms is None else dataclasses.replace(bus, command_timeout_ms=float(args.watchdog_ms))
    nudges = by_eye.Nudges(model, np.asarray(q_ref, dtype=np.float64), lower, upper)
    first = None if first is None else np.radians(first)
    nudges.check(first)
    view = CalibrationView(model, None if args.headless else args.start_twin)
    try:
        with _connect(args, model, held) as link:
            link.start_cycling()
            clear_latched_fault(args, link)
            ask(args, f"The servos will be powered and driven to the pose '{args.pose}' as {Path(bus.source).name} places it "
                      f"(at {args.jog_speed_deg_s:g}°/s). Keep clear.")
            link.enable()
            try:
                done = by_eye.session(link, model, nudges, first, math.radians(args.jog_speed_deg_s), not args.yes,
                                      view)
            finally:
                _disable(link)
        if not done:
            raise HilError(f"left without saving; {args.out or bus.source} is unchanged")
        calibrated, narrowed = by_eye.zeroed_config(bus, nudges, cls.goal_range)
        _print_eye(bus, calibrated, nudges)
        for line in narrowed:
            print(line)
        out = _save(args, bus, calibrated, " (zeros estimated by eye)")
        print(f"saved the board config with zeros estimated by eye: {out} (use it with --board-config {out}); "
              "an estimate, as good as the match you saw: check a pose you know, and nudge again if needed")
        view.close(0.0)
    finally:
        view.shared.close()
    return 0


def _disable(link) -> None:
    try:
        link.disable()
    except HilError:
        pass   # the board faulted on its own: torque is already off


def _print_eye(bus, calibrated, nudges) -> None:
    print(f"{'joint':<18} {'nudged':>9} {'zero (pulse)':>13}")
    for new, d in zip(calibrated.joints, nudges.rad):
        print(f"{new.name:<18} {math.degrees(float(d)):>+8.2f}° {new.zero_tick:>13.1f}"
              + ("" if d else "   (as it was)"))
