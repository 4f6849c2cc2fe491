"""The loop's timing statistics: a ring of the last periods, cycle and compute times (µs), with
percentiles cheap enough to publish between two cycles."""

from __future__ import annotations

import math

import numpy as np


class LoopStats:
    def __init__(self, size: int = 16384) -> None:
        self.periods = np.zeros(size)
        self.cycles = np.zeros(size)
        self.compute = np.zeros(size)  # cycle time minus the time in the serial port's read and write
        self.k = 0
        self.count = 0
        self.misses = 0
        self.skipped = 0  # deadlines a stall or an overrun passed over, served by no cycle (also in misses)
        # (the deadline, s since start; how late it was served, µs), the first MISSES_KEPT, in time order
        self.missed_at: list[tuple[float, float]] = []
        self.stale = 0
        self.link_errors = 0
        self.safety_counts: dict[str, int] = {}
        self.max_track_err = 0.0
        self.max_cmd_speed = 0.0
        self.events: list[str] = []

    def add(self, period_us: float, cycle_us: float, compute_us: float) -> None:
        i = self.k % self.periods.size
        self.periods[i] = period_us
        self.cycles[i] = cycle_us
        self.compute[i] = compute_us
        self.k += 1

    def window(self, last: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(periods, cycles, compute) of all kept samples, or of the `last` ones, oldest first (µs)."""
        size = self.periods.size
        n = min(self.k, size) if last is None else min(self.k, size, last)
        start = (self.k - n) % size
        if start + n <= size:
            pick = slice(start, start + n)
            return self.periods[pick], self.cycles[pick], self.compute[pick]
        idx = np.arange(start, start + n) % size
        return self.periods[idx], self.cycles[idx], self.compute[idx]

    def summary(self, T_us: float, last: int | None = None) -> dict:
        """Timing statistics (µs) over all kept samples, or over the `last` ones.

        Percentiles are nearest-rank (the sample at rank ⌈p·n⌉), found by one partial sort per
        series: the live display runs this between two cycles every half second, where NumPy's
        interpolating `percentile` is slow enough to miss a deadline at 1 kHz; this is not."""
        p, c, comp = self.window(last)
        n = len(p)
        keys = ("jitter_p50_us", "jitter_p99_us", "jitter_max_us", "period_p50_us", "cycle_p50_us",
                "cycle_p99_us", "cycle_max_us", "compute_p50_us", "compute_p99_us")
        if n == 0:
            return dict.fromkeys(keys, 0.0)
        r50, r99 = max(math.ceil(0.5 * n) - 1, 0), max(math.ceil(0.99 * n) - 1, 0)
        jit = np.partition(np.abs(p - T_us), (r50, r99, n - 1))
        cyc = np.partition(c, (r50, r99, n - 1))
        comp = np.partition(comp, (r50, r99))
        per = np.partition(p, r50)
        values = (jit[r50], jit[r99], jit[n - 1], per[r50], cyc[r50], cyc[r99], cyc[n - 1], comp[r50], comp[r99])
        return {k: float(v) for k, v in zip(keys, values)}

    def jitter_histogram(self, T_us: float, last: int | None = None) -> np.ndarray:
        """Counts of |period − T| in 20 bins of 100 µs; the last bin holds everything from 1.9 ms up."""
        bins = (np.minimum(np.abs(self.window(last)[0] - T_us), 1999.0) * 0.01).astype(np.intp)
        return np.bincount(bins, minlength=20)
