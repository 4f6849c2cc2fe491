"""The loop's timing statistics, judged by NumPy's own percentile and histogram."""

from __future__ import annotations

import numpy as np
import pytest

from hil.runtime.loop import _Stats, next_deadline_after

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


def test_the_grid_catches_up_after_a_short_stall_and_restarts_after_a_long_one():
    T = 1e-3
    # 3 periods behind: the next deadline on the grid, nothing skipped (the loop catches up)
    assert next_deadline_after(10.0, 10.0035, T) == (pytest.approx(10.001), 0)
    # within ten periods still catches up
    assert next_deadline_after(10.0, 10.0 + 10.9 * T, T) == (pytest.approx(10.001), 0)
    # 20.5 periods behind: deadlines 10.001 … 10.020 passed unserved; the grid restarts from now
    nxt, skipped = next_deadline_after(10.0, 10.0205, T)
    assert nxt == pytest.approx(10.0215) and skipped == 20
    # a 200 ms stall at 1 kHz
    assert next_deadline_after(5.0, 5.2005, T)[1] == 200
