"""Where the test suite's CPU goes: runs the README's `pytest -q` with every Python it starts
counted (benchmarks/suite_cpu), then prints the CPU by kind of process and by test file.

    python benchmarks/bench_suite.py [--top 20] [pytest arguments …]

Figures in benchmarks/README.md ("The test suite"). The run takes as long as the suite.
"""

from __future__ import annotations

import argparse
import ast
import collections
import glob
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent / "suite_cpu"


def kind_of(command: str) -> str:
    """'hil run', 'firmware_protocol.emulator', 'pytest worker', … from an interpreter's command line."""
    argv = command.split()
    if "-m" in argv:
        i = argv.index("-m")
        module, rest = argv[i + 1] if i + 1 < len(argv) else "?", argv[i + 2:]
        if module in ("hil", "hil.cli"):
            return "hil " + (rest[0] if rest else "")
        return "pytest (main)" if module == "pytest" else module
    if "-c" in argv:
        # execnet starts pytest-xdist's workers as `python -c "…exec(eval(sys.stdin.readline()))"`
        return "pytest worker" if "sys.stdin.readline" in command or "execnet" in command else \
            ("multiprocessing spawn" if "multiprocessing" in command else "python -c")
    return Path(argv[1]).name if len(argv) > 1 else argv[0]


def report(folder: str, top: int) -> None:
    starts = {}
    for line in open(os.path.join(folder, "starts.tsv")):
        pid, command = line.rstrip("\n").split("\t", 1)
        starts[pid] = ast.literal_eval(command)
    exits = {}
    if os.path.exists(os.path.join(folder, "exits.tsv")):
        for line in open(os.path.join(folder, "exits.tsv")):
            pid, own, children = line.split("\t")
            exits[pid] = (float(own), float(children))
    kinds = collections.defaultdict(lambda: [0, 0, 0.0, 0.0])
    for pid, command in starts.items():
        k = kinds[kind_of(command)]
        k[0] += 1
        if pid in exits:
            k[1] += 1
            k[2] += exits[pid][0]
            k[3] += exits[pid][1]
    print("\nby kind of process (own CPU and that of the children it waited for; exits logged):")
    print(f"{'started':>8} {'exited':>7} {'own CPU-s':>10} {'children':>9}  kind")
    for name, (n, done, own, children) in sorted(kinds.items(), key=lambda kv: -(kv[1][2] + kv[1][3])):
        if name in ("pytest (main)", "pytest worker"):
            children = 0.0   # the tests' own children, counted below by test
        print(f"{n:8d} {done:7d} {own:10.1f} {children:9.1f}  {name}")
    rows = [r for f in glob.glob(os.path.join(folder, "tests-*.json")) for r in json.load(open(f))]
    files = collections.defaultdict(lambda: [0, 0.0, 0.0, 0.0])
    for nodeid, own, children, wall in rows:
        f = files[nodeid.split("::")[0]]
        f[0] += 1
        f[1] += own
        f[2] += children
        f[3] += wall
    own, children = sum(r[1] for r in rows), sum(r[2] for r in rows)
    print(f"\nby test file ({len(rows)} tests: {own:.0f} CPU-s in the test workers, {children:.0f} in the "
          "processes they waited for):")
    print(f"{'CPU-s':>7} {'own':>6} {'children':>9} {'wall-s':>7} {'tests':>6}  file")
    for name, (n, o, c, w) in sorted(files.items(), key=lambda kv: -(kv[1][1] + kv[1][2]))[:top]:
        print(f"{o + c:7.1f} {o:6.1f} {c:9.1f} {w:7.1f} {n:6d}  {name}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--top", type=int, default=20, help="test files listed (default 20)")
    args, pytest_args = ap.parse_known_args()
    folder = tempfile.mkdtemp(prefix="bench-suite-cpu-")
    env = dict(os.environ, HIL_SUITE_CPU_DIR=folder,
               PYTHONPATH=os.pathsep.join([str(HERE), str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    t0, before = time.monotonic(), os.times()
    code = subprocess.call([sys.executable, "-m", "pytest", "-q", "-p", "suite_cpu_plugin", *pytest_args], cwd=ROOT,
                           env=env)
    after = os.times()
    cpu = (after.children_user + after.children_system) - (before.children_user + before.children_system)
    print(f"\nthe run: {time.monotonic() - t0:.0f} s wall, {cpu:.0f} CPU-s over all its processes "
          f"(pytest exit {code}); files in {folder}")
    report(folder, args.top)
    return code


if __name__ == "__main__":
    sys.exit(main())
