"""The loop's cycle cost through the whole runtime: `hil run --dry-run` at 1 kHz with the demo motion,
enabled, for a few rounds; per round the cycle's compute time (cycle minus the serial port's calls),
its whole time and the period jitter (p50 / p99, µs), from the run's own statistics.

With `--baseline DIR` (a checkout of another commit, e.g. `git worktree add /tmp/base <commit>`) each
round runs that code too, alternating, in the same venv: the figures side by side, and their ratio.
Run: `python benchmarks/bench_cycle.py [--rounds 3] [--seconds 15] [--baseline DIR]`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

KEYS = ("compute_p50_us", "compute_p99_us", "cycle_p50_us", "cycle_p99_us", "jitter_p99_us", "missed_fraction")


def one_run(tree: str | None, seconds: float, robot: str) -> dict:
    env = dict(os.environ)
    if tree:
        env["PYTHONPATH"] = tree  # its packages before the installed (editable) ones
        env["NUMBA_CACHE_DIR"] = os.path.join(tempfile.gettempdir(), "hil-bench-baseline-cache")
    with tempfile.TemporaryDirectory() as tmp:
        stats = os.path.join(tmp, "stats.json")
        r = subprocess.run([sys.executable, "-m", "hil.cli", "run", "--robot", robot, "--dry-run", "--headless",
                            "--duration", str(seconds), "--enable", "--motion", "demo", "--rate", "1000",
                            "--stats-json", stats], cwd=tmp, capture_output=True, text=True, env=env, timeout=600)
        if r.returncode != 0:
            raise SystemExit(f"run failed ({'baseline' if tree else 'this tree'}):\n{r.stdout}\n{r.stderr}")
        with open(stats) as f:
            s = json.load(f)
    return {k: s[k] for k in KEYS}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--robot", default="puma560")
    ap.add_argument("--baseline", metavar="DIR", help="a checkout of the code to compare with")
    args = ap.parse_args()
    trees = [("this tree", None)] + ([("baseline", args.baseline)] if args.baseline else [])
    rows: dict[str, list[dict]] = {name: [] for name, _ in trees}
    for k in range(args.rounds):
        for name, tree in (trees if k % 2 == 0 else trees[::-1]):
            rows[name].append(one_run(tree, args.seconds, args.robot))
            print(f"round {k + 1} {name}: " + ", ".join(f"{key} {rows[name][-1][key]:.4g}" for key in KEYS), flush=True)
    med = {name: {key: statistics.median(r[key] for r in rs) for key in KEYS} for name, rs in rows.items()}
    print(f"\nmedian of {args.rounds} rounds, {args.robot} at 1 kHz, demo motion, port process:")
    print(f"{'':<12}" + "".join(f"{key:>17}" for key in KEYS))
    for name in med:
        print(f"{name:<12}" + "".join(f"{med[name][key]:>17.4g}" for key in KEYS))
    if args.baseline:
        print(f"{'ratio':<12}" + "".join(f"{med['this tree'][k] / med['baseline'][k]:>17.3f}" if med['baseline'][k]
                                         else f"{'—':>17}" for k in KEYS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
