"""`hil urdf`: a robot model written as URDF."""

from __future__ import annotations

import sys

from hil.cli.common import ROBOT_HELP, add_command
from hil.errors import InputError
from hil.inputs import writable_file


def register(sub) -> None:
    s = add_command(sub, "urdf", "write a robot model as URDF (RViz, Foxglove, Pinocchio, MuJoCo)",
                    "Links and frames keep the model's names and poses (FK of the file equals hil's); joint "
                    "limits and speeds, masses and centres of mass, and the twin's shapes as collision and "
                    "visual geometry (capsules as a cylinder and two spheres). Inertias are those of a solid "
                    "box around each link's shapes.",
                    ["hil urdf --robot puma560 --out puma560.urdf", "hil urdf --robot humanoid17 | less"])
    s.add_argument("--robot", required=True, help=ROBOT_HELP)
    s.add_argument("--out", metavar="FILE.urdf", help="write here (default: standard output)")
    s.set_defaults(func=run)


def run(args) -> int:
    from hil import robots
    from hil.robots.urdf_export import to_urdf

    if args.out:
        writable_file(args.out, "--out")
    text = to_urdf(robots.load(args.robot))
    if not args.out:
        sys.stdout.write(text)
        return 0
    try:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:   # the disk filled, the folder went away
        raise InputError(f"--out {args.out}: not written ({e.strerror or e})") from None
    print(f"wrote {args.out}")
    return 0
