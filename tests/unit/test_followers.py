"""Joints that follow a driven one (a URDF `<mimic>`): the model's q holds the driven joints only,
and the kinematics, the centre of mass, their Jacobians and the inverse dynamics are those of the
mechanism, checked against the same robot written with every joint driven and the followers set
by hand."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hil import board_config
from hil.dynamics import inverse_dynamics
from hil.kinematics.ik import Task, ik_lm
from hil.robots import urdf

# two driven joints, a finger that follows the elbow, a fingertip that follows the shoulder
# beyond the finger, and a wrist joint beyond a follower with a driven joint below it (held at 0)
_ARM = """<robot name="gripper_arm">
  <link name="base"><inertial><mass value="2"/><inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link>
  {links}
  <joint name="shoulder" type="revolute"><parent link="base"/><child link="upper"/><origin xyz="0 0 0.1"/>
    <axis xyz="0 1 0"/><limit lower="-1.5" upper="1.5" effort="5" velocity="3"/></joint>
  <joint name="elbow" type="revolute"><parent link="upper"/><child link="lower"/><origin xyz="0.02 0 0.3" rpy="0.1 0 0"/>
    <axis xyz="0 0.6 0.8"/><limit lower="-1.5" upper="1.5" effort="5" velocity="3"/></joint>
  <joint name="finger" type="revolute"><parent link="lower"/><child link="finger_link"/><origin xyz="0 0.03 0.25"/>
    <axis xyz="1 0 0"/><limit lower="-3" upper="3" effort="5" velocity="3"/>{mimic_finger}</joint>
  <joint name="tip" type="revolute"><parent link="finger_link"/><child link="tip_link"/><origin xyz="0 0 0.06"/>
    <axis xyz="0 0 1"/><limit lower="-3" upper="3" effort="5" velocity="3"/>{mimic_tip}</joint>
  <joint name="pad" type="fixed"><parent link="tip_link"/><child link="pad_link"/><origin xyz="0.01 0 0.03"/></joint>
</robot>"""
_LINKS = "".join(
    f'<link name="{name}"><inertial><origin xyz="{c}"/><mass value="{m}"/>'
    f'<inertia ixx="{i}" iyy="{i}" izz="{i}" ixy="0" ixz="0" iyz="0"/></inertial></link>'
    for name, m, c, i in (("upper", 1.5, "0.01 0 0.15", 0.02), ("lower", 1.0, "0 0.01 0.12", 0.01),
                          ("finger_link", 0.3, "0 0.01 0.03", 0.001), ("tip_link", 0.2, "0.01 0 0.02", 0.0005),
                          ("pad_link", 0.05, "0 0 0", 0.0001)))
FINGER = (-1.5, 0.1)    # finger = -1.5 · elbow + 0.1
TIP = (0.5, -0.2)       # tip = 0.5 · shoulder - 0.2


def _models(tmp_path):
    mimic = "<mimic joint='{}' multiplier='{}' offset='{}'/>"
    folded = tmp_path / "folded.urdf"
    folded.write_text(_ARM.format(links=_LINKS, mimic_finger=mimic.format("elbow", *FINGER),
                                  mimic_tip=mimic.format("shoulder", *TIP)))
    every = tmp_path / "every.urdf"
    every.write_text(_ARM.format(links=_LINKS, mimic_finger="", mimic_tip=""))
    return urdf.build(str(folded)), urdf.build(str(every))


def _spread(q):
    """The all-driven robot's joints (shoulder, elbow, finger, tip) where the mechanism holds them."""
    s, e = q
    return np.array([s, e, FINGER[0] * e + FINGER[1], TIP[0] * s + TIP[1]])


# d(all joints)/d(driven joints)
M = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, FINGER[0]], [TIP[0], 0.0]])


def test_followers_are_computed_from_their_leaders_never_coordinates(tmp_path):
    m, every = _models(tmp_path)
    assert m.joint_names == ("shoulder", "elbow") and m.n == 2 and m.n_links == 4
    assert [(f.name, m.joint_names[f.leader], f.multiplier, f.offset) for f in m.followers] == [
        ("finger", "elbow", *FINGER), ("tip", "shoulder", *TIP)]
    assert m.link_names == ("upper", "lower", "finger_link", "tip_link") and not m.meta["locked_joints"]
    assert m.total_mass == pytest.approx(every.total_mass)
    rng = np.random.default_rng(5)
    for _ in range(20):
        q = rng.uniform(m.lower, m.upper)
        full = _spread(q)
        assert np.allclose(m.follower_angles(q), full[2:])
        poses, want = m.fk_frames(q), every.fk_frames(full)
        for name in every.frame_names:
            assert np.allclose(poses[m.frame_index(name)], want[every.frame_index(name)], atol=1e-12), name
        assert np.allclose(m.fk_frame(q, "pad_link"), every.fk_frame(full, "pad_link"), atol=1e-12)
        assert np.allclose(m.fk_batch(q[None], "pad_link")[0], every.fk_frame(full, "pad_link"), atol=1e-12)
        assert np.allclose(m.com(q), every.com(full), atol=1e-12)
        for frame in ("pad_link", "finger_link", "lower"):
            assert np.allclose(m.jacobian(q, frame), every.jacobian(full, frame) @ M, atol=1e-12), frame
        assert np.allclose(m.com_jacobian(q), every.com_jacobian(full) @ M, atol=1e-12)


def test_a_followers_torque_is_its_leaders_to_give(tmp_path):
    """Virtual work: τ_driven = Mᵀ τ_all for the same motion."""
    m, every = _models(tmp_path)
    rng = np.random.default_rng(8)
    for _ in range(10):
        q, qd, qdd = rng.uniform(m.lower, m.upper), rng.normal(size=2), rng.normal(size=2)
        want = M.T @ inverse_dynamics(every, _spread(q), M @ qd, M @ qdd)
        assert np.allclose(inverse_dynamics(m, q, qd, qdd), want, atol=1e-10)


def test_ik_moves_a_followers_frame_through_its_leaders(tmp_path):
    m, _ = _models(tmp_path)
    rng = np.random.default_rng(2)
    for _ in range(10):
        T = m.fk_frame(rng.uniform(m.lower, m.upper), "pad_link")
        res = ik_lm(m, [Task("pad_link", T, mask="position")], m.home, restarts=10)
        assert res.success and np.allclose(m.fk_frame(res.q, "pad_link")[:3, 3], T[:3, 3], atol=1e-5)


def test_a_mimic_with_a_driven_joint_beyond_it_is_held(tmp_path):
    """A follower must not carry a driven joint (the kernels' order): such a mimic is held at 0 and said."""
    text = _ARM.format(links=_LINKS, mimic_finger="<mimic joint='elbow'/>", mimic_tip="")
    path = tmp_path / "held.urdf"
    path.write_text(text)
    m = urdf.build(str(path))
    assert m.joint_names == ("shoulder", "elbow", "tip") and not m.followers
    assert "finger (mimic, held at 0)" in m.meta["locked_joints"]


def test_physics_holds_a_follower_to_its_leader(tmp_path):
    """hil's MuJoCo model of the robot couples each follower to its leader (a joint equality) and
    gives it no actuator: driving the leaders turns the followers."""
    mujoco = pytest.importorskip("mujoco")
    from hil.physics.build import build

    m, _ = _models(tmp_path)
    pm = build(m, floor=False)
    assert pm.model.nu == m.n and pm.model.neq == len(m.followers)
    d = mujoco.MjData(pm.model)
    d.ctrl[pm.ctrl_of_joint] = [0.5, 0.8]
    for _ in range(3000):
        mujoco.mj_step(pm.model, d)
    q = d.qpos[pm.qpos_of_joint]
    assert np.allclose(q, [0.5, 0.8], atol=0.02)
    for f, want in zip(m.followers, m.follower_angles(q)):
        assert d.qpos[pm.model.jnt_qposadr[pm.model.joint(f.name).id]] == pytest.approx(want, abs=2e-3), f.name


def test_a_follower_is_written_back_as_a_mimic(tmp_path):
    """`hil urdf`'s URDF of the model reads back as the same mechanism."""
    from hil.robots.urdf_export import to_urdf

    m, _ = _models(tmp_path)
    path = tmp_path / "again.urdf"
    path.write_text(to_urdf(m))
    again = urdf.build(str(path))
    assert again.joint_names == m.joint_names and [f.name for f in again.followers] == ["finger", "tip"]
    q = np.array([0.4, -0.7])
    assert np.allclose(again.fk_frame(q, "pad_link"), m.fk_frame(q, "pad_link"), atol=1e-9)


@pytest.mark.parametrize("mimic", ["multiplier='1e6'", "offset='1e4'", "multiplier='-2e3' offset='3'"])
def test_a_coupling_no_mechanism_has_is_refused_naming_the_joint(tmp_path, mimic):
    """A multiplier of a million turns a follower past any number a kernel can use (the finger's
    <limit> aside: a continuous follower has none): one line."""
    path = tmp_path / "wild.urdf"
    path.write_text(_ARM.format(links=_LINKS, mimic_finger=f"<mimic joint='elbow' {mimic}/>",
                                mimic_tip="<mimic joint='shoulder'/>"))
    with pytest.raises(urdf.ConfigError) as e:
        urdf.build(str(path))
    assert "joint 'finger'" in str(e.value) and "out of bounds" in str(e.value) and str(path) in str(e.value)


def test_an_mjcf_polynomial_coupling_is_no_mimic(tmp_path):
    """joint1 = c0 + c1·joint2 + c2·joint2²: hil's followers are linear, so that joint is left to the
    file's physics (moved by no actuator), never followed at the wrong angle."""
    pytest.importorskip("mujoco")
    import hil.robots as robots

    text = (Path(__file__).parent / "mjcf" / "biped.xml").read_text()
    path = tmp_path / "poly.xml"
    path.write_text(text.replace('polycoef="0 0.5 0 0 0"', 'polycoef="0 0.5 0.2 0 0"'))
    m = robots.load(str(path))
    assert not m.followers and "neck_follow" in m.meta.get("unactuated_joints", [])


def test_a_leader_turns_no_faster_than_its_follower_may(tmp_path):
    """The finger turns 1.5 times as fast as the elbow: at 3 rad/s of its own, the elbow's 3 rad/s
    becomes 2 (its acceleration in proportion), and `hil robots` says so."""
    m, every = _models(tmp_path)
    e = m.joint_index("elbow")
    assert m.velocity_limit[e] == pytest.approx(3.0 / 1.5)
    assert m.acceleration_limit[e] == pytest.approx(every.acceleration_limit[e] / 1.5)
    assert m.velocity_limit[m.joint_index("shoulder")] == pytest.approx(3.0)   # the tip: 0.5 × as fast
    assert any(n.startswith("elbow: speed lowered to 115°/s") for n in m.meta["narrowed_by_followers"])


_GEARED = """<robot name="geared_leg">
  <link name="body"><inertial><mass value="1"/><inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <link name="hip_link"/><link name="yaw_link"/><link name="gear"/><link name="shank"/><link name="foot"/>
  <joint name="hip" type="revolute"><parent link="body"/><child link="hip_link"/><axis xyz="1 0 0"/>
    <limit lower="-1" upper="1" velocity="5"/></joint>
  <joint name="yaw_out" type="revolute"><parent link="hip_link"/><child link="yaw_link"/><origin xyz="0 0 -0.05"/>
    <axis xyz="0 0 1"/><limit lower="-1.5" upper="1.5" velocity="5"/>
    <mimic joint="yaw_servo" multiplier="-0.857143"/></joint>
  <joint name="yaw_servo" type="revolute"><parent link="yaw_link"/><child link="gear"/><origin xyz="0.02 0 0"/>
    <axis xyz="0 0 1"/><limit lower="-1.8" upper="1.8" velocity="5"/></joint>
  <joint name="knee" type="revolute"><parent link="yaw_link"/><child link="shank"/><origin xyz="0 0.01 -0.1"/>
    <axis xyz="0 1 0"/><limit lower="-2" upper="0" velocity="5"/></joint>
  <joint name="ankle" type="fixed"><parent link="shank"/><child link="foot"/><origin xyz="0.03 0 -0.1"/></joint>
</robot>"""


def test_a_gear_trains_output_is_planned_and_its_servos_gear_follows(tmp_path):
    """ToddlerBot's hip yaw: the yaw joint in the chain mimics the servo's gear, a leaf that rides on
    the yaw's own link. Held at 0, the leg below it never turned; now the output joint is the one
    planned, the gear follows it (1/m), and the servo's mapping is said."""
    path = tmp_path / "geared.urdf"
    path.write_text(_GEARED)
    m = urdf.build(str(path))
    assert m.joint_names == ("hip", "yaw_out", "knee") and not m.meta["locked_joints"]
    assert [(f.name, m.joint_names[f.leader]) for f in m.followers] == [("yaw_servo", "yaw_out")]
    assert m.followers[0].multiplier == pytest.approx(1 / -0.857143)
    # the output's range is what keeps the servo's gear within its own ±1.8 rad: ±1.5 stays
    assert (m.lower[1], m.upper[1]) == pytest.approx((-1.5, 1.5))
    note = next(n for n in m.meta["narrowed_by_followers"] if n.startswith("yaw_out:"))
    assert "yaw_servo = -1.167 · yaw_out" in note and "[[joint]] names yaw_servo for that servo" in note
    # over a bus the servo stays on its gear: the generated map says so, and mixes through the ratio
    bus = board_config.generated(m, "dynamixel2")
    assert [j.name for j in bus.joints] == ["hip", "yaw_servo", "knee"]
    assert bus.mix.servo_angles(np.array([0.1, 0.3, -0.2])) == pytest.approx([0.1, 0.3 / -0.857143, -0.2])
    # and the bus's usual servo, on the gear, is felt at the yaw through the ratio
    from hil.robots.servos import presets, servo_table

    usual = presets()[bus.servo["preset"]]
    felt = servo_table(m, bus.servo, bus.source)
    assert felt.joint(1).kp_nm_per_rad == pytest.approx(usual.kp_nm_per_rad / 0.857143 ** 2)
    assert felt.joint(1).torque_limit_nm == pytest.approx(usual.torque_limit_nm / 0.857143)
    assert felt.joint(0).kp_nm_per_rad == pytest.approx(usual.kp_nm_per_rad)
    # a narrower range of the gear's servo bounds the yaw exactly through the ratio, each side its own
    import dataclasses

    gear = dataclasses.replace(bus.joints[1], min_rad=np.radians(-100), max_rad=np.radians(40))
    narrowed = board_config.within_config(m, dataclasses.replace(bus, joints=(bus.joints[0], gear, bus.joints[2])))
    assert np.degrees([narrowed.lower[1], narrowed.upper[1]]) == pytest.approx([40 * -0.857143, -100 * -0.857143])
    every = tmp_path / "every.urdf"
    every.write_text(_GEARED.replace('<mimic joint="yaw_servo" multiplier="-0.857143"/>', ""))
    unfolded = urdf.build(str(every))
    assert unfolded.joint_names == ("hip", "yaw_out", "yaw_servo", "knee")
    for q in ([0.2, 0.7, -0.5], [-0.4, -1.2, -1.0]):
        full = [q[0], q[1], q[1] / -0.857143, q[2]]
        for frame in ("foot", "gear"):
            assert np.allclose(m.fk_frame(q, frame), unfolded.fk_frame(full, frame), atol=1e-9), frame
    assert not np.allclose(m.fk_frame([0.2, 0.7, -0.5], "foot"), m.fk_frame([0.2, 0.0, -0.5], "foot"))

