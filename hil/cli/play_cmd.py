"""`hil play`: a keyframe motion (or a trajectory) checked, then run."""

from __future__ import annotations

from hil.cli.common import (add_command, add_predict_options, add_run_options, add_run_target, check_predict_options,
                            planning, predicted, servo_for, set_dry_run_bus, speed_of)
from hil.cli.running import run_planned
from hil.errors import HilError, InputError
from hil.inputs import number, read_text
from hil.options import LOOP_RATE_RANGE_HZ


def register(sub) -> None:
    s = add_command(sub, "play", "play a motion file (keyframes .toml/.json, or a trajectory .npz)",
                    "The motion is sampled at the loop's rate and every sample checked (ranges, speeds, "
                    "self-collision, balance — for a walking motion its ZMP instead of the static COM) before "
                    "anything runs; the first bad sample is named.",
                    ["hil play examples/wave.toml --dry-run", "hil play examples/bow.toml --port /dev/ttyACM0"])
    s.add_argument("file", metavar="FILE", help="a motion file (.toml or .json keyframes, see examples/) or a "
                                                "trajectory .npz with t (N,) and q (N, joints)")
    s.add_argument("--robot", help="the robot the motion is for (default: the file's `robot`, else humanoid17); "
                                   "a shipped name, a URDF file or a robot .toml file")
    add_run_options(s, "rate_hz")
    add_run_target(s)
    add_predict_options(s)
    s.set_defaults(func=run, check_before_loading=check_before_loading)


def check_before_loading(args) -> None:
    """What needs no robot model: the rate, the file's kind, --speed."""
    if args.rate_hz is not None:
        number(args.rate_hz, "--rate", *LOOP_RATE_RANGE_HZ, "Hz")
    if not args.file.endswith((".toml", ".json", ".npz")):
        raise InputError(f"{args.file}: hil play takes a motion file (.toml, .json) or a trajectory (.npz)")
    speed_of(args)


def run(args) -> int:
    from hil import robots
    from hil.runtime.motion_sources import make_motion

    model = robots.load(args.robot or _robot_named_in(args.file))
    set_dry_run_bus(args, model, "play")
    # validates the file (errors name keyframe and joint), plans its torques and compensation
    speed = speed_of(args)
    check_predict_options(args, model)
    servo = servo_for(args, model)
    rate = args.rate_hz if args.rate_hz is not None else model.default_rate_hz

    def plan_at(pace: float):
        # every sample checked as the loop checks it (hil.motion.plan_check), before anything runs
        with planning(f"{args.file} for {model.name}"):
            motion = make_motion(args.file, model, servo, args.compensate, speed * pace, args.strict)
        if getattr(motion, "note", ""):
            print(f"{args.file}: {motion.note}")
        print(f"{args.file}: {motion.name}, {motion.duration:.2f} s, {len(motion.q)} samples; checks ok")
        if motion.torques is not None:
            print(motion.torques.summary())
        return motion, motion.t, motion.q, None
    _, pace = predicted(args, model, servo, rate, args.file, plan_at)
    if not (args.dry_run or args.port):
        return 0
    return run_planned(args, model.spec, args.file, speed=speed * pace)


def _robot_named_in(path: str) -> str:
    """The `robot` a keyframe file names (the file's errors are reported when it is loaded)."""
    from hil.inputs import parse_json, parse_toml

    try:
        text = read_text(path, "motion file")
        data = parse_toml(text, path) if path.endswith(".toml") else parse_json(text, path) \
            if path.endswith(".json") else {}
    except HilError:
        return "humanoid17"
    robot = data.get("robot") if isinstance(data, dict) else None
    return robot if isinstance(robot, str) and robot else "humanoid17"
