"""Contours on any arm: IK per path point (one `follow`, seeded from the previous point's solution)
and a whole plan of seed 001's rounded rectangle, on the PUMA 560 (closed form), LeRobot's SO-101
(prioritised LM, 5 joints) and example-robot-data's UR5 (prioritised LM, 6 joints), in one run.

    python benchmarks/bench_path.py
"""

from __future__ import annotations

import time

import numpy as np

from hil import robots
from hil.motion import gcode, path
from hil.motion.path_ik import path_ik
from hil.robots import urdf


def arms():
    ur5 = str(urdf.resolve_file("package://example-robot-data/robots/ur_description/urdf/ur5_robot.urdf", __file__))
    tool = np.eye(4)
    tool[2, 3] = 0.15
    return [("puma560 (closed form)", robots.load("puma560"), tool, 1.0),
            ("so101 (LM, 5 joints)", robots.load("so101"), np.eye(4), 0.4),
            ("ur5 (LM, 6 joints)", robots.load(ur5), np.eye(4), 1.0)]


def per_point(model, tool, scale, rounds: int = 5) -> float:
    """µs per path point, the best of `rounds` passes over the rounded rectangle's points."""
    prog = gcode.parse(open("examples/rounded_rect.nc").read(), "r").scaled(scale)
    T = path.placement(*path.default_place(model))
    pts, seg_of, stop, u_of = path._discretise(prog, 0.05, path._check_size(prog, 0.05, 1.0))
    ik = path_ik(model, tool, T)
    starts, _ = ik.starts(pts[0], model.home)
    best = np.inf
    for _ in range(rounds):
        q = starts[0][0]
        t0 = time.perf_counter()
        for p in pts[1:]:
            q, _ = ik.follow(p, q)
        best = min(best, (time.perf_counter() - t0) / (len(pts) - 1))
    return best * 1e6


def main() -> None:
    print(f"{'arm':<24} {'IK per point':>14} {'× PUMA':>8} {'whole plan':>11} {'samples':>8}")
    base = None
    for name, model, tool, scale in arms():
        us = per_point(model, tool, scale)
        base = base or us
        prog = gcode.parse(open("examples/rounded_rect.nc").read(), "r").scaled(scale)
        t0 = time.perf_counter()
        plan = path.plan_path(model, prog, path.placement(*path.default_place(model)), tool, rate_hz=200.0)
        whole = time.perf_counter() - t0
        print(f"{name:<24} {us:>11.1f} µs {us / base:>7.1f}× {whole:>9.2f} s {len(plan.t):>8}")


if __name__ == "__main__":
    main()
