"""How fast `--predict` rolls a motion out: a humanoid17 walk of 6 steps (as `hil walk --predict`
plans it), N rollouts on one process and on every core; the one-process run is the baseline of the
same run, and the ratio is what the cores give.

    python benchmarks/bench_predict.py [--rollouts 64] [--steps 6]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rollouts", type=int, default=64)
    ap.add_argument("--steps", type=int, default=6)
    args = ap.parse_args()
    from hil import robots
    from hil.motion import walking
    from hil.physics.predict import predict

    model = robots.load("humanoid17")
    res = walking.plan(model, walking.WalkParams(steps=args.steps, rate_hz=model.default_rate_hz), say=lambda s: None)
    travel = res.com_w[-1] - res.com_w[0]
    print(f"walk: {args.steps} steps, {res.t[-1]:.2f} s of motion (+ about 3 s standing, ramping in, holding)")
    timed = {}
    for workers in sorted({1, os.cpu_count() or 1}):
        t0 = time.perf_counter()
        pred = predict(model, res.t, res.q_cmd, args.rollouts, rate_hz=model.default_rate_hz,
                       planned_travel_m=travel, workers=workers)
        timed[workers] = time.perf_counter() - t0
        print(f"{workers} process(es): {args.rollouts} rollouts in {timed[workers]:.1f} s "
              f"({args.rollouts / timed[workers]:.2f} rollouts/s); {pred.summary()}")
    if len(timed) > 1:
        n = max(timed)
        print(f"{n} processes against one: {timed[1] / timed[n]:.2f}× as fast")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
