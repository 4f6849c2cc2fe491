"""Loops on one machine take CPUs of their own (`reserve_loop_cpu`): two loops spinning on one CPU
can use up the kernel's real-time budget there, which stops both for longer than a watchdog."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

RESERVE = ("import sys, time\n"
           "from hil.runtime import realtime as R\n"
           "cpu = R.reserve_loop_cpu()\n"
           "print(cpu, R.loop_cpu_choice(), R._reserved['note'] or '-', flush=True)\n"
           "sys.stdin.read()\n")


def _lock_holders(cpu: int) -> set[int]:
    """Pids holding the flock of `cpu`'s reservation (from /proc/locks)."""
    from hil.runtime.realtime import _lock_path

    inode = os.stat(_lock_path(cpu)).st_ino
    with open("/proc/locks") as f:
        rows = [line.split() for line in f]
    return {int(r[4]) for r in rows if len(r) > 5 and r[1] == "FLOCK" and int(r[5].rsplit(":", 1)[1]) == inode}


def _stop(p) -> None:
    if p.poll() is None:
        p.kill()
    p.wait()
    p.stdin.close()
    p.stdout.close()


def _holder():
    p = subprocess.Popen([sys.executable, "-c", RESERVE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    cpu, choice, note = p.stdout.readline().split(" ", 2)
    return p, int(cpu), note.strip(), int(choice)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one CPU: loops are not pinned")
def test_a_second_loop_takes_another_cpu_and_a_dead_one_gives_its_cpu_back():
    first, a, _, choice_a = _holder()
    try:
        assert choice_a == a  # what its port process will leave free
        assert first.pid in _lock_holders(a)
        second, b, note, _ = _holder()
        try:
            # another test worker's loop may hold a CPU too: then the second one shares, and says so
            assert b != a or "shared" in note, (a, b, note)
        finally:
            _stop(second)
        _stop(first)  # killed: no clean-up runs, the kernel drops the lock with the process
        assert first.pid not in _lock_holders(a)
    finally:
        _stop(first)
