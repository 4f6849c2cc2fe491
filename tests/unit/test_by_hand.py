"""Calibration by hand on a servo bus (calibration.by_hand) and the emulator's hand that stands in
for the user in a dry run."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from calibration import by_hand
from firmware_protocol.buses.emulator import Hand, SimServo, parse_hands
from hil import board_config, robots
from hil.errors import InputError

MODEL = robots.load("humanoid17")
BUS = board_config.shipped(MODEL, "dynamixel2")
KNEE = MODEL.joint_index("l_knee")


def test_readings_are_followed_across_the_encoders_wrap():
    turn = by_hand.turn_rad(BUS)
    assert np.allclose(turn, 2 * math.pi)   # 4096 ticks a turn, 4096/2π ticks a radian
    start = np.zeros(MODEL.n)
    start[KNEE] = math.pi - 0.01                # next to the wrap, read through the config
    track = by_hand.Unwrapped(start, turn)
    for step in np.linspace(0, 0.3, 31):        # on past it: the raw reading jumps to −π
        raw = start.copy()
        raw[KNEE] = (math.pi - 0.01 + step + math.pi) % (2 * math.pi) - math.pi
        track.add(raw)
    assert track.hi[KNEE] == pytest.approx(math.pi - 0.01 + 0.3)
    assert track.lo[KNEE] == pytest.approx(math.pi - 0.01)


def _ranges(**swept_deg):
    lo, hi = np.zeros(MODEL.n), np.zeros(MODEL.n)    # not moved
    for name, (a, b) in swept_deg.items():
        i = MODEL.joint_index(name)
        lo[i], hi[i] = math.radians(a), math.radians(b)
    return by_hand.ranges(BUS, MODEL, lo, hi)


def test_a_sweep_narrows_a_joint_and_one_near_the_robots_ends_keeps_them():
    lower, upper = np.degrees(MODEL.lower[KNEE]), np.degrees(MODEL.upper[KNEE])
    result = {r.name: r for r in _ranges(l_knee=(-10, 90), r_knee=(lower + 1, upper - 1), l_elbow=(-40, 200))}
    assert np.allclose(np.degrees(result["l_knee"].limits), (-10, 90))
    assert result["r_knee"].limits == (MODEL.lower[KNEE], MODEL.upper[KNEE])
    assert "went past" in result["l_elbow"].note
    assert result["head_yaw"].note.startswith("not swept")
    config = by_hand.ranged_config(BUS, list(result.values()))
    assert config.joints[KNEE].min_rad == pytest.approx(math.radians(-10)) and not config.shipped
    assert config.joints[MODEL.joint_index("head_yaw")] == BUS.joints[MODEL.joint_index("head_yaw")]


@pytest.mark.parametrize("swept,says", [
    ({}, "no joint moved more than 5°"),
    ({"l_knee": (-200, 200)}, "l_knee swept 400°, more than its servo's turn"),
    ({"l_knee": (140, 170)}, "l_knee swept [+140.0, +170.0]°, outside the robot's"),
])
def test_a_recording_that_cannot_be_used_is_refused(swept, says):
    with pytest.raises(InputError, match=re.escape(says)):
        _ranges(**swept)


def test_directions_turn_only_where_the_reading_went_down():
    moved = np.full(MODEL.n, math.radians(20.0))
    moved[KNEE] = -math.radians(20.0)
    moved[MODEL.joint_index("head_yaw")] = math.radians(1.0)    # not far enough: undecided
    result = by_hand.directions(BUS, moved, math.radians(5.0))
    config = by_hand.directed_config(BUS, result)
    turned = [j.name for j, c in zip(BUS.joints, config.joints) if j.direction != c.direction]
    assert turned == ["l_knee"]
    assert config.joints[KNEE].zero_tick == BUS.joints[KNEE].zero_tick


def test_the_loop_checks_against_the_configs_narrower_limits_on_a_copy():
    config = by_hand.ranged_config(BUS, _ranges(l_knee=(-10, 90)))
    narrowed = board_config.within_config(MODEL, config)
    assert narrowed is not MODEL and np.degrees(narrowed.upper[KNEE]) == pytest.approx(90)
    assert np.degrees(MODEL.upper[KNEE]) > 120      # the loaded robot is unchanged
    assert board_config.within_config(MODEL, None) is MODEL


def test_the_emulators_hand_moves_a_servo_only_with_its_torque_off():
    s = SimServo(1, 1020, 4000.0, 4000.0, 4000.0)
    hand = Hand(1, 3900.0, 4300.0, 1.0, 3.0, repeat=True)
    hand.move(s, 0.0)
    assert s.position == 4000.0          # the host has not spoken to it yet
    s.heard()
    hand.move(s, 10.0)                   # heard at 10 s: moves from 11 s
    seen = []
    for t in np.arange(11.0, 15.0, 0.01):
        hand.move(s, t)
        seen.append(s.position)
    assert min(seen) == pytest.approx(3900.0, abs=2) and max(seen) == pytest.approx(4300.0, abs=2)
    s.torque, before = True, s.position
    hand.move(s, 15.5)
    assert s.position == before


def test_the_emulators_hand_rests_at_each_end_as_a_hand_pushing_a_joint_to_its_stop_does():
    """A range is recorded from readings a few times a second on a busy machine: the hand rests at
    A and at B (REST_SHARE of the way's time each), so a reader every 0.1 s sees both ends exactly,
    and it still moves at one speed between them."""
    s = SimServo(1, 1020, 2000.0, 2000.0, 2000.0)
    s.heard()
    hand = Hand(1, 1000.0, 3000.0, 0.0, 6.0, repeat=True)
    hand.move(s, 0.0)
    seen = []
    for t in np.arange(0.0, 12.0, 0.1) + 0.037:   # a reader out of step with the hand
        hand.move(s, t)
        seen.append(s.position)
    assert min(seen) == 1000.0 and max(seen) == 3000.0, (min(seen), max(seen))
    at_ends = sum(p in (1000.0, 3000.0) for p in seen) / len(seen)
    assert 2 * Hand.REST_SHARE / (1 + 2 * Hand.REST_SHARE) * 0.6 < at_ends < 0.2, at_ends
    steps = np.abs(np.diff([p for p in seen if p not in (1000.0, 3000.0)]))
    # the way (4000 ticks) in the cycle less the rests: 4000 (1 + 2 REST_SHARE) / 6 ticks a second
    assert np.median(steps) == pytest.approx(4000.0 * (1 + 2 * Hand.REST_SHARE) / 6.0 * 0.1, rel=0.05)
    still = SimServo(2, 1020, 1000.0, 1000.0, 1000.0)   # a hand that starts at A: no step of zero length divides
    still.heard()
    at_a = Hand(2, 1000.0, 3000.0, 0.0, 6.0, repeat=True)
    for t in (0.0, 0.0, 1.0):
        at_a.move(still, t)
        assert np.isfinite(still.position)


@pytest.mark.parametrize("spec", ["1:2:3", "x:1:2@0-1", "1:2:3@2-1", "1:2:3@0-1e9"])
def test_a_bad_hand_is_one_line(spec):
    with pytest.raises(SystemExit, match="--hand"):
        parse_hands([spec])
