"""A machine's first run, and a remote's answers.

1. Compile: `hil warmup`'s kernels in a fresh Numba cache folder — what the loop needs (what a
   first `hil run` compiles before it starts) and everything (the planners and IK too).
2. The README's first command (`hil run --robot puma560 --dry-run --headless --duration 10
   --enable --motion demo`) with a fresh cache, then again with it warm: the ratio is what a
   first run costs over any later one.
3. `hil ctl` against a running dry run: the wall time of each command as a user types it (a new
   process each time), against `python -c pass` in the same run as the baseline.

    python benchmarks/bench_first_run.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HIL = [sys.executable, "-m", "hil.cli"]
FIRST = ["run", "--robot", "puma560", "--dry-run", "--headless", "--duration", "10", "--enable", "--motion", "demo"]


def timed(argv, env=None, timeout=600) -> float:
    t0 = time.monotonic()
    r = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({r.returncode}):\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    return time.monotonic() - t0


def compile_figures() -> None:
    """Each in a fresh Numba cache folder, in a process of its own."""
    code = ("import time,sys; from hil.warmup import compile_all; t=time.monotonic(); "
            "compile_all(loop_only=sys.argv[1]=='loop'); print(time.monotonic()-t)")
    for what in ("loop", "all"):
        cache = tempfile.mkdtemp(prefix="hil-bench-cache-")
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        out = subprocess.run([sys.executable, "-c", code, what], capture_output=True, text=True, env=env, check=True)
        print(f"compile, {'what the loop needs' if what == 'loop' else 'every kernel'}: {float(out.stdout):.1f} s")
        shutil.rmtree(cache, ignore_errors=True)


def first_run_figures() -> None:
    cache = tempfile.mkdtemp(prefix="hil-bench-cache-")
    env = dict(os.environ, NUMBA_CACHE_DIR=cache)
    cold = timed(HIL + FIRST, env)
    warm = timed(HIL + FIRST, env)
    shutil.rmtree(cache, ignore_errors=True)
    print(f"the README's first command: {cold:.1f} s on a fresh cache, {warm:.1f} s warm ({cold / warm:.2f}×; "
          "10 s of it is the run)")


def ctl_figures(rounds: int) -> None:
    run = subprocess.Popen(HIL + ["run", "--robot", "puma560", "--dry-run", "--headless", "--duration", "600",
                                  "--enable"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        name = f"hil_puma560_{run.pid}"
        deadline = time.monotonic() + 60
        while subprocess.run(HIL + ["ctl", "status", "--loop", name], capture_output=True).returncode != 0:
            if time.monotonic() > deadline:
                raise SystemExit("the dry run did not start")
            time.sleep(0.5)
        time.sleep(3)   # enabled and ramped in
        base = statistics.median(timed([sys.executable, "-c", "pass"]) for _ in range(rounds))
        print(f"baseline, python -c pass: {1000 * base:.0f} ms")
        cases = [("status", ["status"]), ("status --json", ["status", "--json"]),
                 ("jog shoulder +2 (and wait there)", ["jog", "shoulder", "+2"]),
                 ("jog shoulder -2", ["jog", "shoulder", "-2"]), ("jog --dz 5 (tool line)", ["jog", "--dz", "5"]),
                 ("jog --dz -5", ["jog", "--dz", "-5"]), ("stop", ["stop"])]
        for label, args in cases:
            try:
                t = statistics.median(timed(HIL + ["ctl", *args, "--loop", name]) for _ in range(rounds))
            except SystemExit as e:   # a busy VM can stall the loop into its board's watchdog: said, not timed
                print(f"hil ctl {label}: not timed ({str(e.code).splitlines()[-1]})")
                subprocess.run(HIL + ["ctl", "clear-fault", "--loop", name], capture_output=True)
                subprocess.run(HIL + ["ctl", "enable", "--loop", name], capture_output=True)
                time.sleep(3)
                continue
            print(f"hil ctl {label}: {1000 * t:.0f} ms ({t / base:.1f}× the baseline)")
    finally:
        run.terminate()
        run.wait(timeout=30)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    compile_figures()
    first_run_figures()
    ctl_figures(args.rounds)


if __name__ == "__main__":
    main()
