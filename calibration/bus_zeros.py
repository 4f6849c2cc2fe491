"""Where a joint's zero and range go in its servo's ticks.

A servo with an absolute encoder reads 0 … turn − 1 and wraps there. A joint whose range crosses
that wrap cannot be driven in position mode: a reading there jumps a whole turn, and a goal on the
far side sends the servo the long way round. `place` puts each joint's whole range inside one turn:
as it stands when it fits, else with a Homing Offset that shifts the servo's readings (within what
the servo allows), else it says which joint and what to do.

Readings in the reference pose are averaged on the circle (`mean_ticks`): two readings of 4094 and
2 are one position (tick 0), not tick 2048.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from firmware_protocol.buses.bus_board import ServoJoint


class PlacementError(ValueError):
    """A joint whose range cannot be placed inside one turn of its servo."""


@dataclass(frozen=True)
class Placement:
    zero_tick: float           # in the servo's readings after the change
    shift: int                 # ticks the readings move by (0: no homing offset written)
    homing_offset: int | None  # what the servo's Homing Offset register holds afterwards (None: it has none)
    limits: tuple[int, int] | None   # the joint's range in ticks: the servo's Min/Max Position Limits


def mean_ticks(samples: np.ndarray, turn: int | None) -> float:
    """The mean of one servo's readings; on the circle when they wrap."""
    samples = np.asarray(samples, dtype=np.float64)
    if not turn:
        return float(samples.mean())
    angle = samples * (2 * math.pi / turn)
    mean = math.atan2(float(np.sin(angle).mean()), float(np.cos(angle).mean()))
    tick = (mean * turn / (2 * math.pi)) % turn
    return 0.0 if tick >= turn else tick     # a hair below 0 wraps to turn itself in floating point


def _span(zero: float, joint: ServoJoint) -> tuple[float, float]:
    ends = (zero + joint.direction * joint.min_rad * joint.ticks_per_rad,
            zero + joint.direction * joint.max_rad * joint.ticks_per_rad)
    return min(ends), max(ends)


def _fits(a: float, b: float, turn: int) -> bool:
    # not rounded (floating point's noise aside): a range ending at tick -0.1 reads 4095 a hair past
    # its end, across the wrap
    return a >= -1e-6 and b <= turn - 1 + 1e-6


def place(joint: ServoJoint, reference_tick: float, q_ref: float, turn: int | None, held: int | None,
          homing_limit: int | None, homing_sign: int, homing_wraps: bool = True) -> Placement:
    """The zero tick for `joint` read at `reference_tick` in the pose q_ref (rad), its servo
    turning `turn` ticks a turn, holding Homing Offset `held` (None: it has none); `homing_wraps`:
    whether the servo wraps its offset readings (see `ServoBus.homing_wraps`)."""
    zero = reference_tick - joint.direction * q_ref * joint.ticks_per_rad
    if not turn:
        return Placement(zero, 0, held, None)
    a, b = _span(zero, joint)
    if b - a > turn - 1:
        raise PlacementError(f"{joint.name}: its range, {math.degrees(joint.max_rad - joint.min_rad):.0f}°, is more "
                             "than its servo turns in position mode; narrow min_deg/max_deg in the board config")
    if not homing_wraps:
        return _off_the_encoders_wrap(joint, reference_tick, q_ref, turn, held or 0, homing_sign)
    inside = _inside(zero, joint, turn, 0, held)
    if inside is not None:
        return inside
    if held is None or homing_limit is None:
        raise PlacementError(f"{joint.name}: its range crosses the servo's encoder wrap (ticks {a:.0f} … {b:.0f}) "
                             "and the servo has no homing offset to move it: turn the horn on the servo's spline so that "
                             "the joint's middle reads near tick 2048, then calibrate again")
    shift = _homing_shift(a, b, turn, held, homing_limit, homing_sign)
    if shift is None:
        raise PlacementError(f"{joint.name}: its range crosses the servo's encoder wrap (ticks {a:.0f} … {b:.0f}), "
                             f"and no homing offset within the ±{homing_limit} the servo takes in position mode moves it "
                             "inside: turn the horn on the servo's spline so that the joint's middle reads near tick "
                             "2048, then calibrate again")
    offset = held + homing_sign * shift
    placed = _inside(zero + shift, joint, turn, shift, offset)
    if placed is None:   # a range of nearly a whole turn, rounded past its ends
        raise PlacementError(f"{joint.name}: its range fills its servo's whole turn; narrow min_deg/max_deg by a "
                             "degree in the board config")
    return placed


def _off_the_encoders_wrap(joint: ServoJoint, reference_tick: float, q_ref: float, turn: int, held: int,
                           sign: int) -> Placement:
    """A servo that reads its encoder plus its offset (Dynamixel): the range must lie inside one
    turn of the encoder itself, which no offset changes; the readings are then brought to the
    encoder's own (offset 0) unless the offset held already keeps them inside 0 … turn − 1."""
    encoder = (reference_tick - sign * held) % turn        # where the encoder itself stands (0 … turn)
    zero = encoder - joint.direction * q_ref * joint.ticks_per_rad
    a, b = _span(zero, joint)
    if not _fits(a, b, turn):
        raise PlacementError(f"{joint.name}: its range crosses its servo's encoder wrap (encoder ticks {a % turn:.0f} "
                             f"… {b % turn:.0f} through {turn - 1} → 0), which a Homing Offset cannot move on this servo "
                             "(it reads encoder + offset): turn the horn on the servo's spline so that the joint's "
                             "middle reads near tick 2048, then calibrate again")
    if held and _fits(a + sign * held, b + sign * held, turn):
        return Placement(zero + sign * held, 0, held, (round(a + sign * held), round(b + sign * held)))
    shift = -sign * held                                   # readings back to the encoder's own
    return Placement(zero, shift, 0, (round(a), round(b)))


def _homing_shift(a: float, b: float, turn: int, held: int, limit: int, sign: int) -> int | None:
    """The shift of the readings (ticks) that brings [a, b] inside 0 … turn − 1 with the homing
    offset it takes (held + sign · shift) within ±limit: the one nearest to centring the range."""
    own = sorted(((-limit - held) * sign, (limit - held) * sign))   # shifts the register allows
    best = None
    for k in (-1, 0, 1):
        lo = max(math.ceil(-a) + k * turn, own[0])
        hi = min(math.floor(turn - 1 - b) + k * turn, own[1])
        if lo > hi:
            continue
        target = turn / 2 - (a + b) / 2 + k * turn
        shift = min(max(round(target), lo), hi)
        if best is None or abs(shift - target) < best[0]:
            best = (abs(shift - target), shift)
    return None if best is None else best[1]


def _inside(zero: float, joint: ServoJoint, turn: int, shift: int, offset: int | None) -> Placement | None:
    """The placement with the range inside 0 … turn − 1, reading the same positions a turn down or
    up where that puts it there; None when it crosses the wrap whichever turn it is read in."""
    a, b = _span(zero, joint)
    for k in (0, -1, 1):
        if _fits(a + k * turn, b + k * turn, turn):
            return Placement(zero + k * turn, shift, offset, (round(a + k * turn), round(b + k * turn)))
    return None
