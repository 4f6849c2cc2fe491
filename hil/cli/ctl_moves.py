"""`hil ctl jog / move / play / record`: what a remote asks of a running loop that moves the
robot or records it; each waits for the outcome and says it (exit codes in ctl_exit)."""

from __future__ import annotations

import math
import re
import sys
import time

import numpy as np

from hil.cli.ctl_exit import EXIT_DONE, EXIT_REFUSED, EXIT_SHORT
from hil.errors import InputError, did_you_mean

ARRIVED_RAD = math.radians(0.05)   # the command within this of the target: arrived
HELD_GIVE_UP_S = 1.0               # held by a safety check this long: the move stopped short
CARTESIAN_STEP_M = 0.002           # a Cartesian jog goes along its line in steps this long (and 1°)
CARTESIAN_STEP_RAD = math.radians(1.0)


def _model(client):
    """The loop's robot as its run card describes it (joint names, ranges, poses, kind)."""
    from hil.cli.ctl_status import model_of

    facts = model_of(client)
    if facts is None:
        raise InputError(f"{client.name} does not say which robot it runs (its run card cannot be read: a loop "
                         "of another hil version?)")
    return facts


def _full_model(client):
    """The loop's robot with its kinematics (for Cartesian jogs), its ranges as the loop checks them."""
    from hil import board_config, robots
    from hil.runtime import run_card

    return board_config.within_config(robots.load(run_card.read(client.name)["robot"]), run_card.bus(client.name))


def _refused(client, what: str, answer) -> int:

    print(f"hil ctl {what}: {client.name}: {answer}", file=sys.stderr)
    return EXIT_REFUSED


# ------------------------------------------------------------------ joint targets
def joint_target(model, base: np.ndarray, pairs: list[str], absolute: bool) -> np.ndarray:
    """The joint target from `JOINT DEG` pairs: `base` moved by the angles (or set to them)."""
    if len(pairs) % 2:
        raise InputError(f"jog: give joint names and angles in pairs (JOINT DEG …); got {' '.join(pairs)}")
    q = base.copy()
    names = pairs[::2]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:   # by 5 then by 6: 11, or 6? neither is said, so neither is guessed
        raise InputError(f"jog: {twice[0]} is given twice; give each joint once")
    for name, value in zip(names, pairs[1::2]):
        if name not in model.joint_names:
            raise InputError(f"jog: {model.name} has no joint {name!r}{did_you_mean(name, model.joint_names)}; "
                             f"its joints: {', '.join(model.joint_names)}")
        try:
            deg = float(value)
        except ValueError:
            raise InputError(f"jog: {name} {value!r}: give an angle in degrees (e.g. {name} +10)") from None
        if not math.isfinite(deg):
            raise InputError(f"jog: {name} {value}: give a finite angle in degrees")
        i = model.joint_names.index(name)
        q[i] = math.radians(deg) if absolute else q[i] + math.radians(deg)
        if not model.lower[i] - 1e-9 <= q[i] <= model.upper[i] + 1e-9:
            raise InputError(f"jog: {name} would go to {math.degrees(q[i]):+.1f}°, past its range "
                             f"{math.degrees(model.lower[i]):+.1f}° … {math.degrees(model.upper[i]):+.1f}°"
                             + ("" if absolute else f" (it is at {math.degrees(base[i]):+.1f}°)"))
    return q


def _timeout(model, q_from: np.ndarray, q_to: np.ndarray, given: float | None) -> float:
    if given is not None:
        if not (math.isfinite(given) and given > 0):
            raise InputError(f"--timeout {given:g}: give a positive number of seconds")
        return given
    need = float(np.max(np.abs(q_to - q_from) / np.maximum(model.velocity_limit, 1e-6), initial=0.0))
    return 8.0 * need + 5.0   # a jog ramps at a quarter of the speed limits (the loop's ramp share), doubled


def wait_arrived(client, target: np.ndarray, timeout_s: float):
    """Wait for the loop's command to reach `target`: (True, snapshot) there, (False, why) when it
    stops short — the robot no longer enabled, held by a safety check, the loop gone, the time out."""
    from hil.runtime.lifecycle import ENABLED_MODES, Mode
    from hil.runtime.shared import LoopStatus

    deadline = time.monotonic() + timeout_s
    held_since = None
    while True:
        s = client.snapshot()
        if np.max(np.abs(s.q_cmd - target)) < ARRIVED_RAD and int(s.mode) == Mode.ACTIVE:
            return True, s
        mode = Mode(int(s.mode))
        if mode not in ENABLED_MODES:
            return False, f"the robot is {mode.name} ({s.event})"
        held_since = (held_since or time.monotonic()) if mode == Mode.HELD else None
        if held_since is not None and time.monotonic() - held_since > HELD_GIVE_UP_S:
            return False, f"held by a safety check ({s.event})"
        if client.status() in (LoopStatus.STOPPED, LoopStatus.FAILED):
            return False, f"the loop ended ({s.event})"
        if time.monotonic() > deadline:
            return False, f"not there within {timeout_s:g} s ({s.event})"
        time.sleep(0.01)


def _go(client, model, what: str, target: np.ndarray, no_wait: bool, timeout: float | None) -> int:

    start = client.snapshot().q_cmd
    wait_s = _timeout(model, start, np.clip(target, model.lower, model.upper), timeout)
    answer = client.jog(target)
    if not answer.ok:
        return _refused(client, what, answer)
    print(f"{client.name}: {answer}")
    if no_wait:
        return EXIT_DONE
    # the loop clamps a target past a joint's range into it (and says so): that is where it goes
    ok, got = wait_arrived(client, np.clip(target, model.lower, model.upper), wait_s)
    if not ok:
        print(f"hil ctl {what}: stopped short: {got}", file=sys.stderr)
        return EXIT_SHORT
    moved = np.flatnonzero(np.abs(target - start) > 1e-9)
    shown = moved if len(moved) else range(model.n)
    print(f"{client.name}: there: " + ", ".join(f"{model.joint_names[i]} {math.degrees(got.q_meas[i]):.1f}° measured"
                                                 for i in shown))
    return EXIT_DONE


def jog(client, args) -> int:
    model = _model(client)
    cartesian = [args.dx, args.dy, args.dz, args.drx, args.dry, args.drz]
    if not all(math.isfinite(v) for v in cartesian):
        raise InputError("jog: --dx … --drz must be finite numbers")
    if args.joints and any(cartesian):
        raise InputError("jog: give joints and angles, or --dx … --drz, not both in one jog")
    base = client.snapshot().q_cmd
    if args.joints:
        return _go(client, model, "jog", joint_target(model, base, args.joints, args.to), args.no_wait, args.timeout)
    if not any(cartesian):
        raise InputError("jog: say what to move: JOINT DEG pairs (hil ctl jog elbow +10), or the tool with "
                         "--dx/--dy/--dz MM and --drx/--dry/--drz DEG")
    if args.to:
        raise InputError("jog: --to sets joint angles; a Cartesian jog moves the tool by --dx … --drz")
    return _cartesian(client, model, base, np.array(cartesian), args)


def cartesian_waypoints(model, q0: np.ndarray, offset: np.ndarray, frame: str) -> list[np.ndarray]:
    """Joint poses along the tool's straight line (and its steady turn) by `offset` (mm, mm, mm,
    °, °, °) in the base's axes or the tool's own, one every CARTESIAN_STEP_M / _RAD; InputError
    where the IK cannot follow the line (out of reach, a joint's range, a singularity)."""
    from hil.kinematics import Task, ik_lm
    from hil.kinematics.rotations import axis_angle_matrix

    move = offset[:3] / 1000.0
    turn = np.radians(offset[3:])
    start = model.fk(q0)
    steps = max(1, int(math.ceil(max(np.linalg.norm(move) / CARTESIAN_STEP_M,
                                     np.linalg.norm(turn) / CARTESIAN_STEP_RAD))))
    out, q = [], q0.copy()
    for k in range(1, steps + 1):
        s = k / steps
        target = start.copy()
        R = axis_angle_matrix(turn * s)
        if frame == "tool":
            target[:3, 3] = start[:3, 3] + start[:3, :3] @ (move * s)
            target[:3, :3] = start[:3, :3] @ R
        else:
            target[:3, 3] = start[:3, 3] + move * s
            target[:3, :3] = R @ start[:3, :3]
        r = ik_lm(model, [Task(model.tool_frame, target)], q, tol=1e-10)
        if not r.success or np.max(np.abs(r.q - q)) > 0.2:
            where = ", ".join(f"{1000 * v:.1f}" for v in target[:3, 3])
            raise InputError(f"jog: the tool cannot go on along that line at ({where}) mm, {100 * s:.0f} % of the "
                             f"way: {r.reason or 'a joint would jump (a singularity)'}; jog a shorter way or "
                             "another way round")
        q = r.q
        out.append(q.copy())
    return out


def _cartesian(client, model, q0, offset, args) -> int:

    if model.floating:
        raise InputError(f"jog: {model.name} is a humanoid: a Cartesian jog moves an arm's tool; jog its joints "
                         "(hil ctl jog JOINT DEG)")
    model = _full_model(client)
    waypoints = cartesian_waypoints(model, q0, offset, args.frame)
    wait_s = _timeout(model, q0, waypoints[-1], args.timeout)
    deadline = time.monotonic() + wait_s
    for k, q in enumerate(waypoints):
        answer = client.jog(q)
        if not answer.ok:
            return _refused(client, "jog", answer) if k == 0 else _short(f"step {k + 1} of {len(waypoints)} refused: "
                                                                          f"{answer}")
        last = k == len(waypoints) - 1
        if args.no_wait and last:
            print(f"{client.name}: {answer}")
            return EXIT_DONE
        # the next step goes out as this one is nearly reached: the tool keeps moving along the line
        ok, got = wait_arrived(client, q, max(0.1, deadline - time.monotonic())) if last else \
            _near(client, q, waypoints[k - 1] if k else q0, deadline)
        if not ok:
            return _short(got)
    tool = model.fk(got.q_meas)[:3, 3] * 1000
    print(f"{client.name}: there: tool at ({', '.join(f'{v:.1f}' for v in tool)}) mm measured")
    return EXIT_DONE


def _near(client, q: np.ndarray, q_prev: np.ndarray, deadline: float):
    """Wait until the command is most of the way from q_prev to q (the same stops as wait_arrived)."""
    from hil.runtime.lifecycle import ENABLED_MODES, Mode

    span = max(float(np.max(np.abs(q - q_prev))), ARRIVED_RAD)
    while True:
        s = client.snapshot()
        if np.max(np.abs(s.q_cmd - q)) < 0.5 * span + ARRIVED_RAD:
            return True, s
        if Mode(int(s.mode)) not in ENABLED_MODES:
            return False, f"the robot is {Mode(int(s.mode)).name} ({s.event})"
        if time.monotonic() > deadline:
            return False, f"not there in time ({s.event})"
        time.sleep(0.005)


def _short(why: str) -> int:

    print(f"hil ctl jog: stopped short: {why}", file=sys.stderr)
    return EXIT_SHORT


def move(client, args) -> int:
    model = _model(client)
    if args.pose not in model.poses:
        raise InputError(f"move: {model.name} has no pose {args.pose!r}{did_you_mean(args.pose, model.poses)}; its "
                         f"poses: {', '.join(model.poses)}")
    return _go(client, model, "move", model.poses[args.pose].copy(), args.no_wait, args.timeout)


# ------------------------------------------------------------------ motions and recordings
def play(client, args) -> int:
    """Plan FILE as `hil run --motion FILE` would (every check, the loop's servos and bus map),
    hand it to the loop, start it (and with --wait see it to its end)."""
    from hil import board_config, robots
    from hil.cli.common import planning
    from hil.runtime import remote, run_card
    from hil.runtime.motion_sources import Trajectory, make_motion

    if not (math.isfinite(args.speed) and 0 < args.speed <= 1):
        raise InputError(f"--speed {args.speed:g}: give a fraction of the written pace, 0 < F <= 1")
    if not args.file.endswith((".toml", ".json", ".npz")):
        raise InputError(f"play: {args.file}: give a motion file (.toml or .json keyframes, .npz trajectory)")
    card, bus = run_card.read(client.name), run_card.bus(client.name)
    robot = robots.load(card["robot"])
    servo = board_config.servos_of(board_config.within_config(robot, bus), bus)
    try:
        with planning(f"{args.file} for {robot.name}"):
            motion = make_motion(args.file, robot, servo, card["compensate"] and not args.no_compensation,
                                 args.speed, card["strict"])
    except InputError as e:   # the planner speaks to `hil run`: here the robot is the loop's
        raise InputError(re.sub(r"play it with --robot (\S+)", r"play it on a loop of \1 (hil run --robot \1)",
                                str(e))) from None
    if not isinstance(motion, Trajectory):
        raise InputError(f"play: {args.file} is not a planned motion")
    answer = remote.post_motion(client, motion)
    if not answer.ok:
        return _refused(client, "play", answer)
    print(f"{client.name}: {answer}")
    if args.no_start:
        return EXIT_DONE
    answer = client.start_motion()
    if not answer.ok:
        return _refused(client, "play", answer)
    print(f"{client.name}: {answer}")
    if not args.wait:
        return EXIT_DONE
    ok, why = _wait_motion_end(client, motion.duration, args.timeout)
    if not ok:
        print(f"hil ctl play: stopped short: {why}", file=sys.stderr)
        return EXIT_SHORT
    print(f"{client.name}: motion '{motion.name}' done")
    return EXIT_DONE


def _wait_motion_end(client, duration_s: float, given: float | None):
    from hil.runtime.lifecycle import ENABLED_MODES, Activity, Mode
    from hil.runtime.shared import LoopStatus

    timeout_s = given if given is not None else 2.0 * duration_s + 30.0
    deadline = time.monotonic() + timeout_s
    started = False
    while True:
        s = client.snapshot()
        running = int(s.activity) == Activity.MOTION
        started = started or (running and s.motion_progress > 0)
        if started and s.motion_progress >= 1.0:
            return True, ""
        if Mode(int(s.mode)) not in ENABLED_MODES:
            return False, f"the robot is {Mode(int(s.mode)).name} ({s.event})"
        if started and not running:
            return False, f"the motion stopped at {100 * s.motion_progress:.1f} % ({s.event})"
        if client.status() in (LoopStatus.STOPPED, LoopStatus.FAILED):
            return False, f"the loop ended ({s.event})"
        if time.monotonic() > deadline:
            return False, f"not done within {timeout_s:g} s ({s.event})"
        time.sleep(0.02)


def record(client, args) -> int:
    from hil.runtime import remote
    from hil.runtime.shared import LoopRequest

    if args.what == "start":
        if not args.file:
            raise InputError("record start: name the file to record into (hil ctl record start run.npy)")
        if not args.file.endswith(".npy"):
            raise InputError(f"record start: {args.file}: a recording is a .npy file (numpy.load reads it)")
        from hil.inputs import writable_file

        writable_file(args.file, "record start", in_place=True)   # said here, with what to do, not as the loop's errno
        answer = remote.post_record_start(client, args.file)
    else:
        if args.file:
            raise InputError("record stop: takes no file (it stops the recording that runs)")
        answer = client.state.wait_answer(client.state.post(LoopRequest.RECORD_STOP), remote.MOTION_ANSWER_S)
    if not answer.ok:
        return _refused(client, f"record {args.what}", answer)
    print(f"{client.name}: {answer}")
    return EXIT_DONE
