"""Robots loaded from URDF files: hil's kernels on them against Pinocchio loading the same file.

A 6-DOF arm (UR5) and a 29-DOF humanoid (Unitree G1), both from the example-robot-data package
(`pip install -e '.[test]'`). Prints ns per call, best of several repeats (as bench_kinematics.py),
the ratio hil/Pinocchio, and how long loading takes (built, then from the cache).
Run: `python benchmarks/bench_urdf.py`.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

import numpy as np

os.environ.setdefault("NUMBA_CACHE_DIR", os.path.join(os.path.dirname(__file__), "..", ".numba_cache"))

from hil.robots import urdf  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from bench_kinematics import per_call_ns  # noqa: E402

ROBOTS = [("UR5 arm, 6 joints", "ur_description/urdf/ur5_robot.urdf", {}, "tool0"),
          ("G1 humanoid, 29 joints", "g1_description/urdf/g1_29dof_rev_1_0.urdf",
           {"robot": {"kind": "humanoid"}, "soles": {"left": "left_ankle_roll_link", "right": "right_ankle_roll_link"}},
           "left_rubber_hand")]


def load_times(path: str, side: dict) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as cache:
        os.environ["XDG_CACHE_HOME"] = cache
        t0 = time.perf_counter()
        urdf.build(path, side)
        t1 = time.perf_counter()
        urdf.build(path, side)
        t2 = time.perf_counter()
    os.environ.pop("XDG_CACHE_HOME")
    return t1 - t0, t2 - t1


def main() -> int:
    import pinocchio as pin
    from hil.kinematics.ik import Task, ik_lm

    print(f"{'call':<46} {'hil (ns)':>10} {'Pinocchio (ns)':>15} {'hil/Pin':>8}")
    for label, rel, side, frame in ROBOTS:
        path = str(urdf.resolve_file("package://example-robot-data/robots/" + rel, __file__))
        built, cached = load_times(path, side)
        m = urdf.build(path, side)
        pm = pin.buildModelFromUrdf(path)
        pd = pm.createData()
        q = np.random.default_rng(1).uniform(m.lower, m.upper) * 0.5
        qp = pin.neutral(pm)
        for i, name in enumerate(m.joint_names):
            qp[pm.joints[pm.getJointId(name)].idx_q] = q[i]
        fid = pm.getFrameId(frame)
        rows = [
            (f"FK, all {len(m.frame_names)} frames", per_call_ns(m.fk_frames, q, n=20000),
             per_call_ns(pin.framesForwardKinematics, pm, pd, qp, n=20000)),
            (f"Jacobian of {frame}", per_call_ns(m.jacobian, q, frame, n=20000),
             per_call_ns(pin.computeFrameJacobian, pm, pd, qp, fid, pin.LOCAL_WORLD_ALIGNED, n=20000)),
            ("centre of mass", per_call_ns(m.com, q, n=20000), per_call_ns(pin.centerOfMass, pm, pd, qp, n=20000)),
        ]
        T = m.fk_frame(q, frame)
        start = np.clip(q + 0.05, m.lower, m.upper)
        rows.append((f"LM IK, {frame} 6D from 0.05 rad away", per_call_ns(
            lambda: ik_lm(m, [Task(frame, T)], start), n=200), float("nan")))
        print(f"{label}: loading {built * 1e3:.0f} ms built, {cached * 1e3:.0f} ms from the cache")
        for name, ours, theirs in rows:
            ratio = f"{ours / theirs:>8.2f}" if theirs == theirs else f"{'—':>8}"
            pin_s = f"{theirs:>15.0f}" if theirs == theirs else f"{'—':>15}"
            print(f"  {name:<44} {ours:>10.0f} {pin_s} {ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
