"""`hil path`: a G-code contour planned on the PUMA, and run."""

from __future__ import annotations

from hil.cli.common import add_command, add_run_target, floats, run_planned, servo_for, speed_of, trajectory_out
from hil.errors import InputError, UnreachableError
from hil.inputs import number, read_text, writable_file


def register(sub) -> None:
    s = add_command(sub, "path", "plan a G-code contour on the PUMA (and run it: --dry-run or --port)",
                    "Reads G0 G1 G2 G3 (G17-19 planes, G20/G21 units, G90/G91), places the program's frame in "
                    "the robot's base, solves the IK along it on one branch, checks ranges, speeds, floor, "
                    "workspace and clearance for every sample, then runs it through the loop.",
                    ["hil path examples/rounded_rect.nc --dry-run",
                     "hil path examples/saddle.nc --place 200,500,-300,0,0,0 --out saddle.npz"])
    s.add_argument("file", metavar="FILE.nc", help="G-code program (mm or inch, G0 G1 G2 G3)")
    s.add_argument("--robot", default="puma560", help="the arm (a PUMA 560 model)")
    s.add_argument("--place", default="200,500,-300,0,0,0",
                   help="workpiece frame in the base: x,y,z (mm),roll,pitch,yaw (deg)")
    s.add_argument("--tool-mm", default="0,0,150", help="tool tip in the flange frame: x,y,z (mm)")
    s.add_argument("--chord-mm", type=float, default=0.05, help="largest chord error of the discretisation (mm)")
    s.add_argument("--rate", type=float, help="trajectory sample rate = loop rate, Hz (default: the robot's)")
    s.add_argument("--out", metavar="TRAJ.npz", help="write t, q, p_prog, line to this file")
    add_run_target(s)
    s.set_defaults(func=run)


def run(args) -> int:
    import numpy as np

    from hil import robots
    from hil.motion import gcode, path

    model = robots.load(args.robot)
    if "dh" not in model.meta:
        raise InputError(f"hil path drives the PUMA 560; {model.name} is not a PUMA")
    number(args.chord_mm, "--chord-mm", 0.001, 10, "mm")
    rate = number(args.rate if args.rate is not None else float(model.meta.get("default_rate_hz", 500)),
                  "--rate", 10, 1000, "Hz")
    writable_file(args.out, "--out")
    prog = gcode.parse(read_text(args.file, "G-code program"), args.file)
    T_place = path.placement(*floats(args.place, 6, "--place x,y,z,roll,pitch,yaw (mm, deg)"))
    tool = np.eye(4)
    tool[:3, 3] = np.array(floats(args.tool_mm, 3, "--tool-mm x,y,z")) * 1e-3
    plan = path.plan_path(model, prog, T_place, tool, args.chord_mm, rate, speed=speed_of(args), strict=args.strict)
    print(plan.summary())
    from hil.motion.torques import torque_plan

    torques = torque_plan(model, plan.t, plan.q, None, servo_for(args, model), not args.no_compensation)
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
