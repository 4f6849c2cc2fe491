"""`hil walk`: a walk planned for the humanoid, and run."""

from __future__ import annotations

import os
import time
from dataclasses import replace

from hil.cli.common import (add_command, add_predict_options, add_run_options, add_run_target,
                            check_predict_options, predicted, servo_for, set_dry_run_bus, speed_of, trajectory_out)
from hil.cli.running import run_planned
from hil.errors import InputError
from hil.inputs import number, writable_file
from hil.options import LOOP_RATE_RANGE_HZ


GENERATIONS = 40   # --find-gait's default (what it takes on the Open Duck Mini: benchmarks/README.md)


def register(sub) -> None:
    s = add_command(sub, "walk", "plan a walk for the humanoid (ZMP preview control, prioritised IK)",
                    "Footsteps from the options, a COM from ZMP preview control, joint angles from prioritised "
                    "IK with support-foot switching; the ZMP is computed back from the joint motion and checked "
                    "against the support polygon before anything runs.",
                    ["hil walk --steps 6 --stride 0.03 --dry-run",
                     "hil walk --steps 4 --side 0.01 --out walk.npz --motion-out walk.toml"])
    s.add_argument("--robot", default="humanoid17", help="a humanoid model with l_sole and r_sole frames")
    s.add_argument("--steps", type=int, default=6, help="number of steps, 1 … 100")
    s.add_argument("--stride", type=float, help="forward step length (m); default: scaled to the legs (3 cm on "
                                                "humanoid17's 0.195 m legs)")
    s.add_argument("--width", type=float, help="distance between the soles (m); default: as at home")
    s.add_argument("--side", type=float, default=0.0, help="sideways step per step (m, + left)")
    s.add_argument("--turn", type=float, default=0.0, help="turn per step (degrees)")
    s.add_argument("--period", type=float, help="time per step (s); default: scaled to the legs (0.8 s on humanoid17)")
    s.add_argument("--lift", type=float, help="swing foot clearance (m); default: scaled to the legs (12 mm on "
                                              "humanoid17)")
    s.add_argument("--knee-stretched", action="store_true",
                   help="walk as tall as the legs allow (prioritised IK on a minimal support region: the knees "
                        "straighten, the COM height follows); forwards, the feet roll: toe-off and heel strike")
    roll = s.add_mutually_exclusive_group()
    roll.add_argument("--heel-toe", dest="heel_toe", action="store_const", const=True,
                      help="the feet roll on the ground in any walk: each lifts off from its toe and lands on its heel")
    roll.add_argument("--flat-feet", dest="heel_toe", action="store_const", const=False,
                      help="the soles stay flat while they are down, --knee-stretched too")
    add_run_options(s, "rate_hz")
    s.add_argument("--find-gait", action="store_true",
                   help="legs without an ankle roll: search a rocking walk in the robot's physics (its servos, "
                        "masses, floor varied as --predict varies them) and print it as a side file's [walk] "
                        "table; nothing moves (minutes: --generations)")
    s.add_argument("--generations", type=int, default=GENERATIONS,
                   help=f"with --find-gait: generations of 16 candidate gaits (1 … 500; default {GENERATIONS})")
    s.add_argument("--out", metavar="WALK.npz", help="write t, q, support, COM and ZMP")
    s.add_argument("--motion-out", metavar="FILE.toml", help="write it as a motion file (10 ms keyframes)")
    add_run_target(s)
    add_predict_options(s)
    s.set_defaults(func=run, check_before_loading=check_before_loading)


_NOT_ROCKING = (("stride", None), ("width", None), ("side", 0.0), ("turn", 0.0), ("period", None), ("lift", None),
                ("knee_stretched", False), ("heel_toe", None), ("motion_out", None))


def _walk_rocking(args, model, rate: float) -> int:
    """Legs without an ankle roll (hil.motion.rocking): the rocking walk of the robot's [walk]
    numbers, its balance checked in physics before anything moves."""
    from hil.motion import rocking

    given = [f"--{k.replace('_', '-')}" for k, default in _NOT_ROCKING if getattr(args, k, default) != default]
    gait, source = rocking.gait_of(model)
    if given:
        raise InputError(f"walk: {model.name}'s legs have no ankle roll, so it walks rocking, its gait from {source}: "
                         f"{', '.join(given)} do not apply to it (set the gait in a side file's [walk]: docs/robots.md)")
    check_predict_options(args, model)
    servo = servo_for(args, model)
    rollouts = args.predict if args.predict is not None else rocking.ROLLOUTS
    if args.find_gait:
        return _find_gait(args, model, servo, rate, rollouts)
    print(f"walk: {model.name}'s legs have no ankle roll: it walks rocking — {rocking.describe(gait)} ({source}); "
          f"its balance is checked in physics ({rollouts} rollouts) before anything moves", flush=True)
    res = rocking.plan(model, args.steps, rate, servo, rollouts, speed=speed_of(args))
    print(res.summary())
    print(res.prediction.summary())
    out = trajectory_out(args, "hil-walk-", "walk.npz")
    if out:
        res.save(out)
        print(f"walk: {out} (t, q, q_plan, com_w)")
    if not (args.dry_run or args.port):
        return 0
    return run_planned(args, model.spec, out)


def _find_gait(args, model, servo, rate: float, rollouts: int) -> int:
    """--find-gait: the rocking walk the search finds in the robot's physics, printed as [walk]."""
    from hil.motion import rocking_search

    if args.dry_run or args.port:
        raise InputError("--find-gait searches a gait and prints it; nothing moves: leave out --dry-run and --port")
    print(f"gait search: {args.generations} generations of 16 gaits, each rolled out {rollouts} times in physics "
          f"({args.steps} steps) …", flush=True)
    found = rocking_search.search(model, args.steps, args.generations, rollouts=rollouts, servo=servo, rate_hz=rate,
                                  say=lambda s: print(s, flush=True))
    start = (f"{100 * found.start_score_m:.1f} cm" if found.start_score_m > -rocking_search.FALL_COST_M / 2
             else "a fall")
    print(f"gait search: {found.tried} gaits tried; the best takes its worst robot {100 * found.score_m:.1f} cm "
          f"(the gait it started from: {start}). For the robot's side file:")
    print(rocking_search.as_table(found.gait), end="")
    return 0


def _progress_printer(after_s: float = 2.0):
    """Says how far the plan has come, once it has taken longer than `after_s` (short plans stay quiet)."""
    t0 = time.monotonic()

    def say(fraction: float) -> None:
        if time.monotonic() - t0 > after_s:
            print(f"planning the walk: {100 * fraction:.0f} % …", flush=True)
    return say


def _gait_for_the_legs(args, model) -> list[str]:
    """--stride, --period and --lift not given: scaled to the robot's legs (said); which they were."""
    missing = [k for k in ("stride", "period", "lift") if getattr(args, k) is None]
    if not missing:
        return missing
    from hil.motion.walking import default_gait

    gait = default_gait(model)
    for k in missing:
        setattr(args, k, gait[k])
    chosen = {"stride": f"stride {100 * args.stride:.1f} cm", "period": f"period {args.period:.2f} s",
              "lift": f"lift {1000 * args.lift:.0f} mm"}
    print(f"walk: for legs {100 * gait['leg_m']:.1f} cm long: " + ", ".join(chosen[k] for k in missing)
          + " (" + ", ".join(f"--{k}" for k in missing) + " to choose)")
    return missing


SMALLER_STEPS = (0.6, 0.36)   # a default stride and lift the legs cannot reach: tried at these shares


def _plan_smaller_if_chosen(plan, params, chosen: list[str]):
    """`plan(params)`; where the legs cannot reach the step and its stride or lift was the default
    (`_gait_for_the_legs`), planned again with those smaller (said), before the error is given."""
    from hil.motion import walking

    shrinkable = [k for k in ("stride", "lift") if k in chosen]
    try:
        return plan(params)
    except walking.StepOutOfReach as e:
        if not shrinkable:
            raise
        first = last = e
    for share in SMALLER_STEPS:
        smaller = replace(params, **{k: getattr(params, k) * share for k in shrinkable})
        sizes = ", ".join(f"{k} {getattr(smaller, k) * (100 if k == 'stride' else 1000):.1f} "
                          f"{'cm' if k == 'stride' else 'mm'}" for k in shrinkable)
        print(f"walk: {_cause(last)}; planned again with {sizes}")
        try:
            return plan(smaller)
        except walking.StepOutOfReach as e:
            last = e
    if "stride" not in shrinkable:
        raise first   # names the user's stride, which a shorter one may still help
    # the default step's own error would ask for a shorter step: those were just tried
    shares = " and ".join(f"{s:.0%}" for s in SMALLER_STEPS)
    raise walking.StepOutOfReach(f"walk: {_cause(last)}, also at {shares} of the default step (down to {sizes}): "
                                 "a shorter step does not help; what stops the walk is what this names")


def _cause(error: Exception) -> str:
    """What an error of the walk's planner says is wrong, without its advice."""
    return str(error).split(";")[0].removeprefix("walk: ")


def _check_gait(args) -> None:
    for name, value, lo, hi, unit in (("--stride", args.stride, -0.2, 0.2, "m"), ("--side", args.side, -0.1, 0.1, "m"),
                                      ("--turn", args.turn, -45, 45, "°"), ("--period", args.period, 0.2, 10, "s"),
                                      ("--lift", args.lift, 0.0, 0.1, "m")):
        if value is not None:
            number(value, name, lo, hi, unit)


def check_before_loading(args) -> None:
    """What needs no robot model: the numbers given, the files to write, --speed."""
    if args.rate_hz is not None:
        number(args.rate_hz, "--rate", *LOOP_RATE_RANGE_HZ, "Hz")
    number(args.steps, "--steps", 1, 100)
    _check_gait(args)
    if args.width is not None:
        number(args.width, "--width", 0.02, 0.5, "m")
    writable_file(args.out, "--out")
    writable_file(args.motion_out, "--motion-out")
    speed_of(args)
    number(args.generations, "--generations", 1, 500)
    if args.generations != GENERATIONS and not args.find_gait:
        raise InputError("--generations: the gait search's, only with --find-gait")


def run(args) -> int:
    from hil import robots
    from hil.motion import keyframes, walking

    model = robots.load(args.robot)
    set_dry_run_bus(args, model, "walk")
    if not model.floating:
        raise InputError(f"hil walk needs a robot that stands on its feet (a humanoid: a base free in the world); "
                         f"{model.name} is fixed to the ground (an {model.kind}). "
                         + ("Its MJCF's root body has no <freejoint/>: give it one, or a side file with "
                            "[robot] kind = \"humanoid\"" if model.meta.get("mjcf") else
                            "For a URDF humanoid, a side file with [robot] kind = \"humanoid\" and its [soles] "
                            "(docs/robots.md)"))
    rate = number(args.rate_hz if args.rate_hz is not None else model.default_rate_hz,
                  "--rate", *LOOP_RATE_RANGE_HZ, "Hz")
    walking.check_driven_legs(model)   # a leg that cannot walk is said before anything else
    from hil.motion import rocking

    if rocking.applies(model):
        return _walk_rocking(args, model, rate)
    if args.find_gait:
        raise InputError(f"--find-gait searches a rocking walk, for legs without an ankle roll; {model.name}'s walk "
                         "is planned from --stride, --period and --lift (ZMP preview control)")
    walking.check_legs(model)
    chosen = _gait_for_the_legs(args, model)
    _check_gait(args)   # the gait scaled to the legs, as the numbers given were
    check_predict_options(args, model)
    params = walking.WalkParams(steps=args.steps, stride=args.stride, width=args.width, side=args.side,
                                turn_deg=args.turn, period=args.period / speed_of(args), lift=args.lift,
                                knee_stretched=args.knee_stretched, heel_toe=args.heel_toe, rate_hz=rate)
    servo = servo_for(args, model)

    def plan_at(pace: float):
        res = _plan_smaller_if_chosen(lambda p: walking.plan(model, replace(p, period=p.period / pace),
                                                             _progress_printer(), servo=servo,
                                                             compensate=args.compensate, strict=args.strict),
                                      params, chosen)
        print(res.summary())
        print(res.torques.summary())
        return res, res.t, res.q_cmd, res.com_w[-1] - res.com_w[0]
    res, _ = predicted(args, model, servo, rate, "the walk", plan_at)
    out = trajectory_out(args, "hil-walk-", "walk.npz")
    if out:
        res.save(out)
        print(f"walk: {out} (t, q, support, com_w, zmp_w, zmp_ref)")
    if args.motion_out:
        motion = keyframes.from_walk(res, model, os.path.splitext(os.path.basename(args.motion_out))[0])
        keyframes.save_motion(args.motion_out, motion, model)
        print(f"motion file: {args.motion_out} ({len(motion.keyframes)} frames of 10 ms)")
    if not (args.dry_run or args.port):
        return 0
    return run_planned(args, model.spec, out)
