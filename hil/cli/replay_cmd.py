"""`hil replay`: a recording played into the twin, or an episode of a LeRobot dataset played on a
robot (or its emulator) through the checks every motion goes through."""

from __future__ import annotations

import argparse
import os
import tempfile

from hil.cli.common import add_command, add_run_options, servo_for
from hil.cli.running import run_planned, twin_beside_a_run
from hil.errors import InputError

ROLE_SUFFIXES = ("_follower", "_leader")


def register(sub) -> None:
    s = add_command(sub, "replay", "play a recording into the twin, or a LeRobot dataset's episode on a robot",
                    "A recording (hil run --record): publishes the recorded rows as a loop would, so the twin "
                    "shows them; needs the recording's .json beside it. A LeRobot dataset folder with --episode N: "
                    "the episode's actions, turned from LeRobot's units into joint angles by the robot's servo "
                    "map (body joints -100 … 100 over the calibrated range, or degrees with --degrees, the gripper "
                    "0 … 100 %), checked sample by sample as any motion (ranges, speeds, self-collision) and run "
                    "on --port or --dry-run (without either: checked only). A dataset whose motors are not the "
                    "robot's is refused, naming them.",
                    ["hil replay run.npy", "hil replay run.npy --speed 0.5 --loop",
                     "hil replay ~/datasets/so101_pick --episode 3 --robot so101 --dry-run",
                     "hil replay ~/datasets/koch_pick --episode 0 --port /dev/ttyUSB0 --board-config my_koch.toml"])
    s.add_argument("file", metavar="FILE.npy|DIR", help="a recording from `hil run --record`, or a LeRobot dataset")
    s.add_argument("--speed", type=float, default=1.0, help="playback speed factor (an episode on a robot: a "
                                                            "fraction 0 < f ≤ 1 of its pace)")
    s.add_argument("--headless", action="store_true", help="no twin; print progress")
    s.add_argument("--loop", action="store_true", help="repeat until Ctrl-C (a recording)")
    s.add_argument("--episode", type=int, metavar="N", help="the dataset's episode to play (0 for the first)")
    s.add_argument("--robot", help="the robot the episode is played on (default: the dataset's robot_type, "
                                   "so101_follower → so101), or a recording's robot when its .json is lost")
    s.add_argument("--degrees", action="store_true", help="the dataset's body joints are in degrees (LeRobot's "
                                                          "use_degrees; a dataset hil wrote says so itself)")
    g = s.add_mutually_exclusive_group()
    g.add_argument("--dry-run", action="store_true", help="play the episode on the built-in emulator")
    g.add_argument("--port", help="play the episode on the robot at this serial port")
    s.add_argument("--strict", action="store_true", help=argparse.SUPPRESS)   # (run_planned's; episodes never slow)
    add_run_options(s, "rate_hz", "stats_json", "record", "record_errors", "stabilise", "compensate", "bus",
                    "board_config", "watchdog_ms", "bring_in", "emulator", "physics")
    s.set_defaults(func=run)


def run(args) -> int:
    from hil.inputs import number

    if os.path.isdir(args.file) or args.episode is not None:
        return _replay_episode(args)
    from hil.runtime.replay import replay

    number(args.speed, "--speed", 0.01, 100, "× recorded speed")
    return replay(args.file, args.speed, args.headless, args.loop, start_twin=twin_beside_a_run(), robot=args.robot)


def _robot_of(root: str) -> str:
    from pathlib import Path

    from hil.lerobot.dataset import read_info

    kind = read_info(Path(root)).get("robot_type")
    if not isinstance(kind, str) or not kind:
        raise InputError(f"{root}: the dataset names no robot_type; give --robot")
    for suffix in ROLE_SUFFIXES:
        kind = kind.removesuffix(suffix)
    return {"so100": "so100", "so101": "so101", "koch": "koch"}.get(kind, kind)


MAX_LAG_DEG = 10.0   # an episode the joints would trail by more than this is refused: not what was recorded


def _within_limits(model, t, q, where: str, speed: float):
    """The episode as the robot's joints can follow it (their speed and acceleration limits; an
    episode recorded on another arm, or by a quick hand, may ask for more): said when it trails
    what was recorded, refused when by more than MAX_LAG_DEG."""
    import math

    from hil.motion.limits import check_limits, follow_within_limits

    report = check_limits(model, t, q)
    if report.first_over_t is None:
        return q
    followed = follow_within_limits(model, t, q)
    lag = math.degrees(followed.lag_rad)
    name = model.joint_names[followed.joint]
    if lag > MAX_LAG_DEG:
        raise InputError(f"{where}: faster than {model.name}'s joints go (worst: {report.worst}); kept within their "
                         f"limits it would trail the recording by {lag:.1f}° ({name} at t = {followed.at_s:.2f} s): "
                         f"play it slower (--speed {min(1.0, speed / report.time_scale):.2f})")
    print(f"{where}: from t = {report.first_over_t:.2f} s it asks for more than the joints give (worst: "
          f"{report.worst}); played within their limits, it trails the recording by up to {lag:.2f}° "
          f"({name} at t = {followed.at_s:.2f} s)")
    return followed.q


def _robot_of_quietly(root: str) -> str | None:
    try:
        return _robot_of(root)
    except InputError:
        return None


def _replay_episode(args) -> int:
    from hil import board_config, robots
    from hil.cli.common import speed_of
    from hil.lerobot import dataset, motor_calibration
    from hil.lerobot.units import DEGREES, LeRobotUnits
    from hil.runtime.motion_sources import make_motion

    root = args.file
    if not os.path.isdir(root):
        raise InputError(f"{root}: --episode plays an episode of a LeRobot dataset: give the dataset's folder")
    if args.episode is None:
        raise InputError(f"{root}: a LeRobot dataset; name the episode to play with --episode N")
    if args.loop:
        raise InputError("--loop repeats a recording in the twin; an episode plays once")
    speed = speed_of(args)
    model = robots.load(args.robot or _robot_of(root))
    if args.robot and _robot_of_quietly(root) not in (None, model.name):
        print(f"note: {root} was recorded on a {_robot_of_quietly(root)}; its numbers are played as {model.name}'s")
    data = dataset.read_episode(root, args.episode)
    config = board_config.resolve(model, motor_calibration.bus_for(model, args.bus) if not args.board_config
                                  else args.bus, args.board_config)
    kinds = dataset.dataset_units(root)
    degrees = args.degrees or bool(kinds and DEGREES in kinds.values())
    t, q = dataset.episode_trajectory(data, LeRobotUnits(config, degrees), f"{root} episode {args.episode}")
    q = _within_limits(model, t / speed, q, f"{root} episode {args.episode}", speed)
    folder = tempfile.mkdtemp(prefix="hil-replay-")
    path = os.path.join(folder, f"episode_{args.episode}.npz")
    try:
        import numpy as np

        np.savez(path, t=t, q=q)
        motion = make_motion(path, model, servo_for(args, model), args.compensate, speed, strict=True)
    except InputError as e:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)
        raise InputError(str(e).replace(path, f"{root} episode {args.episode}")) from None
    except BaseException:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)
        raise
    print(f"{root} episode {args.episode}: {len(data.action)} frames at {data.fps} fps ({motion.duration:.2f} s"
          f"{f' at {speed:g} of its pace' if speed != 1 else ''}), task {data.task!r}, servo map {config.source}; "
          "checks ok")
    if not (args.dry_run or args.port):
        import shutil

        shutil.rmtree(folder, ignore_errors=True)
        return 0
    args.out, args.stabilise = None, False
    args.bus = config.bus
    return run_planned(args, model.spec, path, speed=speed)
