"""`JointMap`, the one conversion between the board's frame and the joint frame (both directions,
positions and velocities), for any offsets and direction signs."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from firmware_protocol.joint_map import JointMap

angles = arrays(np.float64, 17, elements=st.floats(-4.0, 4.0))
signs = arrays(np.float64, 17, elements=st.sampled_from([1.0, -1.0]))


@settings(max_examples=100, deadline=None)
@given(q=angles, offset=angles, sign=signs, v=angles)
def test_the_conversions_invert_each_other(q, offset, sign, v):
    jm = JointMap(offset, sign)
    np.testing.assert_allclose(jm.to_joint(jm.reading(q)), q, atol=1e-12)  # a reading, back to its angle
    np.testing.assert_allclose(jm.to_board(q) - offset, q, atol=1e-12)  # a command drives the joint to q
    np.testing.assert_allclose(jm.velocity_to_joint(jm.velocity_to_joint(v)), v, atol=0)
    np.testing.assert_array_equal(np.sign(jm.velocity_to_joint(np.ones(17))), sign)


def test_identity_changes_nothing():
    jm = JointMap.identity(6)
    q = np.linspace(-1, 1, 6)
    for f in (jm.to_joint, jm.to_board, jm.reading, jm.velocity_to_joint):
        np.testing.assert_array_equal(f(q), q)
