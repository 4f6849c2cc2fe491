"""`hil fk`: a frame's pose at a joint configuration."""

from __future__ import annotations

import math

from hil.cli.common import ROBOT_HELP, add_command
from hil.errors import InputError, did_you_mean


def register(sub) -> None:
    s = add_command(sub, "fk", "forward kinematics: print a frame's pose",
                    "Position in millimetres, orientation as roll, pitch, yaw in degrees "
                    "(R = Rz(yaw)·Ry(pitch)·Rx(roll)) and the 4×4 transform in metres, in the robot's base frame.",
                    ["hil fk --robot puma560 --q-deg 90 -45 135 0 45 0",
                     "hil fk --robot humanoid17 --pose home --frame l_hand"])
    s.add_argument("--robot", required=True, help=ROBOT_HELP)
    g = s.add_mutually_exclusive_group()
    g.add_argument("--q-deg", type=float, nargs="+", metavar="DEG", help="joint angles in degrees, one per joint")
    g.add_argument("--pose", help="a named pose (see `hil robots`); default: the home pose")
    s.add_argument("--frame", help="frame name (see `hil robots`); default: the tool frame")
    s.set_defaults(func=run)


def run(args) -> int:
    import numpy as np

    from hil import robots
    from hil.kinematics.rotations import rpy_angles

    m = robots.load(args.robot)
    if args.pose:
        if args.pose not in m.poses:
            raise InputError(f"{m.name}: unknown pose {args.pose!r}{did_you_mean(args.pose, m.poses)}; poses: "
                             f"{', '.join(m.poses)}")
        q = m.poses[args.pose]
    elif args.q_deg is not None:
        if len(args.q_deg) != m.n:
            raise InputError(f"{m.name} has {m.n} joints ({', '.join(m.joint_names)}); --q-deg got "
                             f"{len(args.q_deg)} values")
        if not all(math.isfinite(v) and abs(v) <= 3600 for v in args.q_deg):
            raise InputError("--q-deg: angles must be finite numbers of degrees, within ±3600 (ten turns)")
        q = np.radians(np.asarray(args.q_deg, dtype=float))
    else:
        q = m.home
    frame = args.frame or m.tool_frame
    T = m.fk_frame(q, frame)
    roll, pitch, yaw = (math.degrees(a) for a in rpy_angles(T[:3, :3]))
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
