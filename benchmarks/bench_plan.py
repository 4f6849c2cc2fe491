"""How long `hil play` plans a long keyframe motion: a humanoid17 file of N one-second keyframes
(an arm waving), planned as `hil play` plans it (sampled, slowed where its joints need it, its
torques and compliance compensation, every sample checked as the loop checks it); beside it the
sampling alone, as the baseline of the same run. With --walk N: how long `hil walk` plans N steps
(bent-knee and knee-stretched; the IK sample by sample, its checks, torques and compensation),
beside the gait's timeline alone (footsteps, soles, ZMP reference, COM) as the baseline.

    python benchmarks/bench_plan.py [--seconds 300] [--rounds 3]
    python benchmarks/bench_plan.py --walk 100 [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def motion_file(seconds: int) -> str:
    lines = ['name = "long wave"', 'robot = "humanoid17"', 'interpolation = "cubic"']
    for k in range(seconds):
        lines += ["[[keyframe]]", "duration_s = 1.0"] + (['support = "both"'] if k == 0 else []) + [
            f"joints = {{ r_elbow = {30 if k % 2 else 80}.0, r_shoulder_roll = 60.0 }}", ""]
    fd, path = tempfile.mkstemp(suffix=".toml", prefix="bench-plan-")
    with os.fdopen(fd, "w") as f:
        f.write("\n".join(lines))
    return path


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--walk", type=int, default=0, help="plan a walk of this many steps instead")
    args = ap.parse_args()
    if args.walk:
        return walk(args.walk, args.rounds)
    from hil import robots
    from hil.motion.keyframes import load_motion
    from hil.runtime.motion_sources import make_motion

    model = robots.load("humanoid17")
    path = motion_file(args.seconds)
    try:
        make_motion("examples/wave.toml", model)   # the kernels loaded, not timed
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            load_motion(path, model).trajectory(model.default_rate_hz)
            sampled = time.perf_counter() - t0
            t0 = time.perf_counter()
            traj = make_motion(path, model)
            planned = time.perf_counter() - t0
            print(f"{args.seconds} s of keyframes, {len(traj.q)} samples: planned in {planned:.2f} s "
                  f"(sampling alone {sampled:.2f} s: {planned / sampled:.1f}×)")
        print(f"peak memory of the process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    finally:
        os.unlink(path)
    return 0


def walk(steps: int, rounds: int) -> int:
    from hil import robots
    from hil.motion import walking
    from hil.motion.gait import Gait, footsteps
    from hil.kinematics.floating import FloatingBase

    model = robots.load("humanoid17")
    walking.plan(model, walking.WalkParams(steps=2), say=lambda s: None)   # the kernels loaded, not timed
    for stretched in (False, True):
        p = walking.WalkParams(steps=steps, knee_stretched=stretched, stand=0.5, double_support=0.25, crouch=0.008)
        for _ in range(rounds):
            t0 = time.process_time()
            base = FloatingBase(model, "l_sole", model.home)
            W_l, W_r = base.frame_pose(model.home, "l_sole"), base.frame_pose(model.home, "r_sole")
            width = float(np.linalg.norm(W_l[:3, 3] - W_r[:3, 3]))
            gait = Gait(p, footsteps(p, W_l, W_r, width), W_l, W_r, 1.0 / p.rate_hz, *model.sole_half,
                        base.com(model.home))
            timeline = time.process_time() - t0
            t0 = time.process_time()
            res = walking.plan(model, walking.WalkParams(steps=steps, knee_stretched=stretched), say=lambda s: None)
            planned = time.process_time() - t0
            print(f"{steps} steps {'knee-stretched' if stretched else 'bent-knee'}, {len(res.t)} samples: planned in "
                  f"{planned:.2f} CPU-s ({planned / len(res.t) * 1e6:.0f} µs a sample; the gait's timeline alone "
                  f"{timeline:.3f} CPU-s: {planned / timeline:.0f}×)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
