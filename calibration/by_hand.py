"""Calibration by hand on a servo bus, torque off: each joint's range of motion swept end to end
(`--method range`), and each joint's direction shown by moving it the robot's positive way
(`--method directions`).

A servo reports its own ticks: commanded and read back through the same mapping, a servo mounted
the other way round looks right to any test the host runs alone. Only the robot's own geometry,
which the user sees, tells which way is positive; so the user moves the joint and hil reads which
way its ticks went. Readings are unwrapped as they arrive (a horn swept past the encoder's wrap
reads 4095 then 0: one tick on, not a turn back).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from firmware_protocol.buses import bus_class
from firmware_protocol.buses.bus_board import BusConfig
from hil.board_config import remapped
from hil.errors import InputError

MIN_SWEEP_RAD = math.radians(5.0)   # a joint moved less than this was not swept: its limits stay
END_RAD = math.radians(1.5)         # a sweep this near a robot's end reached it


def turn_rad(bus: BusConfig) -> np.ndarray:
    """Each joint's full servo turn in radians (inf: readings that do not wrap, or no feedback)."""
    cls = bus_class(bus.bus)
    out = []
    for j in bus.joints:
        turn = cls.turn_ticks(j.model)
        out.append(turn / j.ticks_per_rad if turn else math.inf)
    return np.array(out)


class Unwrapped:
    """Joint readings (rad, through the config) followed across the encoders' wrap."""

    def __init__(self, first: np.ndarray, period: np.ndarray) -> None:
        self.period = period
        self._raw = np.asarray(first, float).copy()
        self.q = self._raw.copy()
        self.lo, self.hi = self.q.copy(), self.q.copy()

    def add(self, raw: np.ndarray) -> np.ndarray:
        step = np.asarray(raw, float) - self._raw
        wraps = np.isfinite(self.period)
        step[wraps] -= self.period[wraps] * np.round(step[wraps] / self.period[wraps])
        self._raw = np.asarray(raw, float).copy()
        self.q += step
        np.minimum(self.lo, self.q, out=self.lo)
        np.maximum(self.hi, self.q, out=self.hi)
        return self.q


@dataclass(frozen=True)
class JointRange:
    name: str
    swept: tuple[float, float]        # rad, as recorded
    limits: tuple[float, float]       # rad, what the config keeps
    note: str


def ranges(bus: BusConfig, model, lo: np.ndarray, hi: np.ndarray) -> list[JointRange]:
    """What each joint's recorded range [lo, hi] (rad) makes of its limits: the narrower of the
    robot's and the recording where the joint was swept; InputError naming every joint that
    cannot take its recording (nothing is written then)."""
    period = turn_rad(bus)
    out, refused = [], []
    for i, j in enumerate(bus.joints):
        a, b = float(lo[i]), float(hi[i])
        m_lo, m_hi = float(model.lower[i]), float(model.upper[i])
        span = f"[{math.degrees(a):+.1f}, {math.degrees(b):+.1f}]°"
        if b - a < MIN_SWEEP_RAD:
            out.append(JointRange(j.name, (a, b), (j.min_rad, j.max_rad), "not swept: limits kept"))
            continue
        if b - a >= period[i]:
            refused.append(f"{j.name} swept {math.degrees(b - a):.0f}°, more than its servo's turn")
            continue
        if b <= m_lo or a >= m_hi:
            refused.append(f"{j.name} swept {span}, outside the robot's [{math.degrees(m_lo):+.1f}, "
                           f"{math.degrees(m_hi):+.1f}]° (its zero is off: `--method reference` first)")
            continue
        # within END_RAD of the robot's end is that end, reached: a hand never stops exactly on it
        keep = (m_lo if a <= m_lo + END_RAD else a, m_hi if b >= m_hi - END_RAD else b)
        notes = []
        if a < m_lo - END_RAD or b > m_hi + END_RAD:
            notes.append("went past the robot's range (its end kept)")
        if keep != (m_lo, m_hi):
            notes.append("narrowed to the sweep")
        out.append(JointRange(j.name, (a, b), keep, "; ".join(notes) or "as the robot's"))
    if refused:
        raise InputError("the recorded ranges cannot be used (nothing was written): " + "; ".join(refused))
    if all(r.note.startswith("not swept") for r in out):
        raise InputError("no joint moved more than 5°: was the torque off, and was each joint moved by hand from "
                         "one end of its range to the other? Nothing was written")
    return out


def ranged_config(bus: BusConfig, result: list[JointRange]) -> BusConfig:
    """The config with the recorded limits. A LeRobot range imported for the old limits no longer
    describes them: dropped (an export writes the new limits)."""
    joints = []
    for j, r in zip(bus.joints, result):
        if r.limits == (j.min_rad, j.max_rad):
            joints.append(j)
            continue
        joints.append(remapped(j, min_rad=r.limits[0], max_rad=r.limits[1]))
    return dataclasses.replace(bus, joints=tuple(joints), shipped=False)


@dataclass(frozen=True)
class Direction:
    name: str
    moved: float        # rad, the reading's change when the user moved the joint its positive way
    direction: int      # what the config's direction becomes (0: undecided, kept)


def directions(bus: BusConfig, moved: np.ndarray, threshold: float) -> list[Direction]:
    """Each joint's direction from how its reading changed when moved by hand the robot's positive
    way: a reading that went down means the servo is mounted the other way round."""
    out = []
    for j, d in zip(bus.joints, moved):
        if abs(d) < threshold:
            out.append(Direction(j.name, float(d), 0))
        else:
            out.append(Direction(j.name, float(d), j.direction * (1 if d > 0 else -1)))
    return out


def directed_config(bus: BusConfig, result: list[Direction]) -> BusConfig:
    """The config with the found directions. The zero tick stays (the tick at the joint's zero is
    where the horn sits, whichever way it counts); a LeRobot range, if any, is dropped."""
    joints = []
    for j, r in zip(bus.joints, result):
        if r.direction in (0, j.direction):
            joints.append(j)
        else:
            joints.append(remapped(j, direction=r.direction))
    return dataclasses.replace(bus, joints=tuple(joints), shipped=False)
