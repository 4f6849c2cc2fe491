"""Taking a missed deadline apart (hil/runtime/misses.py): which part of the late interval was the
largest names the cause; a catch-up after a stall keeps the stall's cause."""

from __future__ import annotations

import time

import pytest

from hil.runtime import misses as M

MS = 1e-3


def parts(**changes) -> dict:
    """A cycle that slept as asked: 60 µs of work in 60 µs, 440 µs of sleep, 500 µs of spin."""
    base = dict(work_wall_s=0.06 * MS, work_cpu_s=0.06 * MS, slept_s=0.44 * MS, planned_sleep_s=0.44 * MS,
                spin_wall_s=0.5 * MS, spin_cpu_s=0.5 * MS, voluntary=1, involuntary=0)
    return {**base, **changes}


def test_work_that_ran_long():
    a = M.attribute(**parts(work_wall_s=3 * MS, work_cpu_s=2.98 * MS, slept_s=0.0, planned_sleep_s=0.0, voluntary=0))
    assert a["cause"] == M.WORK and a["work_us"] == pytest.approx(2980) and a["taken_us"] == pytest.approx(20)
    assert not a["catching_up"]


@pytest.mark.parametrize("voluntary, involuntary, cause", [(1, 0, M.TAKEN), (1, 1, M.PREEMPTED),
                                                           (3, 0, M.BLOCKED)])
def test_time_the_running_loop_did_not_get(voluntary, involuntary, cause):
    # 2 ms of wall time in the spin with 0.5 ms of CPU: the thread was runnable, not running
    a = M.attribute(**parts(spin_wall_s=2.5 * MS, voluntary=voluntary, involuntary=involuntary))
    assert a["cause"] == cause and a["taken_us"] == pytest.approx(2000)


def test_the_sleep_itself_is_not_a_wait_but_a_cycle_without_sleep_has_none_to_discount():
    # one voluntary switch is the sleep; without a sleep the same switch is a wait
    assert M.attribute(**parts(work_wall_s=2 * MS))["cause"] == M.TAKEN
    assert M.attribute(**parts(work_wall_s=2 * MS, slept_s=0.0, planned_sleep_s=0.0))["cause"] == M.BLOCKED


@pytest.mark.parametrize("voluntary, cause", [(1, M.LATE_WAKE), (2, M.LATE_WAKE_BLOCKED)])
def test_a_late_wake_up(voluntary, cause):
    a = M.attribute(**parts(slept_s=3.44 * MS, voluntary=voluntary))
    assert a["cause"] == cause and a["late_wake_us"] == pytest.approx(3000) and a["taken_us"] == pytest.approx(0)


def test_a_catch_up_keeps_the_cause_of_the_miss_before_it():
    a = M.attribute(**parts(slept_s=0.0, planned_sleep_s=0.0, voluntary=0, work_wall_s=0.3 * MS,
                            work_cpu_s=0.3 * MS), inherited_s=2 * MS, previous_cause=M.LATE_WAKE)
    assert a["catching_up"] and a["cause"] == M.LATE_WAKE and a["inherited_us"] == pytest.approx(2000)
    # larger than what it inherited, the cycle's own part names the cause
    b = M.attribute(**parts(spin_wall_s=3.5 * MS), inherited_s=2 * MS, previous_cause=M.LATE_WAKE)
    assert not b["catching_up"] and b["cause"] == M.TAKEN
    # nothing to inherit from: not a catch-up, whatever the number says
    c = M.attribute(**parts(), inherited_s=2 * MS, previous_cause=None)
    assert not c["catching_up"] and c["cause"] != M.LATE_WAKE


def test_a_miss_over_a_stop_is_the_stops():
    """A stopped process is neither running nor runnable, as a thread waiting for the GIL is not:
    the SIGCONT that lets it go on tells them apart, for that miss and not the next one."""
    import os
    import signal

    from hil.runtime import misses as M

    M.watch_for_stops()
    tracer = M.MissTracer()
    tracer.started(time.monotonic())
    os.kill(os.getpid(), signal.SIGCONT)          # (a process that was not stopped ignores it otherwise)
    now = time.monotonic()
    tracer.woke(now, 1.0, 0.010, True, 0.002)
    tracer.woke(now + 0.02, 1.02, 0.010, True, 0.002)
    causes = [part["cause"] for _, _, part in tracer.missed]
    assert causes[0] == M.STOPPED and causes[1] != M.STOPPED, causes
    signal.signal(signal.SIGCONT, signal.SIG_DFL)
