"""Inverse dynamics against Pinocchio on hil's own URDF export (same masses, centres of mass and
inertias), fixed base and free-flyer base; the motion torques of a walk and their contact split."""

from __future__ import annotations

import numpy as np
import pytest

import hil.robots
from hil.dynamics import base_motion, inverse_dynamics, rnea, rnea_batch
from hil.errors import InputError
from hil.robots.urdf_export import to_urdf

pin = pytest.importorskip("pinocchio")


def _pinocchio(model, tmp_path, free: bool):
    path = tmp_path / f"{model.name}.urdf"
    path.write_text(to_urdf(model))
    pm = pin.buildModelFromUrdf(str(path), pin.JointModelFreeFlyer()) if free else pin.buildModelFromUrdf(str(path))
    first = 2 if free else 1
    names = [pm.names[i] for i in range(first, pm.njoints)]
    return pm, pm.createData(), [names.index(j) for j in model.joint_names]


@pytest.mark.parametrize("robot", ["puma560", "humanoid17", "so101"])
def test_fixed_base_torques_equal_pinocchio_s_rnea(robot, tmp_path):
    model = hil.robots.load(robot)
    pm, data, idx = _pinocchio(model, tmp_path, free=False)
    rng = np.random.default_rng(7)
    for _ in range(40):
        q = rng.uniform(model.lower, model.upper)
        qd, qdd = rng.normal(size=model.n), 3 * rng.normal(size=model.n)
        qp, vp, ap = np.zeros(pm.nq), np.zeros(pm.nv), np.zeros(pm.nv)
        qp[idx], vp[idx], ap[idx] = q, qd, qdd
        expected = pin.rnea(pm, data, qp, vp, ap)[idx]
        assert np.abs(inverse_dynamics(model, q, qd, qdd) - expected).max() < 1e-9


def test_a_moving_base_equals_pinocchio_s_free_flyer(tmp_path):
    model = hil.robots.load("humanoid17")
    pm, data, idx = _pinocchio(model, tmp_path, free=True)
    rng = np.random.default_rng(3)
    for _ in range(20):
        q, qd, qdd = rng.uniform(model.lower, model.upper), rng.normal(size=model.n), rng.normal(size=model.n)
        v, w, a, alpha = (rng.normal(size=3) for _ in range(4))
        qp = np.zeros(pm.nq)
        qp[6] = 1.0
        qp[7:][idx] = q
        vp, ap = np.zeros(pm.nv), np.zeros(pm.nv)
        vp[:3], vp[3:6], vp[6:][idx] = v, w, qd
        ap[:3], ap[3:6], ap[6:][idx] = a, alpha, qdd
        expected = pin.rnea(pm, data, qp, vp, ap)
        # Pinocchio's base acceleration is spatial: the origin's classical one adds ω × v
        tau, wrench = rnea(model, q, qd, qdd, base_motion(w, alpha, a + np.cross(w, v), [0, 0, -9.81]))
        assert np.abs(tau - expected[6:][idx]).max() < 1e-9
        assert np.abs(wrench - expected[:6]).max() < 1e-9


def test_the_batch_equals_one_call_at_a_time_and_bad_input_is_named():
    model = hil.robots.load("puma560")
    rng = np.random.default_rng(1)
    Q, QD, QDD = (rng.normal(size=(5, 6)) for _ in range(3))
    tau, _ = rnea_batch(model, Q, QD, QDD)
    for k in range(5):
        assert np.allclose(tau[k], inverse_dynamics(model, Q[k], QD[k], QDD[k]), atol=1e-12)
    with pytest.raises(InputError, match="elbow"):
        inverse_dynamics(model, [0, 0, np.nan, 0, 0, 0], np.zeros(6), np.zeros(6))
    with pytest.raises(InputError, match="6 values"):
        inverse_dynamics(model, np.zeros(5), np.zeros(6), np.zeros(6))


def test_a_robot_s_measured_inertias_are_the_model_s_and_the_export_s(tmp_path):
    """PUMA 560: Armstrong, Khatib & Burdick's link 2 (17.4 kg, about its COM Ixx 0.13, Iyy 0.524,
    Izz 0.539 kg·m²); the URDF written carries the same tensor."""
    puma = hil.robots.load("puma560")
    assert puma.masses[2] == pytest.approx(17.4)
    assert np.allclose(np.diag(puma.inertias[2]), [0.13, 0.524, 0.539])
    text = to_urdf(puma)
    assert 'ixx="0.13"' in text and 'iyy="0.524"' in text and 'izz="0.539"' in text
    h17 = hil.robots.load("humanoid17")
    assert all(np.linalg.eigvalsh(h17.inertias[i]).min() > 0 for i in range(h17.n + 1) if h17.masses[i] > 0)


@pytest.mark.parametrize("name, frame", [("humanoid17", "l_sole"), ("examples/robots/g1.toml", "r_sole"),
                                         ("puma560", None)])
def test_a_wrench_at_a_frame_takes_the_torques_its_jacobian_says_for_every_sample_at_once(name, frame):
    """`jacobian_transpose_times` (the feet's forces in a plan's torques) is Jᵀ w sample by sample,
    J the model's own geometric Jacobian of the frame."""
    from hil.motion.torques import jacobian_transpose_times

    m = hil.robots.load(name)
    frame = frame or m.tool_frame
    rng = np.random.default_rng(3)
    Q = rng.uniform(m.lower, m.upper, (40, m.n))
    w = rng.normal(size=(40, 6))
    expected = np.array([m.jacobian(q, frame).T @ wk for q, wk in zip(Q, w)])
    np.testing.assert_allclose(jacobian_transpose_times(m, Q, frame, w), expected, rtol=0, atol=1e-12)
