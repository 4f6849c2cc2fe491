"""`hil rt-check`: the loop's timing skeleton measured in a child process, and what it reports."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from hil.runtime import rtcheck

pytestmark = pytest.mark.slow

from tests.launch import HIL  # noqa: E402 - the tests' way to start `hil` (tests/launch.py)


def fifo_permitted() -> bool:
    """Asked independently of hil, in a throwaway child."""
    code = "import os\ntry:\n os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(50)); print(1)\nexcept OSError:\n print(0)"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "1"


@pytest.mark.every_loop_cpu   # the CPU it is given is the last one: none is held by another test's loop
def test_the_check_reports_what_was_granted_and_its_verdict(tmp_path):
    out_json = tmp_path / "rt.json"
    r = subprocess.run(HIL + ["rt-check", "--seconds", "1", "--json", str(out_json)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode in (0, 1), r.stdout + r.stderr
    d = json.loads(out_json.read_text())
    floor = d["floor"]
    assert (r.returncode == 0) == d["meets_goal"]
    assert floor["deadlines"] >= 1000  # one per wake-up, more if a long stall skipped some
    assert floor["missed_fraction"] == pytest.approx(floor["missed_deadlines"] / floor["deadlines"])
    assert 0 <= floor["jitter_p50_us"] <= floor["jitter_p99_us"] <= floor["jitter_max_us"]
    assert floor["sched_fifo"] == fifo_permitted()
    cpus = sorted(os.sched_getaffinity(0))
    assert floor["cpu"] == (cpus[-1] if len(cpus) > 1 else None)
    assert d["machine"]["cpus"] == len(cpus)
    assert f"timing floor at 1000 Hz for 1 s ({floor['deadlines']} deadlines)" in r.stdout
    assert ("within the loop's goal" in r.stdout) == d["meets_goal"]
    assert f"granted: {floor['scheduling']}" in r.stdout
    for line in d["advice"]:
        assert f"  - {line}" in r.stdout


def test_without_realtime_nothing_is_asked_for():
    floor = rtcheck.measure_floor(500, 0.5, realtime=False)
    assert floor["deadlines"] >= 250
    assert not floor["sched_fifo"] and floor["cpu"] is None
    assert floor["scheduling"].startswith("realtime scheduling not requested")
    assert floor["cpu_idle"] == "idle states allowed (not requested)"


def test_a_stall_is_measured_as_missed_deadlines():
    """The check can fail: a child stopped for 0.2 s must show it."""
    child = ("import json, sys\nfrom hil.runtime.rtcheck import timing_floor\n"
             "said = lambda i: i == 0 and print('measuring', flush=True)\n"
             "print(json.dumps(timing_floor(1000, 2.0, realtime=False, keep_cpu_awake=False, spin_us=500.0, "
             "work=said)))")
    proc = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "measuring"   # (a busy machine takes its time importing)
    time.sleep(0.3)
    os.kill(proc.pid, signal.SIGSTOP)
    time.sleep(0.2)
    os.kill(proc.pid, signal.SIGCONT)
    out, _ = proc.communicate(timeout=60)
    floor = json.loads(out)
    assert floor["jitter_max_us"] >= 150e3
    # every deadline the stop passed over is missed, not only the late wake-up after it
    assert floor["missed_deadlines"] >= 190 and floor["deadlines"] >= 2000 + 180
    # every missed deadline has a cause, the skipped ones too (they share the stall's)
    assert sum(floor["missed_deadline_causes"].values()) == floor["missed_deadlines"]
    assert not rtcheck.meets_goal(floor)


def floor_with(**changes) -> dict:
    base = {"rate_hz": 1000.0, "seconds": 5.0, "deadlines": 5000, "missed_deadlines": 0, "missed_fraction": 0.0,
            "jitter_p50_us": 1.0, "jitter_p99_us": 50.0, "jitter_max_us": 400.0, "sched_fifo": True, "cpu": 3,
            "scheduling": "SCHED_FIFO 50 granted, pinned to cpu 3, cpu 3 kept out of idle states",
            "cpu_idle": "cpu 3 kept out of idle states", "cpu_steal_fraction": 0.0}
    return {**base, **changes}


def test_the_goal_is_a_tenth_of_the_period_and_a_thousandth_missed():
    assert rtcheck.meets_goal(floor_with(jitter_p99_us=100.0, missed_fraction=0.001))
    assert not rtcheck.meets_goal(floor_with(jitter_p99_us=100.5))
    assert not rtcheck.meets_goal(floor_with(missed_fraction=0.0011))
    assert rtcheck.meets_goal(floor_with(rate_hz=200.0, jitter_p99_us=480.0))  # 500 µs at 200 Hz


def test_a_port_whose_round_trip_is_longer_than_a_cycle_is_outside_the_goal_and_says_what_would_hold():
    port = {"port": "/dev/pts/3", "board": "PUMA6", "round_trip_ms": [1.3, 1.38, 1.4, 1.5, 1.35], "warning": None}
    assert not rtcheck.meets_goal(floor_with(), port)
    assert rtcheck.meets_goal(floor_with(rate_hz=500.0, jitter_p99_us=100.0), port)   # 2 ms a cycle
    facts = {"kernel": "6.1", "preemption": "PREEMPT_RT (fully preemptible)", "cpus": 4, "virtual_machine": False,
             "cpuidle_driver": "intel_idle", "rt_runtime_us_per_s": 950000}
    text = rtcheck.report(facts, floor_with(), port)
    assert "verdict: OUTSIDE" in text and "1.38 ms median) is longer than one cycle at 1000 Hz" in text, text
    assert "about 604 Hz would hold" in text, text


def test_advice_names_each_refusal():
    facts = {"kernel": "6.1", "preemption": "PREEMPT_RT (fully preemptible)", "cpus": 4, "virtual_machine": False,
             "cpuidle_driver": "intel_idle", "rt_runtime_us_per_s": 950000}
    assert rtcheck.advice(facts, floor_with()) == []
    refused = floor_with(sched_fifo=False, cpu=None, cpu_idle="idle states allowed (permission denied)",
                         scheduling="SCHED_FIFO not permitted (PermissionError); normal scheduling, "
                                    "cpu affinity not permitted, idle states allowed (permission denied)")
    said = " | ".join(rtcheck.advice(facts, refused))
    assert "SCHED_FIFO was refused" in said and "rtprio" in said
    assert "could not be pinned" in said
    assert "could not be kept out of idle states" in said and "cpu_dma_latency" in said
    vm = " | ".join(rtcheck.advice({**facts, "virtual_machine": True, "cpus": 1,
                                    "preemption": "no forced preemption (server kernel)"},
                                   floor_with(cpu_steal_fraction=0.02)))
    assert "virtual machine" in vm and "2.0 %" in vm and "one CPU only" in vm and "PREEMPT_RT" in vm


def test_the_port_check_times_round_trips_and_names_a_slow_adapter(emulator, tmp_path):
    """The built-in emulator answers within a few ms; one that holds each reply 16 ms (an FTDI chip
    at its default latency timer) is named with the fix, as `hil run` names it."""
    from hil import robots
    from hil.emulator_launch import emulator_args

    out_json = tmp_path / "rt.json"
    r = subprocess.run(HIL + ["rt-check", "--seconds", "0.3", "--dry-run", "--json", str(out_json)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode in (0, 1), r.stdout + r.stderr
    port = json.loads(out_json.read_text())["port"]
    assert port["board"].startswith("PUMA6") and len(port["round_trip_ms"]) == 20
    assert 0 < sorted(port["round_trip_ms"])[10] < 16.0 and port["warning"] is None
    assert "round trip command → STATE median" in r.stdout

    emu = emulator(*emulator_args(robots.load("humanoid17"), latency_ms=16.0))
    r = subprocess.run(HIL + ["rt-check", "--seconds", "0.3", "--rate", "500", "--port", emu.path, "--json",
                              str(out_json)], capture_output=True, text=True, timeout=120)
    assert r.returncode in (0, 1), r.stdout + r.stderr
    port = json.loads(out_json.read_text())["port"]
    assert port["board"].startswith("HUMANOID17") and min(port["round_trip_ms"]) >= 16.0
    assert "longer than one 500 Hz cycle" in port["warning"] and port["warning"] in r.stdout


CAUSED_MISSES = r"""
import json, os, sys, threading, time
from hil.runtime.rtcheck import timing_floor

def busy(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass

def timed_million():
    t = time.thread_time(); sum(range(1_000_000)); return time.thread_time() - t
# CPU time, the least of several: measured before the loop takes its priority, a wall-clock timing
# counts what another job took meanwhile, and the hold below (run at the loop's priority,
# undisturbed) would then be too short to test anything
per_million = min(timed_million() for _ in range(7))
def hold_the_gil():
    # a helper of the loop leaves its CPU (keeping its priority), as the loop's own do: the wait
    # under test is for the GIL, not for a CPU this thread would occupy
    try:
        loop_cpus = os.sched_getaffinity(0)
        os.sched_setaffinity(0, (set(range(os.cpu_count() or 1)) - loop_cpus) or loop_cpus)
    except (OSError, AttributeError):
        pass
    time.sleep(1e-4)  # let the loop go to sleep first
    sum(range(int(6e-3 / per_million * 1e6)))  # one C call: ~6 ms without letting go of the GIL

def work(i):
    if i in (300, 900, 1500):
        busy(4e-3)
    elif i in (600, 1200, 1800):
        threading.Thread(target=hold_the_gil).start()

# SCHED_FIFO where permitted: with another job on every core, an ordinary thread's 4 ms of work are
# shared with it (and rightly counted as taken); the causes under test are the loop's own
print(json.dumps(timing_floor(1000, 2.1, realtime=os.geteuid() == 0, keep_cpu_awake=False, work=work)))
"""


def test_each_missed_deadline_is_taken_apart():
    """Misses of a known kind, caused on purpose three times each: 4 ms of the cycle's own work,
    and a thread holding the GIL for ~6 ms while the loop sleeps. On a noisy machine a stall of
    its own can fall on one of them; two of three must come out under their cause."""
    from hil.runtime import misses as M

    r = subprocess.run([sys.executable, "-c", CAUSED_MISSES], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    floor = json.loads(r.stdout)
    explained = floor["missed_deadlines_explained"]
    assert sum(floor["missed_deadline_causes"].values()) == floor["missed_deadlines"]
    assert sum(m["deadlines"] for m in explained) == floor["missed_deadlines"]
    dump = json.dumps(explained, indent=0)

    # The 4 ms of work come after an on-time wake-up: the deadlines they run past are skipped
    # (not served back to back) and counted under their cause: 4 ms past its own deadline, the
    # next three are more than T/2 late
    work = [m for m in explained if m["cause"] == M.WORK and not m["catching_up"] and m["work_us"] >= 3000
            and m["deadlines"] == 3]
    assert len(work) >= 2, dump
    # and the loop goes on at the next deadline, not with a catch-up: whatever the deadline after
    # them meets (on a busy machine, a miss of its own), it inherits less than a period from them
    for w in work:
        following = [m for m in explained if abs(m["deadline_s"] - (w["deadline_s"] + 0.003)) < 1e-4]
        assert not [m for m in following if m["catching_up"] or m["inherited_us"] >= 1000], following

    # The GIL held through the loop's sleep: a wake-up late by the wait, with the switches of a
    # wait (more than the sleep's one), and the deadlines passed meanwhile skipped under its cause
    def skipped_after(g):
        return any(0 < m["deadline_s"] - g["deadline_s"] < 0.002 and m["catching_up"] and m["cause"] == g["cause"]
                   and m["deadlines"] >= 2 for m in explained)

    gil = [m for m in explained if m["cause"] in (M.LATE_WAKE_BLOCKED, M.BLOCKED) and not m["catching_up"]
           and max(m["late_wake_us"], m["taken_us"]) >= 3000 and m["voluntary_switches"] >= 2 and skipped_after(m)]
    assert len(gil) >= 2, dump
