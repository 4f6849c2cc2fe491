"""The physics emulator's world record (hil.physics.world) and the twin's floor geometry
(twin.ground): what the twin draws of the body in physics."""

from __future__ import annotations

import numpy as np
import pytest

from hil.physics.world import MAX_CONTACTS, World, WorldBlock, centre_of_pressure


def test_the_centre_of_pressure_is_the_force_weighted_mean_of_the_contacts():
    c = np.array([[0.0, 0.0, 0.0, 30.0], [0.1, 0.0, 0.0, 10.0], [0.0, 0.2, 0.0, 0.0]])
    assert np.allclose(centre_of_pressure(c), [0.025, 0.0])
    assert centre_of_pressure(np.zeros((0, 4))) is None               # in the air
    assert centre_of_pressure(np.array([[0.1, 0.1, 0.0, 0.0]])) is None   # touching, pressing nothing


def test_a_record_comes_back_whole_and_its_contacts_are_bounded(tmp_path):
    base = np.eye(4)
    base[:3, 3] = 0.1, -0.2, 0.3
    base[:3, :3] = [[0, -1, 0], [1, 0, 0], [0, 0, 1]]
    contacts = np.arange(4.0 * (MAX_CONTACTS + 3)).reshape(-1, 4)
    path = str(tmp_path / "w.world")
    w, r = WorldBlock(path, create=True), WorldBlock(path)
    assert r.read() is None
    w.write(World(2.5, base, True, 93.0, np.array([0.01, -0.02]), contacts))
    got = r.read()
    assert got.t == 2.5 and got.fell and got.tilt_deg == 93.0
    assert np.array_equal(got.base, base) and np.allclose(got.cop, [0.01, -0.02])
    assert np.array_equal(got.contacts, contacts[:MAX_CONTACTS])
    w.write(World(3.0, base, False, 1.0, None, np.zeros((0, 4))))
    got = r.read()
    assert got.cop is None and got.contacts.shape == (0, 4) and not got.fell


def test_the_support_polygon_is_the_hull_of_the_contacts():
    from twin.ground import convex_hull

    pts = np.array([[0, 0], [1, 0], [1, 1], [0, 1], [0.5, 0.5], [0.2, 0.8], [1, 0]])
    hull = convex_hull(pts)
    assert sorted(map(tuple, hull.tolist())) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    area = 0.5 * sum(a[0] * b[1] - b[0] * a[1] for a, b in zip(hull, np.roll(hull, -1, axis=0)))
    assert area == 1.0   # counter-clockwise, nothing inside left on it


def test_the_planned_zmp_is_the_com_until_its_history_spans_a_few_frames_then_the_cart_table_one():
    import numpy as np

    from twin.ground import CartTableZmp

    zmp = CartTableZmp()
    com = np.array([0.0, 0.0, 0.3])
    # a screenshot's three quick frames, a millimetre of jitter apart: no acceleration made of it
    for k, t in enumerate((0.0, 0.002, 0.004)):
        got = zmp.add(t, com + [0.001 * (k % 2), 0.0, 0.0])
    assert np.allclose(got, (0.0, 0.0))
    # the CoM accelerating along x at 1 m/s²: the ZMP trails it by z/g·ẍ
    zmp = CartTableZmp()
    for t in np.arange(0.0, 0.25, 0.02):
        got = zmp.add(t, np.array([0.5 * t * t, 0.0, 0.3]))
    assert got[0] == pytest.approx(0.5 * 0.24 ** 2 - 0.3 / 9.81, abs=1e-6)
