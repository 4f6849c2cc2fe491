"""Dry runs on a busy machine: do they go to the end as asked?

Each condition runs the same short dry runs (`hil run --dry-run --headless --enable --motion demo`:
PUMA at 500 Hz and humanoid17 at 200 Hz on our board's emulator, and humanoid17 over a Dynamixel
bus with the robot in physics) and reads their stats files:
- idle: nothing else running (the baseline);
- hog: one CPU-bound process per CPU beside each run (`while True: pass`);
- hog + second loop: the same, and another robot's loop running through the whole run;
- third loop: with two loops already running on a 2-CPU machine, a third run (refused, said why).

Per condition: runs that ended "as asked" (no fault, no lost link, no e-stop of its own), missed
deadlines (median and worst per run, and against the idle baseline), and the start-up time.

Run: `python benchmarks/bench_busy.py [--runs N]` (default 5 per robot and condition).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HIL = [sys.executable, "-m", "hil.cli"]
# what each kind of run adds to `hil run --dry-run …`
ROBOTS = {"puma560": ["--robot", "puma560"], "humanoid17": ["--robot", "humanoid17"],
          "h17 bus+phys": ["--robot", "humanoid17", "--bus", "dynamixel2", "--physics"]}


def dry_run(robot: str, seconds: float, folder: str, tag: str, wait: bool = True):
    stats = os.path.join(folder, f"{tag.replace(' ', '_').replace('+', '_')}.json")
    argv = [*HIL, "run", *ROBOTS[robot], "--dry-run", "--headless", "--duration", str(seconds), "--enable",
            "--motion", "demo", "--stats-json", stats]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if not wait:
        return proc, stats
    _, err = proc.communicate(timeout=300)
    return proc.returncode, stats, err


def hogs() -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 1)]


def stop(procs) -> None:
    """Hogs killed; hil runs ended as Ctrl-C would (they e-stop and write their files first)."""
    for p in procs:
        p.terminate()
    for p in procs:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def summary(results: list[tuple[int, str]]) -> dict:
    stats = []
    for rc, path in results:
        try:
            with open(path) as f:
                s = json.load(f)
        except (OSError, ValueError):
            s = None
        stats.append((rc, s))
    ok = sum(1 for rc, s in stats if rc == 0 and s is not None and s.get("verdict") == "as asked")
    misses = [s["missed_deadlines"] for _, s in stats if s is not None]
    starts = [s["start_s"] for _, s in stats if s is not None and s.get("start_s") is not None]
    failed = [f"exit {rc}: " + (s.get("verdict", "?") if s is not None else "no stats written")
              for rc, s in stats if not (rc == 0 and s is not None and s.get("verdict") == "as asked")]
    return {"runs": len(stats), "as_asked": ok, "failed": failed, "misses_median": statistics.median(misses) if misses else None,
            "misses_max": max(misses) if misses else None,
            "start_median_s": statistics.median(starts) if starts else None}


def condition(name: str, runs: int, folder: str, load=None) -> dict:
    out = {}
    for robot in ROBOTS:
        results = []
        for k in range(runs):
            background = load() if load else []
            try:
                rc, stats, _ = dry_run(robot, 4.0, folder, f"{name}-{robot}-{k}")
            finally:
                stop(background)
            results.append((rc, stats))
        out[robot] = summary(results)
    return out


def second_loop(folder: str):
    """Hogs and another robot's loop (long enough to cover a run); returns what to stop after."""
    procs = hogs()
    other, _ = dry_run("humanoid17", 30.0, folder, f"other-{time.monotonic_ns()}", wait=False)
    time.sleep(3.0)   # its start-up
    return [*procs, other]


def third_loop(folder: str) -> str:
    """Two loops running, then a third: its first line of error (the refusal), or what happened."""
    first, _ = dry_run("puma560", 20.0, folder, "third-a", wait=False)
    time.sleep(3.0)
    second, _ = dry_run("humanoid17", 20.0, folder, "third-b", wait=False)
    time.sleep(4.0)
    try:
        rc, _, err = dry_run("puma560", 2.0, folder, "third-c")
    finally:
        stop([first, second])
    return f"exit {rc}: {err.strip().splitlines()[-1] if err.strip() else '(nothing said)'}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    subprocess.run([*HIL, "warmup"], check=True, stdout=subprocess.DEVNULL)
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as folder:
        rows = {"idle": condition("idle", args.runs, folder),
                "hog on every CPU": condition("hog", args.runs, folder, hogs),
                "hog + a second loop": condition("second", args.runs, folder, lambda: second_loop(folder))}
        third = third_loop(folder) if (os.cpu_count() or 1) == 2 else "(not a 2-CPU machine: skipped)"
    base = {robot: rows["idle"][robot]["misses_median"] for robot in ROBOTS}
    print(f"{'condition':<22} {'robot':<13} {'as asked':>9} {'misses p50':>11} {'max':>5} {'× idle':>7} "
          f"{'start s':>8}")
    for name, by_robot in rows.items():
        for robot, r in by_robot.items():
            ratio = (f"{r['misses_median'] / base[robot]:.1f}" if base[robot] else "—") \
                if r["misses_median"] is not None else "—"
            print(f"{name:<22} {robot:<13} {r['as_asked']:>4}/{r['runs']:<4} {r['misses_median']!s:>11} "
                  f"{r['misses_max']!s:>5} {ratio:>7} {r['start_median_s'] or 0:>8.2f}")
    for name, by_robot in rows.items():
        for robot, r in by_robot.items():
            for text in r["failed"]:
                print(f"  {name}, {robot}: {text}")
    print(f"a third loop beside two: {third}")


if __name__ == "__main__":
    main()
