"""`hil urdf`: the written file, read back by Pinocchio and by our own URDF loader, has every
frame where the model has it, the same joints, limits, masses and centres of mass."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from hil import robots
from hil.robots import urdf
from hil.robots.urdf_export import to_urdf
from tests.launch import HIL

pin = pytest.importorskip("pinocchio")
pytestmark = pytest.mark.usefixtures("own_robot_cache")


@pytest.mark.parametrize("name", ["puma560", "humanoid17"])
def test_the_file_has_every_frame_where_the_model_has_it(tmp_path, name):
    model = robots.load(name)
    path = tmp_path / f"{name}.urdf"
    path.write_text(to_urdf(model))
    pm = pin.buildModelFromUrdf(str(path), pin.JointModelFreeFlyer())   # the base's own mass counts too
    pd = pm.createData()
    back = urdf.build(str(path))
    assert back.joint_names == model.joint_names
    assert back.kind == model.kind   # a URDF has no floating joint: the humanoid is found by its two legs
    assert np.allclose(back.lower, model.lower) and np.allclose(back.velocity_limit, model.velocity_limit)
    ids = [pm.getFrameId(f) for f in model.frame_names]
    assert all(i < len(pm.frames) for i in ids)
    rows = [back.frame_index(f) for f in model.frame_names]
    rng = np.random.default_rng(9)
    worst = worst_back = com_err = 0.0
    for k in range(1000):
        q = rng.uniform(model.lower, model.upper)
        qp = pin.neutral(pm)
        for i, jn in enumerate(model.joint_names):
            qp[pm.joints[pm.getJointId(jn)].idx_q] = q[i]
        pin.framesForwardKinematics(pm, pd, qp)
        F = model.fk_frames(q)
        worst = max(worst, max(float(np.abs(F[f] - pd.oMf[i].homogeneous).max()) for f, i in enumerate(ids)))
        worst_back = max(worst_back, float(np.abs(back.fk_frames(q)[rows] - F).max()))
        if k < 100:
            com_err = max(com_err, float(np.abs(pin.centerOfMass(pm, pd, qp) - model.com(q)).max()))
    assert worst <= 1e-9 and worst_back <= 1e-9
    assert com_err <= 1e-9
    assert sum(i.mass for i in pm.inertias) == pytest.approx(model.total_mass)


def test_a_urdf_robot_goes_round_and_the_command_writes_it(tmp_path):
    try:
        model = robots.load("so101")
    except Exception as e:   # noqa: BLE001 - the package is a test extra
        pytest.skip(f"so101 needs example-robot-data ({e})")
    out = tmp_path / "so101.urdf"
    r = subprocess.run([*HIL, "urdf", "--robot", "so101", "--out", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    back = urdf.build(str(out))
    q = np.random.default_rng(1).uniform(model.lower, model.upper, size=(50, model.n))
    rows = [back.frame_index(f) for f in model.frame_names]
    for qq in q:
        assert np.abs(back.fk_frames(qq)[rows] - model.fk_frames(qq)).max() <= 1e-9
    r = subprocess.run([*HIL, "urdf", "--robot", "so101", "--out", "/no/such/dir/x.urdf"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "--out" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("name", ["puma560", "humanoid17", "so101", "so100", "koch"])
def test_every_export_loads_in_mujoco_and_pinocchio(tmp_path, name):
    """MuJoCo refuses a moving body without mass or inertia (the PUMA's first link has none in the
    paper's model): every link the file moves has both, and the robot's mass is unchanged."""
    mujoco = pytest.importorskip("mujoco")
    model = robots.load(name)
    text = to_urdf(model)
    m = mujoco.MjModel.from_xml_string(text)
    base = float(model.tables[1][0, 0])   # MuJoCo fuses the root link into its world body
    assert m.njnt == model.n and float(m.body_mass.sum()) == pytest.approx(model.total_mass - base, rel=1e-6)
    path = tmp_path / f"{name}.urdf"
    path.write_text(text)
    assert pin.buildModelFromUrdf(str(path)).nq == model.n
