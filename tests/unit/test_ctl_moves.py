"""`hil ctl jog JOINT DEG …`: the joint target its pairs give, or one line saying what is wrong."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hil import robots
from hil.cli.ctl_moves import joint_target
from hil.errors import InputError

PUMA = robots.load("puma560")


def test_pairs_move_the_joints_by_or_to_their_angles():
    base = PUMA.home.copy()
    by = joint_target(PUMA, base, ["waist", "5", "elbow", "-10"], absolute=False)
    assert np.degrees(by - base)[[0, 2]] == pytest.approx([5, -10]) and np.count_nonzero(by - base) == 2
    to = joint_target(PUMA, base, ["waist", "5"], absolute=True)
    assert to[0] == pytest.approx(math.radians(5)) and np.array_equal(to[1:], base[1:])


@pytest.mark.parametrize("pairs,said", [
    (["waist", "5", "waist", "6"], "waist is given twice"),
    (["waist"], "in pairs"),
    (["wasit", "5"], "no joint 'wasit'"),
    (["waist", "nan"], "finite angle"),
    (["waist", "x"], "give an angle in degrees"),
    (["waist", "1000"], "past its range"),
])
def test_a_bad_jog_is_one_line_and_moves_nothing(pairs, said):
    base = PUMA.home.copy()
    with pytest.raises(InputError, match=said):
        joint_target(PUMA, base, pairs, absolute=False)
    assert np.array_equal(base, PUMA.home)
