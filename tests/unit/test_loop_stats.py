"""The loop's timing statistics, judged by NumPy's own percentile and histogram."""

from __future__ import annotations

import numpy as np
import pytest

from hil.runtime.loop_stats import LoopStats as _Stats
from hil.runtime.realtime import SPIN_MAX_S, SPIN_MIN_S, SPIN_SLEEPS, SpinWindow, next_deadline_after

T_US = 1000.0


def filled(count: int, size: int = 2048, seed: int = 3) -> tuple[_Stats, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    periods = T_US + rng.standard_t(2, count) * 80.0  # heavy tails, like a VM's
    cycles = 50.0 + rng.exponential(20.0, count)
    compute = cycles - rng.uniform(0.0, 10.0, count)
    st = _Stats(size)
    for p, c, k in zip(periods, cycles, compute):
        st.add(p, c, k)
    return st, periods, cycles, compute


def nearest_rank(x: np.ndarray, q: float) -> float:
    return float(np.percentile(x, q, method="inverted_cdf"))


@pytest.mark.parametrize("count, last", [(40, None), (2048, None), (3000, None), (3000, 1000), (3000, 2048),
                                         (3000, 5000), (370, 100), (1, None)])
def test_summary_matches_numpy_over_the_kept_window(count, last):
    """The ring keeps 2048 samples; windows that wrap around its end are included (3000 samples)."""
    st, periods, cycles, compute = filled(count)
    kept = min(count, 2048) if last is None else min(count, 2048, last)
    p, c, k = periods[-kept:], cycles[-kept:], compute[-kept:]
    jit = np.abs(p - T_US)
    s = st.summary(T_US, last=last)
    expected = {
        "jitter_p50_us": nearest_rank(jit, 50), "jitter_p99_us": nearest_rank(jit, 99), "jitter_max_us": jit.max(),
        "period_p50_us": nearest_rank(p, 50), "cycle_p50_us": nearest_rank(c, 50),
        "cycle_p99_us": nearest_rank(c, 99), "cycle_max_us": c.max(), "compute_p50_us": nearest_rank(k, 50),
        "compute_p99_us": nearest_rank(k, 99),
    }
    assert s == pytest.approx(expected, rel=0, abs=1e-9)


def test_summary_of_nothing_is_zeros():
    s = _Stats(8).summary(T_US)
    assert set(s.values()) == {0.0} and "jitter_p99_us" in s


def test_summary_leaves_the_samples_in_place():
    st, periods, _, _ = filled(2048)
    st.summary(T_US)
    assert np.array_equal(st.window()[0], periods)


@pytest.mark.parametrize("count, last", [(3000, 1000), (2048, None), (20, None)])
def test_jitter_histogram_matches_numpy(count, last):
    st, periods, _, _ = filled(count)
    kept = min(count, 2048) if last is None else min(count, 2048, last)
    jit = np.abs(periods[-kept:] - T_US)
    expected, _ = np.histogram(np.minimum(jit, 1999.0), bins=20, range=(0.0, 2000.0))
    got = st.jitter_histogram(T_US, last=last)
    assert got.shape == (20,) and np.array_equal(got, expected)
    assert got.sum() == kept


def test_the_grid_skips_deadlines_already_missed_instead_of_serving_them_back_to_back():
    T = 1e-3
    # on time: the next deadline on the grid, woken for at that deadline
    assert next_deadline_after(10.0, 10.0002, T, woke=10.0) == pytest.approx((10.001, 0, 10.001))
    # woke 0.8 ms late: 10.001 is served, but not sooner than T/2 after that wake-up (0.3 ms late,
    # not a miss) — never two cycles within half a period
    assert next_deadline_after(10.0, 10.0009, T, woke=10.0008) == pytest.approx((10.001, 0, 10.0013))
    # woke 1.2 ms late: 10.001 could only be served 0.7 ms late, a miss anyway: skipped; 10.002 is next
    assert next_deadline_after(10.0, 10.0013, T, woke=10.0012) == pytest.approx((10.002, 1, 10.002))
    # a stall inside the cycle, 3.5 periods: 10.001 … 10.003 skipped, 10.004 is 0.5 ms ahead
    assert next_deadline_after(10.0, 10.0035, T, woke=10.0) == pytest.approx((10.004, 3, 10.004))
    # 10.020 is 0.4 ms behind at the end: served at once (not a miss); 10.001 … 10.019 skipped
    assert next_deadline_after(10.0, 10.0204, T, woke=10.0) == pytest.approx((10.020, 19, 10.0204))
    # a 200 ms stall at 1 kHz
    assert next_deadline_after(5.0, 5.2005, T)[1] == 200


def test_the_spin_is_sized_to_how_late_the_sleeps_end():
    """The busy-wait before a deadline starts at its most, then follows the sleeps' 99th percentile
    (1.25 × it + 20 µs) within its bounds; a figure the user gave stays; a cycle without a sleep
    tells nothing."""
    rng = np.random.default_rng(3)
    spin = SpinWindow(None)
    assert spin.seconds == SPIN_MAX_S
    late = rng.uniform(100e-6, 160e-6, SPIN_SLEEPS)
    late[:3] = 3e-3                  # a few stalls (under 1 %) do not buy a long spin
    for x in late:
        spin.slept(float(x))
        spin.slept(None)
    p99 = np.sort(late)[int(0.99 * (SPIN_SLEEPS - 1))]
    assert spin.seconds == pytest.approx(1.25 * p99 + 20e-6)
    for x in rng.uniform(250e-6, 300e-6, SPIN_SLEEPS):    # a busier machine: the spin grows
        spin.slept(float(x))
    assert 1.25 * 250e-6 + 20e-6 < spin.seconds <= SPIN_MAX_S
    for x in rng.uniform(0, 100e-6, SPIN_SLEEPS):         # and shrinks again
        spin.slept(float(x))
    assert spin.seconds == SPIN_MIN_S
    fixed = SpinWindow(80e-6)
    for x in late:
        fixed.slept(float(x))
    assert fixed.seconds == 80e-6


def test_the_end_of_a_run_says_what_the_link_did():
    """Rejected frames are said (never only counted); stale cycles past the stated share are said with
    the rate that would hold; a few stale cycles are not news."""
    from hil.runtime.loop import STALE_SHARE, link_notes

    assert link_notes(0, 10, 3000, 1000.0, [1.1, 1.2, 1.3]) == []
    rejected, stale = link_notes(167, int(0.3 * 2160), 2160, 1000.0, [1.3, 1.38, 1.4])
    assert rejected.startswith("167 frames from the board were rejected")
    assert "648 of 2160 cycles (30 %) had no new STATE" in stale and "about 604 Hz would hold" in stale, stale
    assert link_notes(0, int(STALE_SHARE * 2000) + 1, 2000, 500.0, None)[0].endswith("500 Hz; lower --rate")
