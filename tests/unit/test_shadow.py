"""The shadow twin's diagnosis of a residual's shape: each of offset, reversed, backlash and stall
from its own pattern, and nothing from a joint that does what its model does."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hil.runtime.shadow import BACKLASH, OFFSET, REVERSED, STALL, ShadowBlock, describe, diagnose

T = np.arange(0, 2.0, 0.005)
PRED = 0.4 * np.sin(2 * math.pi * 0.7 * T)             # a joint swinging ±23°


def _one(meas: np.ndarray) -> int:
    return int(diagnose(T, meas[:, None], PRED[:, None], PRED[:, None])[0])


def test_a_joint_that_does_what_its_model_does_is_not_flagged():
    noise = np.random.default_rng(1).normal(0, math.radians(0.2), len(T))
    assert _one(PRED + noise) == 0
    assert _one(PRED + math.radians(1.0)) == 0          # a soft servo's sag: within the model's reach


def test_a_steady_residual_is_an_offset():
    assert _one(PRED + math.radians(4.0)) == OFFSET


def test_moving_the_other_way_is_reversed():
    assert _one(-PRED) == REVERSED


def test_a_residual_that_flips_with_the_motion_is_backlash():
    v = np.gradient(PRED, T)
    assert _one(PRED - math.radians(3.0) * np.sign(v)) == BACKLASH


def test_a_joint_that_stops_while_its_model_moves_on_is_stalled():
    meas = PRED.copy()
    stop = len(T) // 4                                  # blocked a quarter of the way
    meas[stop:] = PRED[stop]
    t, pred, meas = T[:stop + 40], PRED[:stop + 40], meas[:stop + 40]
    assert int(diagnose(t, meas[:, None], pred[:, None], pred[:, None])[0]) == STALL


def test_a_joint_held_still_while_its_model_moves_on_is_not_stalled():
    """The run held the motion (another joint stalled): the command stops, the model in physics
    still moves (settling, a body swaying on its feet) and the joint stands where it is told."""
    stop = len(T) // 4
    cmd = PRED.copy()
    cmd[stop:] = PRED[stop]
    meas = cmd.copy()
    t, pred, meas, cmd = T[:stop + 80], PRED[:stop + 80], meas[:stop + 80], cmd[:stop + 80]
    assert int(diagnose(t, meas[:, None], pred[:, None], cmd[:, None])[0]) == 0
    # the same joint, commanded on as its model moves, is stalled
    assert int(diagnose(t, meas[:, None], pred[:, None], pred[:, None])[0]) == STALL


def test_describe_names_the_joint_and_the_size():
    lines = describe(["elbow"], np.array([math.radians(4.0)]), np.array([OFFSET]))
    assert lines == ["elbow: offset (measured − predicted +4.0°)"]


def test_the_block_is_read_whole(tmp_path):
    path = str(tmp_path / "x.shadow")
    w = ShadowBlock(path, 3, create=True)
    r = ShadowBlock(path, 3)
    assert r.read() is None                              # nothing written yet
    w.write(1.5, np.array([1.0, 2, 3]), np.array([0.1, 0.2, 0.3]), np.array([0, OFFSET, 0]))
    t, q, res, flags = r.read()
    assert t == 1.5 and q.tolist() == [1, 2, 3] and flags.tolist() == [0, OFFSET, 0]
    with pytest.raises(ValueError, match="not a shadow block for 4 joints"):
        ShadowBlock(path, 4)
