"""`hil path`: a G-code contour planned on an arm (the PUMA 560, or any arm hil loads), and run."""

from __future__ import annotations

from hil.cli.common import (add_command, add_run_options, add_run_target, floats, planning, servo_for, speed_of,
                            set_dry_run_bus, trajectory_out)
from hil.cli.running import run_planned
from hil.errors import InputError, UnreachableError
from hil.inputs import number, read_text, writable_file
from hil.options import LOOP_RATE_RANGE_HZ

PLACE_HELP = "workpiece frame in the robot's base: x,y,z (mm),roll,pitch,yaw (deg)"


def register(sub) -> None:
    s = add_command(sub, "path", "plan a G-code contour on an arm (and run it: --dry-run or --port)",
                    "Reads G0 G1 G2 G3 (G17-19 planes, G20/G21 units, G90/G91), places the program's frame in "
                    "the robot's base, solves the arm's IK along it with the tool's axis normal to the workpiece "
                    "(the PUMA 560's closed form on one branch; prioritised IK on any other arm, its roll free on a "
                    "5-joint arm), checks ranges, speeds, floor, workspace and clearance for every sample, then runs "
                    "it through the loop.",
                    ["hil path examples/rounded_rect.nc --dry-run",
                     "hil path examples/saddle.nc --place 200,500,-300,0,0,0 --out saddle.npz",
                     "hil path examples/so101_square.nc --robot so101 --dry-run",
                     "hil path examples/semicircle.nc --robot arm.urdf --scale 0.5 --place 250,0,50,0,0,0"])
    s.add_argument("file", metavar="FILE.nc", help="G-code program (mm or inch, G0 G1 G2 G3)")
    s.add_argument("--robot", default="puma560", help="the arm: a shipped name (puma560, so101), a URDF file or a "
                                                      "robot .toml file")
    s.add_argument("--place", help=PLACE_HELP + " (default: the robot's own, else a third of its reach in front of "
                                   "its base, on its base's plane)")
    s.add_argument("--tool-mm", help="tool tip in the tool frame: x,y,z (mm) (default: the robot's own, else 0,0,0)")
    s.add_argument("--scale", type=float, default=1.0,
                   help="scale the program about its origin first (0.5: half size), to fit a smaller arm")
    s.add_argument("--orientation", choices=("full", "axis"),
                   help="full: the tool's axis and its roll held; axis: the axis normal to the workpiece, roll free "
                        "(default: full on an arm of six joints or more, axis on one of five)")
    s.add_argument("--chord-mm", type=float, default=0.05, help="largest chord error of the discretisation (mm)")
    add_run_options(s, "rate_hz")
    s.add_argument("--out", metavar="TRAJ.npz", help="write t, q, p_prog, line to this file")
    add_run_target(s)
    s.set_defaults(func=run, check_before_loading=check_before_loading)


def check_before_loading(args) -> None:
    """What needs no robot model: the numbers given, the file to write, --speed."""
    number(args.chord_mm, "--chord-mm", 0.001, 10, "mm")
    number(args.scale, "--scale", 1e-3, 1e3)
    if args.rate_hz is not None:
        number(args.rate_hz, "--rate", *LOOP_RATE_RANGE_HZ, "Hz")
    writable_file(args.out, "--out")
    speed_of(args)


def run(args) -> int:
    import numpy as np

    from hil import robots
    from hil.motion import gcode, path

    model = robots.load(args.robot)
    set_dry_run_bus(args, model, "path")
    if model.kind != "arm":
        raise InputError(f"hil path plans a contour for an arm; {model.name} is a {model.kind} (hil walk, hil play)")
    scale = float(args.scale)
    rate = number(args.rate_hz if args.rate_hz is not None else model.default_rate_hz,
                  "--rate", *LOOP_RATE_RANGE_HZ, "Hz")
    prog = gcode.parse(read_text(args.file, "G-code program"), args.file)
    if scale != 1.0:
        prog = prog.scaled(scale)
    place = floats(args.place, 6, f"--place {PLACE_HELP}") if args.place else path.default_place(model)
    T_place = path.placement(*place)
    tool = np.eye(4)
    tool_mm = floats(args.tool_mm, 3, "--tool-mm x,y,z") if args.tool_mm else \
        [float(v) for v in (model.meta.get("path") or {}).get("tool_mm", (0.0, 0.0, 0.0))]
    tool[:3, 3] = np.array(tool_mm) * 1e-3
    from hil.motion import progress
    from hil.motion.torques import torque_plan

    with planning(f"{args.file} on {model.name}"):
        plan = path.plan_path(model, prog, T_place, tool, args.chord_mm, rate, speed=speed_of(args),
                              strict=args.strict, orientation=args.orientation)
        progress.report("the servos' torques")
        torques = torque_plan(model, plan.t, plan.q, None, servo_for(args, model), args.compensate)
    print(plan.summary())
    if torques.over():
        raise UnreachableError(torques.refusal(args.file) + "; lower the feed (F) or place the work nearer the base")
    print(torques.summary())
    out = trajectory_out(args, "hil-path-", "traj.npz")
    if out:
        plan.save(out, torques)
        print(f"trajectory: {out} (t, q, p_prog, line)")
    if not (args.dry_run or args.port):
        return 0
    return run_planned(args, model.spec, out, rate=rate, path_file=out)

