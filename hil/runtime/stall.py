"""Stall watch: a joint pushing against something it cannot move.

A position servo that meets an obstacle (a hand, a table, the robot's own body, a jammed gear)
keeps pushing with all its torque: its current sits near its stall current, its position lags
the command, and it does not move. Left so, it overheats, strips a gear or pushes what it meets
harder and harder. The loop holds the motion and lets that joint's command come to where it
stands, naming it, within STALL_S of the stall starting (plus a bus cycle to see it).

Only where the servos report their current (Dynamixel X, Feetech STS, hil's boards, the physics
emulator); the stall current is the servo's torque limit over its torque constant
(hil.robots.servos).
"""

from __future__ import annotations

import math

import numpy as np

from hil.safety import stall_step

STALL_S = 0.1                        # this long in a row is a stall, not a bump
STALL_LOAD = 0.85                    # of the stall current: a servo at (nearly) all it can give
STALL_ERROR_RAD = math.radians(3.0)  # behind the command by more than its sag at moderate load
STILL_RAD_S = 0.05                   # and not moving toward it


class StallWatch:
    """Counts, per joint, the cycles in a row it pushes without moving (one compiled pass a cycle:
    as a dozen NumPy calls it was the largest part of the loop's cycle)."""

    def __init__(self, servo, period_s: float) -> None:
        self.stall_mA = np.ascontiguousarray(servo.stall_current_mA(), dtype=np.float64)
        self.cycles = max(1, math.ceil(STALL_S / period_s))
        self.count = np.zeros(len(self.stall_mA), dtype=np.int64)
        self.period_s = period_s
        still = np.zeros(len(self.stall_mA))
        self.update(still, still, still, still)   # compiled (or loaded) now, not in the first cycle

    def update(self, q_cmd: np.ndarray, q_meas: np.ndarray, qd_meas: np.ndarray, current_mA: np.ndarray) -> int:
        """One cycle's measurement; the index of a joint stalled for STALL_S (-1: none)."""
        worst = stall_step(_f64(q_cmd), _f64(q_meas), _f64(qd_meas), _f64(current_mA), self.stall_mA, self.count,
                           STALL_LOAD, STALL_ERROR_RAD, STILL_RAD_S)
        if self.count[worst] < self.cycles:
            return -1
        self.count[:] = 0
        return worst

    def describe(self, j: int, name: str, q_cmd, q_meas, current_mA) -> str:
        return (f"{name} pushes with {abs(current_mA[j]):.0f} mA ({abs(current_mA[j]) / self.stall_mA[j]:.0%} of its "
                f"stall current) and stands {math.degrees(abs(q_cmd[j] - q_meas[j])):.1f}° short of its command, not "
                f"moving, for {self.cycles * self.period_s:.2f} s: something blocks it")


def _f64(a) -> np.ndarray:
    """The kernel takes float64 arrays only (compiled once, ahead): anything else converted."""
    return a if isinstance(a, np.ndarray) and a.dtype == np.float64 else np.asarray(a, dtype=np.float64)
