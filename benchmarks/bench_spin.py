"""The loop's spin before each deadline: CPU and timing with no spin (a dry run's default,
`--spin-us 0`), the spin sized as the loop runs (the default on a board's port) and a fixed 500 µs
(`--spin-us 500`, the earlier default), in the same run, rounds alternating. Each round is a PUMA
demo motion on the board emulator, started here on its pty and given to `hil run --port` as a
board would be; the CPU of each process of the run (the command, its loop, the port process, the
emulator) is read from /proc/PID/stat just before it ends, so the figures include each process's
start.

Run: `python benchmarks/bench_spin.py [--rounds 3] [--seconds 10] [--rate 500]`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HIL = [sys.executable, "-m", "hil.cli"]
TICK = os.sysconf("SC_CLK_TCK")


def _processes() -> dict[int, tuple[int, float, str]]:
    """pid → (parent pid, CPU seconds so far, command line) of every process readable."""
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        out[int(pid)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / TICK, cmd)
    return out


def _family(root: int, procs: dict) -> set[int]:
    family, grew = {root}, True
    while grew:
        grew = False
        for pid, (parent, _, _) in procs.items():
            if parent in family and pid not in family:
                family.add(pid)
                grew = True
    return family


def _role(cmd: str, pid: int, root: int, first_child: int | None) -> str:
    if "emulator" in cmd:
        return "emulator"
    if pid == root:
        return "command"
    return "loop" if pid == first_child else "port"


def one_run(seconds: float, rate: float, spin: list[str]) -> dict:
    from hil import robots
    from hil.emulator_launch import start_emulator

    emu = start_emulator(robots.load("puma560"), parent_pid=os.getpid())   # it ends with this process
    try:
        return _run_on(emu, seconds, rate, spin)
    finally:
        emu.stop()


def _run_on(emu, seconds: float, rate: float, spin: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as d:
        stats_path = os.path.join(d, "stats.json")
        proc = subprocess.Popen(HIL + ["run", "--robot", "puma560", "--port", emu.path, "--headless", "--enable",
                                       "--motion", "demo", "--duration", str(seconds), "--rate", str(rate),
                                       "--stats-json", stats_path, *spin],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        seen: dict[int, tuple[float, str]] = {}
        order: list[int] = []
        while proc.poll() is None:
            procs = _processes()
            for pid in _family(proc.pid, procs) | {emu.proc.pid}:
                if pid in procs and procs[pid][2].strip():
                    if pid not in seen:
                        order.append(pid)
                    seen[pid] = (procs[pid][1], procs[pid][2])
            time.sleep(0.1)
        with open(stats_path) as f:
            stats = json.load(f)
    children = [p for p in order if p != proc.pid and "emulator" not in seen[p][1]]
    cpu: dict[str, float] = {}
    for pid, (t, cmd) in seen.items():
        role = _role(cmd, pid, proc.pid, children[0] if children else None)
        cpu[role] = cpu.get(role, 0.0) + t
    return {"cpu": cpu, "total": sum(cpu.values()), "spin_us": stats["spin_us"],
            "missed": stats["missed_deadlines"], "cycles": stats["cycles"], "jitter_p99_us": stats["jitter_p99_us"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rate", type=float, default=500.0)
    args = ap.parse_args()
    spins = {"none (a dry run's default)": ["--spin-us", "0"], "sized as it runs": [],
             "fixed 500 µs": ["--spin-us", "500"]}
    rows: dict[str, list] = {name: [] for name in spins}
    for _ in range(args.rounds):
        for name, spin in spins.items():
            rows[name].append(one_run(args.seconds, args.rate, spin))
    print(f"PUMA demo, {args.seconds:g} s at {args.rate:g} Hz, {args.rounds} rounds each (CPU-s per run, mean)")
    print("| spin | spin at the end (µs) | loop | command | port | emulator | all | missed deadlines | p99 jitter (µs) |")
    print("|---|---|---|---|---|---|---|---|---|")
    means = {}
    for name, runs in rows.items():
        def mean(key, runs=runs):
            return sum(key(r) for r in runs) / len(runs)
        means[name] = mean(lambda r: r["total"])
        print(f"| {name} | {mean(lambda r: r['spin_us']):.0f} | {mean(lambda r: r['cpu'].get('loop', 0)):.2f} | "
              f"{mean(lambda r: r['cpu'].get('command', 0)):.2f} | {mean(lambda r: r['cpu'].get('port', 0)):.2f} | "
              f"{mean(lambda r: r['cpu'].get('emulator', 0)):.2f} | {means[name]:.2f} | "
              f"{' '.join(str(r['missed']) for r in runs)} of {runs[0]['cycles']} | "
              f"{mean(lambda r: r['jitter_p99_us']):.1f} |")
    print(f"all processes' CPU, sized / fixed: {means['sized as it runs'] / means['fixed 500 µs']:.2f}, "
          f"none / sized: {means[next(iter(spins))] / means['sized as it runs']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
