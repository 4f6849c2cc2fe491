"""A planned motion against the joints' speed and acceleration limits, sample by sample: what a
robot can follow. Walks, keyframe motions and trajectories are checked with it before they run."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class LimitReport:
    speed_ratio: float        # the largest |q̇| / limit over joints and samples
    accel_ratio: float        # the largest |q̈| / limit
    worst: str                # that sample in words (joint, value, limit, time)
    first_over_t: float | None   # the time of the first sample over either limit, or None

    @property
    def time_scale(self) -> float:
        """How much slower the motion must run to stay within both limits (1: as it is):
        speeds scale with 1/k, accelerations with 1/k²."""
        return max(1.0, self.speed_ratio, math.sqrt(self.accel_ratio))


def check_limits(model, t: np.ndarray, Q: np.ndarray) -> LimitReport:
    """Speeds and accelerations of the samples Q (N, n) at times t (N,): the finest differences the
    samples allow (neighbours only: a wider stencil would average a sharp turn away)."""
    t = np.asarray(t, float)
    Q = np.asarray(Q, float)
    if len(t) < 3:
        return LimitReport(0.0, 0.0, "", None)
    h = np.diff(t)
    if not np.all(h > 0):
        keep = np.concatenate([[True], h > 0])   # repeated times (a keyframe on the last sample)
        t, Q = t[keep], Q[keep]
        h = np.diff(t)
    if len(t) < 3:
        return LimitReport(0.0, 0.0, "", None)
    slope = np.diff(Q, axis=0) / h[:, None]                       # between samples
    v = np.empty_like(Q)
    v[1:-1] = 0.5 * (slope[1:] + slope[:-1])
    v[0], v[-1] = slope[0], slope[-1]
    a = np.zeros_like(Q)
    a[1:-1] = 2.0 * (slope[1:] - slope[:-1]) / (h[1:] + h[:-1])[:, None]
    rv = np.abs(v) / model.velocity_limit
    ra = np.abs(a) / model.acceleration_limit
    over = np.flatnonzero((rv > 1.0).any(axis=1) | (ra > 1.0).any(axis=1))
    kv, jv = np.unravel_index(int(np.argmax(rv)), rv.shape)
    ka, ja = np.unravel_index(int(np.argmax(ra)), ra.shape)
    if ra[ka, ja] >= rv[kv, jv] ** 2:
        worst = (f"{model.joint_names[ja]} {math.degrees(abs(a[ka, ja])):.0f} °/s² at t = {t[ka]:.3f} s "
                 f"(limit {math.degrees(model.acceleration_limit[ja]):.0f} °/s²)")
    else:
        worst = (f"{model.joint_names[jv]} {math.degrees(abs(v[kv, jv])):.0f} °/s at t = {t[kv]:.3f} s "
                 f"(limit {math.degrees(model.velocity_limit[jv]):.0f} °/s)")
    return LimitReport(float(rv[kv, jv]), float(ra[ka, ja]), worst, float(t[over[0]]) if len(over) else None)


@dataclass(frozen=True)
class Followed:
    q: np.ndarray          # (N, n): where joints kept within their limits go
    lag_rad: float         # the most any joint trails the samples asked for
    joint: int             # which
    at_s: float            # and when


LIMIT_BRAKE = 0.5   # the share of the acceleration limit a follower brakes with toward a joint's limit


def _brake(distance: np.ndarray, amax: np.ndarray, dt: float) -> np.ndarray:
    """The most speed that still stops within `distance` braking at amax in steps of dt:
    v²/2a + v·dt/2 = distance."""
    return amax * (np.sqrt(0.25 * dt * dt + 2.0 * distance / amax) - 0.5 * dt)


def follow_within_limits(model, t: np.ndarray, Q: np.ndarray) -> Followed:
    """The samples Q (N, n) at times t as joints held to their speed and acceleration limits
    would follow them: each step moves with the samples and closes what it trails by as fast as
    the limits allow, braking in time not to pass them. Where the samples ask for more than the limits give, the
    result trails them — by at most `lag_rad`. For samples recorded elsewhere (a LeRobot episode)
    that no plan shaped to this robot's limits."""
    t = np.asarray(t, dtype=np.float64)
    Q = np.asarray(Q, dtype=np.float64)
    # a hair inside the limits: rounding must not put a sample at the limit past it
    vmax, amax = model.velocity_limit * (1 - 1e-6), model.acceleration_limit * (1 - 1e-6)
    lo, hi = np.minimum(model.lower, Q.min(axis=0)), np.maximum(model.upper, Q.max(axis=0))
    out = np.empty_like(Q)
    q, v = Q[0].copy(), np.zeros(Q.shape[1])
    out[0] = q
    for k in range(1, len(t)):
        dt = t[k] - t[k - 1]
        if dt <= 0:
            out[k] = q
            continue
        err = Q[k] - q
        moving = (Q[k] - Q[k - 1]) / dt                  # the samples' own speed, closed on from behind
        close = np.sign(err) * np.minimum(np.abs(err) / dt, _brake(np.abs(err), amax, dt))
        # and, like the samples, never past a joint's limit: braking in time for it too
        # (at half of amax, and no further than the limit in one step: the stop itself then
        # asks for no more than amax, whatever fraction of a step the last one is)
        room_up, room_down = np.maximum(hi - q, 0.0), np.maximum(q - lo, 0.0)
        up = np.minimum(_brake(room_up, LIMIT_BRAKE * amax, dt), room_up / dt)
        down = np.minimum(_brake(room_down, LIMIT_BRAKE * amax, dt), room_down / dt)
        v = np.clip(np.clip(np.clip(moving + close, -vmax, vmax), -down, up), v - amax * dt, v + amax * dt)
        # (a rounding's worth past the limit is put back on it)
        stepped = np.clip(q + v * dt, lo, hi)
        v = (stepped - q) / dt
        q = stepped
        out[k] = q
    lag = np.abs(out - Q)
    k, j = np.unravel_index(int(np.argmax(lag)), lag.shape)
    return Followed(out, float(lag[k, j]), int(j), float(t[k]))
