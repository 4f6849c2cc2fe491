"""Closed linkages and transmissions in an MJCF: a knee turned by a rod from its servo's plate
(ToddlerBot's), closed by a `<weld>`, and a gear train whose servo is on the gear. hil plans the
joint the servo turns (the knee, the gear train's output); the servo's own joint and the rods
follow it, found by closing the linkage with MuJoCo's own constraint errors. Checked against
MuJoCo: the closure holds where hil puts the followers, the frames are where MuJoCo puts them,
and physics from the file's own actuators drives the planned joint through the transmission."""

from __future__ import annotations

import numpy as np
import pytest

import hil.robots as robots
from hil.robots import servos

mujoco = pytest.importorskip("mujoco")
pytestmark = pytest.mark.usefixtures("own_robot_cache")

# a leg hanging from the world: hip, a knee turned by a rod from a servo plate on the thigh, an
# ankle below it. ARM_A and ARM_B are the crank arms at the plate and at the calf: equal, a
# parallelogram (the knee turns as the plate does); unequal, a four-bar whose knee does not turn
# in proportion
_LEG = """<mujoco model="rod_knee">
  <compiler angle="radian"/>
  <default><joint damping="0.5" armature="0.001"/></default>
  <worldbody>
    <body name="thigh" pos="0 0 1">
      <joint name="hip_pitch" axis="0 1 0" range="-1 1"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.25" size="0.02" mass="0.5"/>
      <body name="plate" pos="0.03 0 -0.05">
        <joint name="knee_act" axis="0 1 0" range="-1.2 0"/>
        <geom type="box" size="0.025 0.01 0.01" pos="0.01 0 0" mass="0.05"/>
        <body name="rod" pos="ARM_A 0 0">
          <joint name="rod_rev" axis="0 1 0"/>
          <geom type="capsule" fromto="0 0.02 0 0 0.02 -0.2" size="0.004" mass="0.01"/>
        </body>
      </body>
      <body name="calf" pos="0.03 0 -0.25">
        <joint name="knee" axis="0 1 0" range="-1.2 0"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.2" size="0.02" mass="0.3"/>
        <body name="bearing" pos="ARM_B 0 0">
          <joint name="bearing_rev" axis="0 1 0"/>
          <geom type="sphere" size="0.005" mass="0.005"/>
        </body>
        <body name="foot" pos="0 0 -0.2">
          <joint name="ankle" axis="0 1 0" range="-1 1"/>
          <geom type="box" size="0.05 0.03 0.01" pos="0.02 0 -0.01" mass="0.1"/>
          <site name="sole" pos="0.02 0 -0.02"/>
        </body>
      </body>
    </body>
  </worldbody>
  <equality>
    <weld body1="rod" body2="bearing" solref="0.004 1" solimp="0.9999 0.9999 0.001 0.5 2"/>
  </equality>
  <actuator>
    <position name="hip" joint="hip_pitch" kp="40"/>
    <position name="knee_servo" joint="knee_act" kp="40"/>
    <position name="ankle" joint="ankle" kp="40"/>
  </actuator>
</mujoco>"""

# a yaw arm turned through a gear train: the servo's gear is a leaf beside the arm, and the arm
# (with a wrist below it) turns at −0.5 × the gear
_GEARED = """<mujoco model="geared_arm">
  <compiler angle="radian"/>
  <default><joint damping="0.05" armature="0.0005"/></default>
  <worldbody>
    <body name="base" pos="0 0 0.5">
      <body name="gear" pos="0.03 0 0">
        <joint name="yaw_servo" axis="0 0 1" range="-2 2"/>
        <geom type="cylinder" size="0.01 0.005" mass="0.01" contype="0" conaffinity="0"/>
      </body>
      <body name="arm">
        <joint name="yaw_out" axis="0 0 1" range="-1.5 1.5"/>
        <geom type="box" size="0.1 0.01 0.01" pos="0.1 0 0" mass="0.2"/>
        <body name="tip" pos="0.2 0 0">
          <joint name="wrist" axis="0 1 0" range="-1 1"/>
          <geom type="sphere" size="0.01" mass="0.05"/>
        </body>
      </body>
    </body>
  </worldbody>
  <equality>
    <joint joint1="yaw_out" joint2="yaw_servo" polycoef="0 -0.5 0 0 0" solref="0.004 1" solimp="0.9999 0.9999 0.001 0.5 2"/>
  </equality>
  <actuator>
    <position joint="yaw_servo" kp="2" forcerange="-1 1"/>
    <position joint="wrist" kp="5"/>
  </actuator>
</mujoco>"""


def _leg(tmp_path, arm_b: float = 0.02):
    path = tmp_path / f"leg_{arm_b}.xml"
    path.write_text(_LEG.replace("ARM_A", "0.02").replace("ARM_B", f"{arm_b:g}"))
    return str(path)


def _mujoco_qpos(mm, model, q):
    qpos = mm.qpos0.copy()
    for i, name in enumerate(model.joint_names):
        qpos[mm.jnt_qposadr[mm.joint(name).id]] = q[i]
    for f, angle in zip(model.followers, model.follower_angles(q)):
        qpos[mm.jnt_qposadr[mm.joint(f.name).id]] = angle
    return qpos


def test_a_rod_driven_knee_is_planned_and_its_servo_and_rods_follow(tmp_path):
    path = _leg(tmp_path)
    m = robots.load(path)
    assert m.joint_names == ("hip_pitch", "knee", "ankle")
    follows = {f.name: (m.joint_names[f.leader], f.multiplier, f.offset) for f in m.followers}
    assert set(follows) == {"knee_act", "rod_rev", "bearing_rev"}
    # a parallelogram: the plate turns as the knee, the rod and its bearing keep the thigh's heading
    assert follows["knee_act"] == pytest.approx(("knee", 1.0, 0.0), abs=1e-6)
    assert follows["rod_rev"][1] == pytest.approx(-1.0, abs=1e-6)
    assert "unactuated_joints" not in m.meta and m.meta["transmission_inputs"] == {"knee_act": "knee"}
    mm = mujoco.MjModel.from_xml_path(path)
    mm.opt.jacobian = mujoco.mjtJacobian.mjJAC_DENSE
    d = mujoco.MjData(mm)
    rng = np.random.default_rng(3)
    for _ in range(5):
        q = rng.uniform(m.lower, m.upper)
        d.qpos[:] = _mujoco_qpos(mm, m, q)
        mujoco.mj_fwdPosition(mm, d)
        closure = d.efc_pos[:d.nefc][d.efc_type[:d.nefc] == mujoco.mjtConstraint.mjCNSTR_EQUALITY]
        assert len(closure) == 6 and np.max(np.abs(closure)) < 1e-9   # MuJoCo finds the rod where hil put it
        assert np.allclose(m.fk_frame(q, "sole")[:3, 3], d.site_xpos[mm.site("sole").id], atol=1e-9)
        for body in ("bearing", "rod", "plate"):
            assert np.allclose(m.fk_frame(q, body)[:3, 3], d.xpos[mm.body(body).id], atol=1e-9), body


def test_a_four_bar_whose_knee_does_not_turn_in_proportion_is_no_follower(tmp_path):
    """Crank arms of 20 and 35 mm: the knee turns 1.7 times as far as the plate near straight,
    less further down: no linear coupling says it, so nothing follows at a wrong angle — the
    joints are the file's passive ones, as before, and `hil robots` says so."""
    m = robots.load(_leg(tmp_path, 0.035))
    assert not m.followers
    assert {"knee", "rod_rev", "bearing_rev"} <= set(m.meta["unactuated_joints"])


def test_the_servo_of_a_transmission_is_said_at_the_joint_it_turns(tmp_path):
    path = tmp_path / "geared.xml"
    path.write_text(_GEARED)
    m = robots.load(str(path))
    assert m.joint_names == ("yaw_out", "wrist")
    (gear,) = m.followers
    assert (gear.name, gear.multiplier) == ("yaw_servo", pytest.approx(-2.0))
    # the gear's ±2 rad bound the arm to ±1 rad
    assert (m.lower[0], m.upper[0]) == pytest.approx((-1.0, 1.0))
    table = servos.servo_table(m)
    out = table.joint(0)
    assert out.kp_nm_per_rad == pytest.approx(2.0 * 4)       # kp · ratio²
    assert out.torque_limit_nm == pytest.approx(1.0 * 2)     # torque · ratio
    assert out.armature_kgm2 == pytest.approx(0.0005 * 4)


def test_physics_from_the_files_own_actuators_drives_the_planned_joint_through_the_transmission(tmp_path):
    from hil.physics.build import build
    from hil.physics.physics_plant import PhysicsPlant

    cases = ((_leg(tmp_path), np.array([0.3, -0.6, 0.2]), "knee_act"),)
    geared = tmp_path / "geared.xml"
    geared.write_text(_GEARED)
    cases += ((str(geared), np.array([0.4, 0.3]), "yaw_servo"),)
    for path, target, servo_joint in cases:
        m = robots.load(path)
        pm = build(m)
        assert pm.source.startswith("its own MJCF file")
        plant = PhysicsPlant(pm)
        on = np.ones(m.n, dtype=bool)
        plant.advance(0.0)
        plant.drive(target, on)
        for k in range(1, 301):
            plant.advance(0.01 * k)
        assert np.allclose(plant.q, target, atol=0.01), (path, plant.q)
        f = next(f for f in m.followers if f.name == servo_joint)
        mm = pm.model
        at = plant.d.qpos[mm.jnt_qposadr[mm.joint(servo_joint).id]]
        assert at == pytest.approx(f.multiplier * target[f.leader] + f.offset, abs=0.02)


# ToddlerBot's waist as a differential: two servos' bevel gears ride on the roll link; fixed
# tendons held (near) constant say yaw = 0.208 (gear1 + gear2) and roll = 0.292 (gear2 − gear1).
# The leg hangs from the roll link, so hil plans yaw and roll; each gear follows both. A gear's
# mass sits off its axis (its turning moves the centre of mass) and a site marks a tooth.
_DIFFERENTIAL = """<mujoco model="diff_waist">
  <compiler angle="radian"/>
  <default><joint damping="0.2" armature="0.001"/><geom contype="0" conaffinity="0"/></default>
  <worldbody>
    <body name="torso" pos="0 0 1">
      <geom type="box" size="0.05 0.05 0.05" mass="1"/>
      <body name="waist_gears" pos="0 0 -0.06">
        <joint name="yaw" axis="0 0 1" range="-1.5 1.5"/>
        <geom type="box" size="0.02 0.02 0.01" mass="0.1"/>
        <body name="waist_link" pos="0 0 -0.02">
          <joint name="roll" axis="1 0 0" range="-0.5 0.5"/>
          <geom type="box" size="0.04 0.03 0.02" pos="0.01 0.005 -0.01" mass="0.3"/>
          <body name="gear1" pos="0.01 0.02 0" euler="0 1.5708 0">
            <joint name="act1" axis="0 0 1" range="-5 5"/>
            <geom type="cylinder" size="0.01 0.004" pos="0.006 0 0" mass="0.05"/>
            <site name="tooth" pos="0.01 0.002 0"/>
          </body>
          <body name="gear2" pos="0.01 -0.02 0" euler="0 1.5708 0">
            <joint name="act2" axis="0 0 1" range="-5 5"/>
            <geom type="cylinder" size="0.01 0.004" pos="0.006 0 0" mass="0.05"/>
          </body>
          <body name="leg" pos="0 0 -0.05">
            <joint name="hip" axis="0 1 0" range="-1 1"/>
            <geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.02" mass="0.5"/>
            <site name="foot" pos="0 0 -0.3"/>
          </body>
        </body>
      </body>
    </body>
  </worldbody>
  TENDONS
  <actuator>
    <position joint="act1" kp="20"/><position joint="act2" kp="20"/><position joint="hip" kp="100"/>
  </actuator>
</mujoco>"""
_TENDONS = """<tendon>
    <fixed name="roll_coupling" limited="true" range="-0.03 0.03">
      <joint joint="act1" coef="0.291667"/><joint joint="act2" coef="-0.291667"/><joint joint="roll" coef="1"/>
    </fixed>
    <fixed name="yaw_coupling" limited="true" range="-0.001 0.001">
      <joint joint="act1" coef="-0.208333"/><joint joint="act2" coef="-0.208333"/><joint joint="yaw" coef="1"/>
    </fixed>
  </tendon>"""


def _differential(tmp_path):
    """The waist with its tendons, and the same robot without them (every joint driven)."""
    folded, every = tmp_path / "diff.xml", tmp_path / "every.xml"
    folded.write_text(_DIFFERENTIAL.replace("TENDONS", _TENDONS))
    every.write_text(_DIFFERENTIAL.replace("TENDONS", ""))
    return robots.load(str(folded)), robots.load(str(every)), str(folded)


def _spread_differential(m, every, q):
    """`every`'s joints where the mechanism holds them at the driven joints' q; and d(them)/dq."""
    full = np.zeros(every.n)
    M = np.zeros((every.n, m.n))
    for i, name in enumerate(m.joint_names):
        full[every.joint_index(name)] = q[i]
        M[every.joint_index(name), i] = 1.0
    for f in m.followers:
        k = every.joint_index(f.name)
        full[k] = f.angle(np.asarray(q))
        for lead, c in f.leaders():
            M[k, lead] = c
    return full, M


def test_a_differentials_gears_follow_both_outputs(tmp_path):
    m, every, path = _differential(tmp_path)
    assert m.joint_names == ("yaw", "roll", "hip") and "unactuated_joints" not in m.meta
    gears = {f.name: f for f in m.followers}
    assert set(gears) == {"act1", "act2"} and {k: sorted(v) for k, v in m.meta["differential_inputs"].items()} == {"act1": ["roll", "yaw"],
                                                                                 "act2": ["roll", "yaw"]}
    # the tendons solved: gear = 2.4 · yaw ∓ 1.714 · roll
    for name, sign in (("act1", -1.0), ("act2", 1.0)):
        coef = dict((m.joint_names[k], c) for k, c in gears[name].leaders())
        assert coef == pytest.approx({"yaw": 1 / (2 * 0.208333), "roll": sign / (2 * 0.291667)}, rel=1e-6)
    mm = mujoco.MjModel.from_xml_path(path)
    d = mujoco.MjData(mm)
    rng = np.random.default_rng(11)
    for _ in range(5):
        q = rng.uniform(m.lower, m.upper)
        full, M = _spread_differential(m, every, q)
        d.qpos[:] = _mujoco_qpos(mm, m, q)
        mujoco.mj_fwdPosition(mm, d)
        assert np.allclose(d.ten_length, 0.0, atol=1e-6)   # MuJoCo's tendons where the file holds them
        at = d.site_xpos[mm.site("tooth").id] - d.xpos[mm.body("torso").id]   # (hil's base: the torso)
        assert np.allclose(m.fk_frame(q, "tooth")[:3, 3], at, atol=1e-9)
        assert np.allclose(m.com(q), every.com(full), atol=1e-12)
        for frame in ("tooth", "foot"):
            assert np.allclose(m.jacobian(q, frame), every.jacobian(full, frame) @ M, atol=1e-12), frame
        assert np.allclose(m.com_jacobian(q), every.com_jacobian(full) @ M, atol=1e-12)


def test_a_differentials_two_servos_are_felt_together_at_each_output(tmp_path):
    """Each gear's servo (kp 20 N·m/rad at the gear) turns both outputs: an output feels the sum of
    kp · ratio² over the two gears (the ratios of the tendons solved: ±1.714 for roll, 2.4 for yaw)."""
    m, _, _ = _differential(tmp_path)
    table = servos.servo_table(m)
    for name, ratio in (("yaw", 1 / (2 * 0.208333)), ("roll", 1 / (2 * 0.291667))):
        out = table.joint(m.joint_index(name))
        assert out.kp_nm_per_rad == pytest.approx(2 * 20 * ratio ** 2, rel=1e-6), name
        assert out.armature_kgm2 == pytest.approx(2 * 0.001 * ratio ** 2, rel=1e-6), name
    assert table.joint(m.joint_index("hip")).kp_nm_per_rad == pytest.approx(100)


def test_a_differentials_torques_are_its_outputs_to_give(tmp_path):
    """Virtual work, as for one leader: τ_driven = Mᵀ τ_all for the same motion."""
    from hil.dynamics import inverse_dynamics

    m, every, _ = _differential(tmp_path)
    rng = np.random.default_rng(12)
    for _ in range(5):
        q, qd, qdd = rng.uniform(m.lower, m.upper), rng.normal(size=m.n), rng.normal(size=m.n)
        full, M = _spread_differential(m, every, q)
        want = M.T @ inverse_dynamics(every, full, M @ qd, M @ qdd)
        assert np.allclose(inverse_dynamics(m, q, qd, qdd), want, atol=1e-10)


def _driven_for_3_s(pm, target: np.ndarray):
    """A plant of `pm` driven to `target`, every joint's torque on, for three seconds."""
    from hil.physics.physics_plant import PhysicsPlant

    plant = PhysicsPlant(pm)
    plant.advance(0.0)
    plant.drive(target, np.ones(len(target), dtype=bool))
    for k in range(1, 301):
        plant.advance(0.01 * k)
    return plant


def test_physics_turns_a_differentials_gears_with_its_outputs(tmp_path):
    """Built from hil's model (as for a robot from a URDF with hil's two-joint mimics): the gears'
    servos, as the outputs feel them, hold the outputs; a tendon per gear holds the gear where the
    outputs put it."""
    import copy

    from hil.physics.build import build
    from hil.physics.physics_plant import PhysicsPlant

    m, _, _ = _differential(tmp_path)
    m = copy.copy(m)
    m.meta = {k: v for k, v in m.meta.items() if k != "mjcf"}   # (no file of its own to simulate)
    pm = build(m, floor=False)   # (the waist hangs from its torso, fixed where hil's base is: no floor under it)
    assert pm.source == "built from hil's model"
    mm = pm.model
    start = np.array([-0.2, 0.25, 0.1])   # powered up there: each gear where both outputs put it
    placed = PhysicsPlant(build(m, floor=False), initial=start)   # (a plant sets its model's servo gains)
    for f in m.followers:
        assert placed.d.qpos[mm.jnt_qposadr[mm.joint(f.name).id]] == pytest.approx(f.angle(start), abs=1e-12)
    target = np.array([0.4, -0.3, 0.2])
    plant = _driven_for_3_s(pm, target)
    assert np.allclose(plant.q, target, atol=0.01)
    for f in m.followers:
        assert plant.d.qpos[mm.jnt_qposadr[mm.joint(f.name).id]] == pytest.approx(f.angle(plant.q), abs=1e-3)


def test_physics_from_its_own_file_drives_a_differentials_gears_with_both_outputs(tmp_path):
    """From the file itself (its tendons, its position actuators on the gears): each gear's
    actuator is told its own angle from both outputs, as a bus's servo is, and the outputs' torques
    are the gears' through their ratios (Mᵀ f). The file's tendons hold roll within 0.03 rad of what
    the gears say (its backlash), yaw within 0.001."""
    from hil.physics.build import build

    m, _, _ = _differential(tmp_path)
    pm = build(m, floor=False)
    mm = pm.model
    assert pm.source.startswith("its own MJCF file") and pm.ctrl_mix is not None
    assert [mm.joint(int(mm.actuator_trnid[a, 0])).name for a in pm.ctrl_of_joint] == ["act1", "act2", "hip"]
    target = np.array([0.4, -0.3, 0.2])
    plant = _driven_for_3_s(pm, target)
    gears = {f.name: f for f in m.followers}
    for name in ("act1", "act2"):   # each gear where both outputs' targets put it
        assert plant.d.qpos[mm.jnt_qposadr[mm.joint(name).id]] == pytest.approx(gears[name].angle(target), abs=0.02)
    assert abs(plant.q[0] - target[0]) < 0.01 and abs(plant.q[1] - target[1]) < 0.035 and abs(plant.q[2] - 0.2) < 0.01
    force = plant.d.actuator_force[pm.ctrl_of_joint]
    assert plant.effort == pytest.approx([2.400004 * (force[0] + force[1]), 1.714284 * (force[1] - force[0]), force[2]],
                                         rel=1e-5, abs=1e-9)
