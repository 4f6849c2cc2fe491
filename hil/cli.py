"""The `hil` command line. Degrees and millimetres at this boundary, SI inside.

Subcommands import what they need lazily so that `hil --version` and `hil --help` stay fast.
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import Sequence

import hil
import hil.errors


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
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except hil.errors.HilError as e:
        print(f"hil {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"hil {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
