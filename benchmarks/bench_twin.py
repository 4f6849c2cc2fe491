"""The twin's frame times at 1280×720 under Xvfb with software GL, next to the 1 kHz loop, and the
loop's jitter with and without the twin attached, in one run.

Rounds: `hil run --robot R --dry-run --headless --rate 1000 --enable --motion demo` alone, then the
same with `hil twin --attach NAME --max-fps 1000` (uncapped, to see what it can do; `--max-fps 60`
for the twin's default) beside it. Needs an X display or Xvfb (run it under `xvfb-run -a`). Run:
`xvfb-run -a -s "-screen 0 1280x720x24" python benchmarks/bench_twin.py [--robot humanoid17] [--seconds 15] [--max-fps F]
[--bus B]`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

HIL = [sys.executable, "-m", "hil.cli"]


def loop_round(robot: str, seconds: float, folder: str, twin: bool, max_fps: float = 1000.0,
               bus: str | None = None) -> tuple[dict, list[float]]:
    stats = os.path.join(folder, f"stats-{int(twin)}.json")
    # a robot of more joints than our protocol carries (the G1's 29) runs on a servo bus, at its rate
    where = ["--bus", bus] if bus else ["--rate", "1000"]
    run = subprocess.Popen(HIL + ["run", "--robot", robot, "--dry-run", "--headless", *where, "--enable",
                                  "--motion", "demo", "--duration", str(seconds + (8 if twin else 0)),
                                  "--stats-json", stats], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    frames: list[float] = []
    if twin:
        from hil.runtime.shared import LoopClient

        t_end = time.monotonic() + 30
        client = None
        while client is None and time.monotonic() < t_end:
            try:
                client = LoopClient()
            except Exception:   # noqa: BLE001 - not started yet
                time.sleep(0.2)
        name = client.name
        client.close()
        out = os.path.join(folder, "frames.json")
        subprocess.run(HIL + ["twin", "--attach", name, "--max-fps", str(max_fps), "--duration", str(seconds),
                              "--frame-times", out], stdout=subprocess.DEVNULL, timeout=300)
        with open(out) as f:
            frames = json.load(f)
    run.wait()
    with open(stats) as f:
        return json.load(f), frames


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--robot", default="humanoid17")
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--max-fps", type=float, default=1000.0, help="the twin's cap (default: uncapped, to see what it can do)")
    ap.add_argument("--bus", help="dry-run the robot on this servo bus (a robot of more than 22 joints)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        alone, _ = loop_round(args.robot, args.seconds, folder, twin=False, bus=args.bus)
        beside, frames = loop_round(args.robot, args.seconds, folder, twin=True, max_fps=args.max_fps, bus=args.bus)
    ft = np.array(frames[5:]) * 1e3   # the first frames build the scene
    cap = "uncapped" if args.max_fps >= 1000 else f"capped at {args.max_fps:g} fps"
    print(f"twin ({args.robot}, 1280×720, software GL, {cap}): {len(frames)} frames in {args.seconds:g} s "
          f"({len(frames) / args.seconds:.1f} fps), {1e3 / ft.mean():.1f} fps of frame time; "
          f"frame time p50 {np.percentile(ft, 50):.1f} ms, p95 {np.percentile(ft, 95):.1f} ms, "
          f"p99 {np.percentile(ft, 99):.1f} ms, max {ft.max():.1f} ms")
    for label, s in (("loop alone", alone), ("loop with the twin", beside)):
        print(f"{label:<19}: jitter p50 {s['jitter_p50_us']:.1f} p99 {s['jitter_p99_us']:.1f} max "
              f"{s['jitter_max_us']:.0f} µs, cycle p99 {s['cycle_p99_us']:.1f} µs, missed {s['missed_deadlines']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
