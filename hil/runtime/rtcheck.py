"""`hil rt-check`: what this machine gives a real-time loop, measured before a robot is connected.

The check runs the loop's timing skeleton with no work — the same scheduling request as `hil run`
(`claim_realtime`: SCHED_FIFO 50, pinned to the last CPU, that CPU kept out of idle states), the
same sleep-then-spin and the same missed-deadline rule — in a child process, and reports what was
granted, how late the wake-ups were, and what to change. It is the floor under `hil run`: the
loop with its work and the serial port cannot do better than this on the same machine.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from typing import Callable

import numpy as np

from firmware_protocol.buses.bus_board import RATE_MARGIN
from firmware_protocol.link import Link
from hil.errors import HilError
from hil.runtime.cpu_idle import read_kernel_file as read
from hil.runtime.loop_stats import LoopStats
from hil.runtime.misses import MissTracer
from hil.runtime.realtime import (SpinWindow, claim_realtime, cpu_times, next_deadline_after, sleep_before,
                                  steal_fraction)
from hil.runtime.transport import round_trip_warning

# The goal the loop is built for, per rate: p99 period jitter within a tenth of the period
# (100 µs at 1 kHz) and at most 0.1 % of deadlines missed.
JITTER_GOAL_FRACTION = 0.1
MISSED_GOAL = 0.001


def timing_floor(rate_hz: float, seconds: float, realtime: bool = True, keep_cpu_awake: bool = True,
                 spin_us: float | None = None, work: Callable[[int], None] | None = None) -> dict:
    """Run the loop's timing skeleton in *this* process (it changes its scheduling: use
    `measure_floor` from anywhere else). Times in µs; `missed_fraction` per deadline; each missed
    deadline taken apart as the loop does (hil/runtime/misses.py). `work(i)`, when given, runs in
    cycle i where the loop does its work (tests use it to cause misses of a known kind)."""
    grant = claim_realtime(realtime, keep_cpu_awake)
    try:
        T = 1.0 / rate_hz
        spin = SpinWindow(None if spin_us is None else spin_us * 1e-6)
        n = max(int(seconds * rate_hz), 2)
        stats = LoopStats(n)
        missed = 0
        deadlines = n  # one per wake-up, plus those skipped after a long stall
        wakes = np.empty(n)
        tracer = MissTracer()
        before = cpu_times(grant.cpu)
        start = time.monotonic()
        next_deadline = wake_at = start + T
        tracer.started(start)
        for i in range(n):
            spin.slept(sleep_before(wake_at, spin.seconds, tracer))
            while time.monotonic() < wake_at:
                pass
            wake = time.monotonic()
            wakes[i] = wake
            late = wake - next_deadline
            tracer.woke(wake, next_deadline - start, late, late > T / 2, T)
            if late > T / 2:  # the loop's rule (loop.py)
                missed += 1
            if work is not None:
                work(i)
            now = time.monotonic()
            served = next_deadline
            next_deadline, skipped, wake_at = next_deadline_after(served, now, T, woke=wake)
            if skipped:
                tracer.passed(now, served + T - start, served + T, skipped)
            missed += skipped
            deadlines += skipped
        steal = steal_fraction(before, cpu_times(grant.cpu))
    finally:
        grant.release()
    for period in np.diff(wakes) * 1e6:
        stats.add(float(period), 0.0, 0.0)
    s = stats.summary(T * 1e6)
    return {
        "rate_hz": rate_hz, "seconds": seconds, "deadlines": deadlines, "missed_deadlines": missed,
        "missed_fraction": missed / deadlines, "jitter_p50_us": s["jitter_p50_us"], "jitter_p99_us": s["jitter_p99_us"],
        "jitter_max_us": s["jitter_max_us"], "sched_fifo": grant.sched_fifo, "cpu": grant.cpu,
        "spin_us": spin.seconds * 1e6,
        "scheduling": grant.note, "cpu_idle": grant.cpu_idle_note, "cpu_steal_fraction": steal,
        **tracer.report(),
    }


def measure_floor(rate_hz: float, seconds: float, realtime: bool = True, keep_cpu_awake: bool = True,
                  spin_us: float | None = None) -> dict:
    """`timing_floor` in a child process (the caller's scheduling is left alone)."""
    args = json.dumps({"rate_hz": rate_hz, "seconds": seconds, "realtime": realtime,
                       "keep_cpu_awake": keep_cpu_awake, "spin_us": spin_us})
    r = subprocess.run([sys.executable, "-P", "-m", "hil.runtime.rtcheck", args], capture_output=True, text=True,
                       timeout=seconds + 120)
    if r.returncode != 0:
        raise HilError(f"the timing check's child process failed (exit code {r.returncode}): "
                           f"{r.stderr.strip()[-500:]}")
    return json.loads(r.stdout)


def measure_port(port: str, rate_hz: float, count: int = 20, baud: int = 1_000_000) -> dict:
    """Connect to the board on `port` (handshake), time `count` command → STATE round trips (ms),
    and say whether they fit a cycle at `rate_hz`. Nothing is enabled or moved."""

    link = Link.connect(port, baud, threaded=False)
    try:
        info = link.info
        trips = link.round_trips_ms(count)
    finally:
        link.close()
    return {"port": port, "board": f"{info.kind_name} fw {info.firmware}, {info.n_joints} joints, uid {info.uid}",
            "round_trip_ms": trips, "warning": round_trip_warning(port, trips, rate_hz, info.low_latency)}


def machine_facts() -> dict:
    """What the kernel and the machine say about real-time use (read-only)."""
    cpuinfo = read("/proc/cpuinfo") or ""
    flags = next((line.split(":", 1)[1].split() for line in cpuinfo.splitlines() if line.startswith("flags")), [])
    version = platform.version()
    if read("/sys/kernel/realtime") == "1" or "PREEMPT_RT" in version:
        preemption = "PREEMPT_RT (fully preemptible)"
    elif "PREEMPT_DYNAMIC" in version:
        chosen = [w for w in (read("/proc/cmdline") or "").split() if w.startswith("preempt=")]
        preemption = "PREEMPT_DYNAMIC (" + (chosen[-1] if chosen else "the build's default mode") + ")"
    elif "PREEMPT" in version:
        preemption = "PREEMPT (low-latency desktop)"
    else:
        preemption = "no forced preemption (server kernel)"
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    runtime = read("/proc/sys/kernel/sched_rt_runtime_us")
    return {
        "kernel": platform.release(), "preemption": preemption, "cpus": cpus,
        "virtual_machine": "hypervisor" in flags,
        "cpuidle_driver": read("/sys/devices/system/cpu/cpuidle/current_driver"),
        "rt_runtime_us_per_s": int(runtime) if runtime and runtime.lstrip("-").isdigit() else None,
    }


def advice(facts: dict, floor: dict) -> list[str]:
    """What to change, one line per finding, most important first."""
    out = []
    if not floor["sched_fifo"] and "not requested" not in floor["scheduling"]:
        out.append("SCHED_FIFO was refused: run as root, or give your user real-time priority "
                   "(/etc/security/limits.d/99-realtime.conf: `@realtime - rtprio 98`, and add yourself "
                   "to the realtime group), or grant CAP_SYS_NICE to the Python interpreter")
    if floor["cpu"] is None and facts["cpus"] > 1 and "not requested" not in floor["scheduling"]:
        out.append("the loop could not be pinned to a CPU of its own")
    if facts["cpus"] < 2:
        out.append("one CPU only: the loop shares it with the twin, the port and everything else")
    if floor["cpu_idle"].startswith("idle states allowed (") and "not requested" not in floor["cpu_idle"]:
        out.append("the loop's CPU could not be kept out of idle states: as root, or with a udev rule "
                   "`KERNEL==\"cpu_dma_latency\", GROUP=\"realtime\", MODE=\"0660\"`")
    steal = floor.get("cpu_steal_fraction")
    if facts["virtual_machine"]:
        took = (f" (it took {100 * steal:.1f} % of the loop's CPU during the check)"
                if steal is not None and steal >= 0.001 else "")
        out.append("this is a virtual machine: its hypervisor can stop the loop's CPU for milliseconds at a "
                   f"time{took}; for the real robot, prefer bare metal")
    if facts["preemption"].startswith("no forced"):
        out.append("the kernel is not preemptible: a low-latency or PREEMPT_RT kernel shortens the worst case")
    elif facts["preemption"] == "PREEMPT_DYNAMIC (the build's default mode)":
        out.append("the kernel can be made fully preemptible at boot (`preempt=full` on its command line)")
    return out


def meets_goal(floor: dict, port: dict | None = None) -> bool:
    """p99 period jitter within a tenth of the period and at most 0.1 % of deadlines missed, and,
    with a port measured, its median command → STATE round trip within one period."""
    return (floor["jitter_p99_us"] <= JITTER_GOAL_FRACTION * 1e6 / floor["rate_hz"]
            and floor["missed_fraction"] <= MISSED_GOAL and _port_short(floor, port) is None)


def _port_short(floor: dict, port: dict | None) -> str | None:
    """Why the port's round trips cannot keep the rate (with the rate that would hold), or None."""
    if port is None or not port["round_trip_ms"]:
        return None
    trips = sorted(port["round_trip_ms"])
    median, period_ms = trips[len(trips) // 2], 1e3 / floor["rate_hz"]
    if median <= period_ms:
        return None
    return (f"the port's round trip ({median:.2f} ms median) is longer than one cycle at {floor['rate_hz']:g} Hz "
            f"({period_ms:.2f} ms): every cycle would act on a stale state; about {1e3 / (RATE_MARGIN * median):.0f} Hz "
            "would hold (--rate)")


def report(facts: dict, floor: dict, port: dict | None = None) -> str:
    """The check's findings as the text `hil rt-check` prints."""
    vm = "virtual machine" if facts["virtual_machine"] else "no hypervisor seen"
    goal_us = JITTER_GOAL_FRACTION * 1e6 / floor["rate_hz"]
    verdict = "within" if meets_goal(floor, port) else "OUTSIDE"
    short = _port_short(floor, port)
    steal = floor.get("cpu_steal_fraction")
    lines = [
        f"machine: Linux {facts['kernel']}, {facts['preemption']}, {facts['cpus']} cpus, {vm}, "
        f"cpuidle {facts['cpuidle_driver'] or 'n/a'}",
        f"granted: {floor['scheduling']}",
        f"timing floor at {floor['rate_hz']:g} Hz for {floor['seconds']:g} s ({floor['deadlines']} deadlines): "
        f"jitter p50 {floor['jitter_p50_us']:.1f} µs, p99 {floor['jitter_p99_us']:.1f} µs, "
        f"max {floor['jitter_max_us']:.0f} µs; missed {floor['missed_deadlines']} "
        f"({100 * floor['missed_fraction']:.2f} %)" + (f"; steal {100 * steal:.1f} %" if steal is not None else ""),
    ]
    causes = floor.get("missed_deadline_causes")
    if causes:
        lines.append("missed deadlines by cause: " + "; ".join(f"{n} {c}" for c, n in causes.items()))
    lines += [
        f"verdict: {verdict} the loop's goal (p99 ≤ {goal_us:.0f} µs, ≤ {100 * MISSED_GOAL:.1f} % missed"
        + (", the port's round trip within a cycle" if port is not None else "") + "); "
        + (short if short else "`hil run` adds its own work and the serial port on top of this floor"),
    ]
    if port is not None:
        trips = sorted(port["round_trip_ms"])
        lines.append(f"port {port['port']}: {port['board']}; round trip command → STATE median "
                     f"{trips[len(trips) // 2]:.2f} ms ({trips[0]:.2f}–{trips[-1]:.2f} ms over {len(trips)})")
    lines += [f"  - {a}" for a in advice(facts, floor)]
    if port is not None and port["warning"]:
        lines.append(f"  - {port['warning']}")
    return "\n".join(lines)


if __name__ == "__main__":
    # the child of `measure_floor`
    kwargs = json.loads(sys.argv[1])
    print(json.dumps(timing_floor(**kwargs)))
