"""Inverse dynamics: `hil.dynamics.inverse_dynamics` against Pinocchio's RNEA (baseline, in the
same run, on hil's own URDF export of each robot: the same masses, centres of mass and inertias),
one call from Python each, best of several repeats; and the torques of a whole 6-step walk
(floating base, contacts split between the feet). Run: `python benchmarks/bench_dynamics.py`
(Pinocchio: `pip install -e '.[bench]'`)."""

from __future__ import annotations

import sys
import tempfile
import time

import numpy as np

import hil.robots
from hil.dynamics import inverse_dynamics
from hil.robots.urdf_export import to_urdf


def best_of(fn, calls: int = 20000, repeats: int = 7) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - t0) / calls)
    return best * 1e6


def main() -> int:
    try:
        import pinocchio as pin
    except ImportError:
        pin = None
        print("(no Pinocchio: pip install -e '.[bench]' for the baseline)")
    rng = np.random.default_rng(0)
    for robot in ("puma560", "humanoid17", "so101"):
        model = hil.robots.load(robot)
        q, qd, qdd = rng.uniform(model.lower, model.upper), rng.normal(size=model.n), rng.normal(size=model.n)
        inverse_dynamics(model, q, qd, qdd)
        ours = best_of(lambda: inverse_dynamics(model, q, qd, qdd))
        line = f"{robot:11s} ({model.n:2d} joints): hil {ours:5.2f} µs"
        if pin is not None:
            with tempfile.NamedTemporaryFile("w", suffix=".urdf") as f:
                f.write(to_urdf(model))
                f.flush()
                pm = pin.buildModelFromUrdf(f.name)
            data = pm.createData()
            names = [pm.names[i] for i in range(1, pm.njoints)]
            idx = [names.index(j) for j in model.joint_names]
            qp, vp, ap = np.zeros(pm.nq), np.zeros(pm.nv), np.zeros(pm.nv)
            qp[idx], vp[idx], ap[idx] = q, qd, qdd
            theirs = best_of(lambda: pin.rnea(pm, data, qp, vp, ap))
            err = np.abs(inverse_dynamics(model, q, qd, qdd) - pin.rnea(pm, data, qp, vp, ap)[idx]).max()
            line += f", Pinocchio {theirs:5.2f} µs: {ours / theirs:.2f}× its time (difference {err:.1e} N·m)"
        print(line)
    from hil.motion import walking
    from hil.motion.torques import motion_torques

    h17 = hil.robots.load("humanoid17")
    res = walking.generate(h17, walking.WalkParams(steps=6))
    t0 = time.perf_counter()
    motion_torques(h17, res.t, res.q, res.support)
    print(f"a 6-step walk's torques (floating base, contacts split): {len(res.t)} samples in "
          f"{(time.perf_counter() - t0) * 1e3:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
