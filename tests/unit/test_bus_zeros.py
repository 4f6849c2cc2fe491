"""Placing a joint's range inside one turn of its servo: as it stands, a turn down or up, or with a
homing offset the servo allows; readings averaged across the wrap; what cannot be placed is
refused naming the joint."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from calibration import bus_zeros
from firmware_protocol.buses.bus_board import ServoJoint

TPR = 4096 / (2 * math.pi)
TURN = 4096
KNEE = ServoJoint("l_knee", 3, TPR, 2048, 1, math.radians(-26), math.radians(130))


def _check(joint: ServoJoint, reference_tick: float, q_ref: float, p: bus_zeros.Placement, held: int, sign: int):
    """Every angle of the range, read after the change, lies inside the limits and maps back to itself."""
    assert p.homing_offset == held + sign * p.shift
    lo, hi = p.limits
    assert 0 <= lo < hi <= TURN - 1
    for q in np.linspace(joint.min_rad, joint.max_rad, 50):
        before = (reference_tick + joint.direction * (q - q_ref) * joint.ticks_per_rad) % TURN   # what it read
        after = (before + p.shift) % TURN                                                      # what it reads now
        assert lo - 0.5 <= after <= hi + 0.5
        assert joint.direction * (after - p.zero_tick) / joint.ticks_per_rad == pytest.approx(q, abs=1e-9)


def test_a_range_that_fits_is_left_as_it_stands():
    p = bus_zeros.place(KNEE, 2048 + 0.3 * TPR, 0.3, TURN, 0, 1024, 1)
    assert p.shift == 0 and p.zero_tick == pytest.approx(2048) and p.homing_offset == 0
    assert p.limits == (round(2048 - 0.4538 * TPR), round(2048 + 2.2689 * TPR))


def test_a_zero_past_the_encoder_is_read_a_turn_down():
    # a zero of 4156 (the reference reading 60 ticks past the wrap) is tick 60 of the turn
    joint = ServoJoint("wrist", 5, TPR, 2048, 1, math.radians(-5), math.radians(150))
    p = bus_zeros.place(joint, 60.0, 0.0, TURN, 0, 1024, 1)
    assert p.shift == 0 and p.zero_tick == pytest.approx(60)
    _check(joint, 60.0, 0.0, p, 0, 1)


@pytest.mark.parametrize("sign, limit", [(1, 1024), (-1, 2047)], ids=["dynamixel", "feetech"])
@pytest.mark.parametrize("reading", [4088.0, 8.0])
def test_a_knee_standing_at_the_wrap_gets_a_homing_offset(sign, limit, reading):
    p = bus_zeros.place(KNEE, reading, 0.0, TURN, 0, limit, sign)
    assert p.shift != 0 and abs(p.homing_offset) <= limit
    _check(KNEE, reading, 0.0, p, 0, sign)


@settings(max_examples=300, deadline=None)
@given(reading=st.floats(0, TURN - 1), q_ref=st.floats(-0.4, 2.2), held=st.integers(-500, 500),
       direction=st.sampled_from([1, -1]), sign=st.sampled_from([1, -1]))
@example(reading=1479.0, q_ref=0.0, held=0, direction=-1, sign=1)   # a range ending a tenth of a tick below 0
def test_any_knee_is_placed_or_refused_never_left_across_the_wrap(reading, q_ref, held, direction, sign):
    joint = ServoJoint("l_knee", 3, TPR, 2048, direction, math.radians(-26), math.radians(130))
    try:
        p = bus_zeros.place(joint, reading, q_ref, TURN, held, 1024, sign)
    except bus_zeros.PlacementError as e:
        assert "l_knee" in str(e) and "horn" in str(e)
        return
    _check(joint, reading, q_ref, p, held, sign)


def test_what_cannot_be_placed_is_refused_naming_the_joint():
    with pytest.raises(bus_zeros.PlacementError, match="l_knee: its range crosses .* no homing offset"):
        bus_zeros.place(KNEE, 4088.0, 0.0, TURN, None, None, 1)
    with pytest.raises(bus_zeros.PlacementError, match="l_knee: .* within the ±100 "):
        bus_zeros.place(KNEE, 4088.0, 0.0, TURN, 0, 100, 1)
    wide = ServoJoint("yaw", 1, TPR, 2048, 1, -3.2, 3.2)
    with pytest.raises(bus_zeros.PlacementError, match="yaw: its range, 367°, is more than its servo turns"):
        bus_zeros.place(wide, 2048.0, 0.0, TURN, 0, 1024, 1)


def test_a_servo_without_a_wrap_keeps_the_plain_zero():
    p = bus_zeros.place(KNEE, 5000.0, 0.5, None, None, None, 1)
    assert p.zero_tick == pytest.approx(5000 - 0.5 * TPR) and p.shift == 0 and p.limits is None


def test_readings_across_the_wrap_average_on_the_circle():
    m = bus_zeros.mean_ticks(np.array([4094.0, 4095.0, 1.0, 2.0]), TURN)   # tick 0, not 2048
    assert 0 <= m < TURN and min(m, TURN - m) < 1e-6
    assert bus_zeros.mean_ticks(np.array([4090.0, 4092.0]), TURN) == pytest.approx(4091.0)
    assert bus_zeros.mean_ticks(np.array([10.0, 20.0]), None) == 15.0
