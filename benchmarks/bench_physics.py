"""Physics in the loop: what it costs and what it buys.

1. The cost of a MuJoCo step (0.5 ms of simulated time) for each shipped robot, against the
   real-time budget (a step must take less than 0.5 ms of CPU for the emulator to keep up), and the
   physics emulator's real-time factor while a walk runs (simulated seconds per wall second).
2. Loop timing with and without physics behind the emulator: `hil walk --dry-run` and
   `hil walk --dry-run --physics`, the same walk, jitter and cycle time from their stats files.
3. Compliance compensation: humanoid17's 6-step walks (bent and knee-stretched), their commands
   replayed open loop in MuJoCo with servos, masses and friction varied, at compensation gains
   0, 1 and 1.5 (the shipped margin): how many variations walk ≥ 90 % of the planned distance
   upright.

Run: `python benchmarks/bench_physics.py [--quick]` (--quick: one walk, fewer variations).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import subprocess
import sys
import tempfile
import time

import numpy as np

HIL = [sys.executable, "-m", "hil.cli"]


def step_cost(robot: str, steps: int = 4000) -> tuple[float, float]:
    """(µs of CPU per mj_step, the same with the plant's Python around it per emulator millisecond)."""
    import mujoco

    import hil.robots
    from hil.physics.build import build
    from hil.physics.physics_plant import PhysicsPlant

    model = hil.robots.load(robot)
    pm = build(model)
    d = mujoco.MjData(pm.model)
    d.qpos[:] = pm.home_qpos
    d.ctrl[:] = model.home
    t0 = time.process_time()
    for _ in range(steps):
        mujoco.mj_step(pm.model, d)
    raw = (time.process_time() - t0) / steps * 1e6
    plant = PhysicsPlant(pm, model.home.copy())
    on = np.ones(model.n, dtype=bool)
    t0 = time.process_time()
    for k in range(steps // 2):   # as the board emulator drives it: every millisecond
        plant.drive(model.home, on)
        plant.advance(k * 0.001)
    per_ms = (time.process_time() - t0) / (steps // 2) * 1e6
    return raw, per_ms


def walk_timing(physics: bool) -> dict:
    with tempfile.TemporaryDirectory() as d:
        stats = f"{d}/stats.json"
        argv = HIL + ["walk", "--steps", "6", "--dry-run", "--headless", "--stats-json", stats]
        if physics:
            argv.append("--physics")
        t0 = time.monotonic()
        r = subprocess.run(argv, capture_output=True, text=True, timeout=600)
        wall = time.monotonic() - t0
        if r.returncode != 0:
            return {"error": r.stderr.strip()[-300:]}
        with open(stats) as f:
            data = json.load(f)
    data["wall_s"] = wall
    return data


def replay_table(quick: bool) -> list[tuple[str, float, int, int]]:
    """(walk, gain, variations that walk, variations) for gains 0, 1, 1.5."""
    sys.path.insert(0, "tests/unit")
    from test_physics_model import _replay   # the independent model the tests build (from hil's URDF)

    import hil.robots
    from hil.motion import walking
    from hil.motion.torques import compensated, torque_plan
    from hil.robots.servos import servo_table
    from hil.robots.urdf_export import to_urdf

    model = hil.robots.load("humanoid17")
    servo = servo_table(model)
    out = []
    grid = list(itertools.product((16, 20, 25), (0.85, 1.15), (0.7,))) if quick else \
        list(itertools.product((16, 18, 20, 23, 25), (0.85, 1.0, 1.15), (0.7, 1.0)))
    with tempfile.TemporaryDirectory() as d:
        urdf = f"{d}/h17.urdf"
        with open(urdf, "w") as f:
            f.write(to_urdf(model))
        for stretched in ((False,) if quick else (False, True)):
            res = walking.plan(model, walking.WalkParams(steps=6, knee_stretched=stretched), say=lambda s: None)
            planned = res.com_w[-1, 0] - res.com_w[0, 0]
            tp = torque_plan(model, res.t, res.q, res.support, servo)
            for gain in (0.0, 1.0, 1.5):
                Q = compensated(servo, res.q, gain * tp.tau, model.lower, model.upper)
                good = 0
                for kp, mass, mu in grid:
                    travel, tilt = _replay(urdf, res.t, Q, model.joint_names, kp=kp, mass=mass, friction=mu)
                    good += travel >= 0.9 * planned and tilt < 20
                out.append(("knee-stretched" if stretched else "bent-knee", gain, good, len(grid)))
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true")
    args = p.parse_args()
    print("MuJoCo step (0.5 ms simulated), µs of CPU; per emulator millisecond with the plant around it")
    for robot in ("humanoid17", "puma560", "so101"):
        raw, per_ms = step_cost(robot, 1000 if args.quick else 4000)
        print(f"  {robot:11s} {raw:6.1f} µs per step ({raw / 500 * 100:4.1f} % of real time); "
              f"{per_ms:6.1f} µs per ms driven ({per_ms / 10:4.1f} % of a CPU)")
    print("\nthe same 6-step walk, loop timing (µs) and the emulator's real-time factor")
    for physics in (False, True):
        s = walk_timing(physics)
        if "error" in s:
            print(f"  physics={physics}: {s['error']}")
            continue
        extra = ""
        if physics and "physics" in s:
            e = s["physics"].get("emulator", {})
            extra = f"; fell {s['physics']['fell']}, largest tilt {s['physics']['max_tilt_deg']:.1f}°"
            if e.get("steps"):
                extra += f", {e['steps']} steps simulated"
        print(f"  {'with' if physics else 'without'} physics: jitter p50 {s['jitter_p50_us']:.1f} p99 "
              f"{s['jitter_p99_us']:.1f} max {s['jitter_max_us']:.0f}, cycle p50 {s['cycle_p50_us']:.1f} p99 "
              f"{s['cycle_p99_us']:.1f}, missed {s['missed_deadlines']}, run {s['wall_s']:.1f} s{extra}")
    print("\ncompliance compensation: walks replayed open loop in MuJoCo (independent model), servos, masses and "
          "friction varied")
    for walk, gain, good, total in replay_table(args.quick):
        print(f"  {walk:15s} gain {gain:3.1f}: {good:2d} of {total} variations walk ≥ 90 % of the plan upright")
    return 0


if __name__ == "__main__":
    sys.exit(main())
