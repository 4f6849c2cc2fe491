"""The pose check's cost per robot — `python benchmarks/bench_checks.py [--rounds 5]`.

`hil.safety`'s pose check (floor, workspace, self-collision, balance: what the loop runs every
cycle and the planners on every sample) at random poses within each robot's ranges, µs per pose
(median of the rounds), with its shape table as loaded (a mesh bounded by its box and by its
capsules) against the same robot with each mesh bounded by its capsules alone (the baseline, in
the same run): what the boxes cost."""

from __future__ import annotations

import argparse
import copy
import time

import numpy as np

from hil import robots
from hil.safety import SafetyChecker
from hil.safety import _kernel as SK

ROBOTS = ["puma560", "humanoid17", "so101", "examples/robots/g1.toml"]


def capsules_only(model):
    """The model with each mesh's box left out (its capsules bound it alone)."""
    twin = copy.copy(model)
    twin.shapes = tuple(s for s in model.shapes if not (s.group and s.kind == "box"))
    return twin


def per_pose_us(checker, Q: np.ndarray, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        for q in Q:
            SK.check_pose_core(q, checker.no_sag[0], checker.kin, checker.mt, checker.caps, checker.pairs, checker.ws,
                               checker.bal, checker.poses, checker.wpts, checker.info, checker.scratch,
                               checker.q_loaded)
        times.append((time.perf_counter() - t) / len(Q) * 1e6)
    return float(np.median(times))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--poses", type=int, default=2000)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    print("| robot | shapes | part pairs (shape pairs) | µs per pose | capsules only: part pairs (shape pairs), µs | ratio |")
    print("|---|---|---|---|---|---|")
    for spec in ROBOTS:
        try:
            model = robots.load(spec)
        except Exception as e:   # noqa: BLE001 - a robot whose files are not installed is said and skipped
            print(f"| {spec} | not loaded: {e} | | | | |")
            continue
        Q = np.ascontiguousarray(rng.uniform(model.lower, model.upper, (args.poses, model.n)))
        row = []
        for m in (model, capsules_only(model)):
            checker = SafetyChecker(m)
            checker.check(model.home)   # compiled and warm
            parts = len(np.unique(checker.pairs[:, SK.P_PARTS])) if len(checker.pairs) else 0
            row.append((len(checker.caps), parts, len(checker.pairs), per_pose_us(checker, Q, args.rounds)))
        (n, pp, rows, us), (_, pp0, rows0, us0) = row
        print(f"| {spec} | {n} | {pp} ({rows}) | {us:.1f} | {pp0} ({rows0}), {us0:.1f} | {us / us0:.2f} |")


if __name__ == "__main__":
    main()
