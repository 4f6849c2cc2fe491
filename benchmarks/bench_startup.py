"""What a command costs beyond its work: CPU and wall time of short commands, each run the way the
`hil` script runs it (`hil.cli.entry`: rarer garbage collections, no interpreter teardown at the
end) and, as the baseline in the same run, through `sys.exit(hil.cli.main())` with Python's
defaults. CPU counts the command's process and every process it waited for (loop, port, emulator).

    python benchmarks/bench_startup.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ENTRY = [sys.executable, "-m", "hil"]
BASELINE = [sys.executable, "-c", "import sys; from hil.cli import main; sys.argv[0] = 'hil'; sys.exit(main())"]
COMMANDS = {
    "dry run, humanoid17, 0.5 s": ["run", "--robot", "humanoid17", "--dry-run", "--headless", "--duration", "0.5"],
    "dry run, puma560, 0.5 s": ["run", "--robot", "puma560", "--dry-run", "--headless", "--duration", "0.5",
                                "--enable"],
    "walk, 4 steps, planned only": ["walk", "--robot", "humanoid17", "--steps", "4"],
    "robots": ["robots"],
}


def measured(argv: list[str]) -> tuple[float, float]:
    """(CPU s of the process and all it waited for, wall s)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    r = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    wall = time.monotonic() - t0
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({r.returncode}):\n{r.stderr[-2000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    rounds = ap.parse_args().rounds
    with tempfile.TemporaryDirectory(prefix="hil-bench-startup-") as where:   # a command's default output files
        os.chdir(where)
        table(rounds)
        os.chdir("/")


def table(rounds: int) -> None:
    interleaved(rounds, ("entry", lambda argv: measured(ENTRY + argv)),
                ("baseline", lambda argv: measured(BASELINE + argv)), warm=lambda argv: measured(ENTRY + argv))


def interleaved(rounds: int, first, second, warm) -> None:
    """A row per command of COMMANDS: `warm(argv)` once (its kernels' cache warm before the first
    figure), then `rounds` of each way, interleaved (a busy moment falls on both); the medians of
    CPU and wall time. `first`, `second`: (label, run(argv) -> (CPU s, wall s))."""
    (a, run_a), (b, run_b) = first, second
    print(f"| command | CPU: {a} / {b} (ratio) | wall: {a} / {b} |")
    print("|---|---|---|")
    for name, argv in COMMANDS.items():
        warm(argv)
        runs = {a: [], b: []}
        for _ in range(rounds):
            runs[a].append(run_a(argv))
            runs[b].append(run_b(argv))
        cpu = {k: statistics.median(c for c, _ in v) for k, v in runs.items()}
        wall = {k: statistics.median(w for _, w in v) for k, v in runs.items()}
        print(f"| {name} | {cpu[a]:.2f} / {cpu[b]:.2f} s ({cpu[a] / cpu[b]:.2f}×) | "
              f"{wall[a]:.2f} / {wall[b]:.2f} s |")


if __name__ == "__main__":
    main()
