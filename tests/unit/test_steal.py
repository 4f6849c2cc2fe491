"""Steal-time accounting the loop reports on a virtual machine (read from /proc/stat)."""

from __future__ import annotations

import os

import pytest

from hil.runtime.realtime import cpu_times, steal_fraction


def test_steal_fraction_from_two_readings():
    assert steal_fraction((10, 1000), (60, 2000)) == pytest.approx(0.05)
    assert steal_fraction((10, 1000), (10, 1000)) is None  # no time passed
    assert steal_fraction(None, (10, 1000)) is None


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="Linux only")
def test_cpu_times_read_proc_stat():
    whole = cpu_times(None)
    last = cpu_times(max(os.sched_getaffinity(0)))
    assert whole is not None and last is not None
    for steal, total in (whole, last):
        assert 0 <= steal <= total and total > 0
    assert last[1] <= whole[1]  # one cpu's ticks are part of the machine's
    assert cpu_times(10_000) is None  # no such cpu
