"""Robots from MJCF files, checked against MuJoCo's own kinematics of the same file: a biped
written in MJCF's idioms (tests/unit/mjcf/biped.xml) and hil's shipped robots written out as
MJCF by MuJoCo and read back."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

import hil.robots as robots
from hil.errors import ConfigError
from tests.launch import HIL

mujoco = pytest.importorskip("mujoco")
BIPED = str(Path(__file__).parent / "mjcf" / "biped.xml")
pytestmark = pytest.mark.usefixtures("own_robot_cache")


def _mujoco_at(path: str, model, q: np.ndarray):
    """MuJoCo's kinematics of the file at joint angles q (hil's joint order), the base at the origin."""
    mm = mujoco.MjModel.from_xml_path(path)
    d = mujoco.MjData(mm)
    d.qpos[:] = mm.qpos0
    if mm.jnt_type[0] == mujoco.mjtJoint.mjJNT_FREE:
        d.qpos[:7] = [0, 0, 0, 1, 0, 0, 0]
    for i, name in enumerate(model.joint_names):
        d.qpos[mm.jnt_qposadr[mm.joint(name).id]] = q[i]
    for f, angle in zip(model.followers, model.follower_angles(q)):   # where the file's equality holds them
        d.qpos[mm.jnt_qposadr[mm.joint(f.name).id]] = angle
    mujoco.mj_kinematics(mm, d)
    mujoco.mj_comPos(mm, d)
    return mm, d


def test_an_mjcf_robot_moves_as_mujoco_moves_it():
    m = robots.load(BIPED)
    assert m.name == "testbiped" and m.kind == "humanoid" and m.n == 10          # a free joint: it floats
    assert [(f.name, m.joint_names[f.leader], f.multiplier) for f in m.followers] == [("neck_follow", "neck", 0.5)]
    assert "neck_follow" not in m.joint_names and not m.meta["locked_joints"]     # an equality: it follows its leader
    assert np.degrees(m.upper[m.joint_index("l_knee")]) == pytest.approx(130)     # degrees read as MuJoCo reads them
    rng = np.random.default_rng(3)
    for _ in range(10):
        q = rng.uniform(m.lower, m.upper)
        mm, d = _mujoco_at(BIPED, m, q)
        for body in ("torso", "head", "l_thigh", "l_shin", "l_foot", "r_foot"):
            b = mm.body(body).id
            last = mm.body_jntadr[b] + mm.body_jntnum[b] - 1
            T = m.fk_frame(q, body)   # a link's frame sits at its hinge: the body's is that less the anchor
            T_body = T.copy()
            T_body[:3, 3] = T[:3, 3] - T[:3, :3] @ mm.jnt_pos[last]
            assert np.allclose(T_body[:3, 3], d.xpos[b], atol=1e-8) and np.allclose(T[:3, :3], d.xmat[b].reshape(3, 3),
                                                                                       atol=1e-8), body
        for site in ("imu", "l_toe"):   # sites are frames
            s = mm.site(site).id
            T = m.fk_frame(q, site)
            assert np.allclose(T[:3, 3], d.site_xpos[s], atol=1e-8)
            assert np.allclose(T[:3, :3], d.site_xmat[s].reshape(3, 3), atol=1e-8)
    assert m.masses.sum() == pytest.approx(mm.body_subtreemass[mm.body("pelvis").id], rel=1e-6)
    com = m.com(q)
    assert np.allclose(com, d.subtree_com[mm.body("pelvis").id], atol=1e-6)



def test_a_root_body_turning_on_a_hinge_of_its_own_hangs_from_the_world(tmp_path):
    """MuJoCo lets the first body turn on its own hinge (a pendulum, a turntable): it hangs from
    the world at its place; a file without a model name is named after the file."""
    path = tmp_path / "pendulum.xml"
    path.write_text("<mujoco><worldbody><body name='arm' pos='0.1 0.2 0.5' quat='0.9 0.1 0.3 0.2'>"
                    "<joint name='swing' axis='0.3 1 0.2' pos='0 0 0.05' range='-90 90'/>"
                    "<geom type='capsule' fromto='0 0 0 0 0 -0.3' size='0.02' mass='1'/>"
                    "<body name='tip' pos='0 0 -0.3'><joint name='wrist' axis='1 0 0'/>"
                    "<geom type='sphere' size='0.03' mass='0.2'/></body></body></worldbody></mujoco>")
    m = robots.load(str(path))
    assert m.name == "pendulum" and list(m.joint_names) == ["swing", "wrist"] and not m.floating
    for q in ([0.0, 0.0], [0.7, -1.1], [-1.3, 2.0]):
        q = np.array(q)
        mm, d = _mujoco_at(str(path), m, q)
        for body in ("arm", "tip"):
            b = mm.body(body).id
            T = m.fk_frame(q, body)   # a link's frame sits at its hinge: the body's is that less the anchor
            pos = T[:3, 3] - T[:3, :3] @ mm.jnt_pos[mm.body_jntadr[b]]
            assert np.allclose(pos, d.xpos[b], atol=1e-8) and np.allclose(T[:3, :3], d.xmat[b].reshape(3, 3),
                                                                          atol=1e-8), (body, q)
    r = subprocess.run([*HIL, "walk", "--robot", str(path)], capture_output=True,
                       text=True, timeout=120, env=dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache")))
    assert r.returncode == 2 and "Traceback" not in r.stderr and "has no <freejoint/>" in r.stderr, r.stderr

_STAND = ("<mujoco model='on_a_stand'><worldbody>FLOOR<body name='base' pos='0 0 0.8'ROOT>"
          "<geom type='box' size='0.05 0.05 0.05' mass='1'/><body name='arm' pos='0 0 -0.1'>"
          "<joint name='pitch' axis='0 1 0' range='-1 1'/><geom type='capsule' fromto='0 0 0 0 0 -0.5' size='0.02' "
          "mass='0.5'/></body></body></worldbody></mujoco>")


@pytest.mark.parametrize("floor,root,want", [
    ("<geom type='plane' size='2 2 0.1' pos='0 0 0.05'/>", "", -0.75),   # below the base, in its frame
    ("", "", None),                                                      # no floor in its world
    ("<geom type='plane' size='2 2 0.1'/>", " quat='0.9 0.3 0 0'", None),  # a turned base: its z is not the world's
    ("<geom type='plane' size='2 2 0.1'/>", "><joint name='turn' axis='0 0 1'/", 0.0),   # hung from the world
])
def test_a_robot_fixed_above_its_worlds_floor_has_its_floor_there(tmp_path, floor, root, want):
    """Physics, the floor check and the IK's floor find the file's floor under a robot on a stand,
    not at its base (a floor through the arm hanging below it); a side file's own floor wins."""
    path = tmp_path / "stand.xml"
    path.write_text(_STAND.replace("FLOOR", floor).replace("ROOT", root))
    m = robots.load(str(path))
    assert m.meta.get("floor_z_m") == (None if want is None else pytest.approx(want))
    side = tmp_path / "stand.toml"
    side.write_text('[robot]\nmjcf = "stand.xml"\nfloor_z_m = -2.0\n')
    assert robots.load(str(side)).meta["floor_z_m"] == -2.0
    if want is not None:
        (tmp_path / "plain.toml").write_text('[robot]\nmjcf = "stand.xml"\n')
        assert robots.load(str(tmp_path / "plain.toml")).meta["floor_z_m"] == pytest.approx(want)


def test_the_feet_are_found_by_the_tree():
    m = robots.load(BIPED)
    assert any("feet found by the tree: l_foot (left), r_foot (right)" in n for n in m.meta["notes"])
    hl, hw = m.sole_half
    assert hl == pytest.approx(0.05, abs=1e-6) and hw == pytest.approx(0.025, abs=1e-6)   # the foot box's
    sole = m.fk_frame(m.home, "l_sole")
    box_bottom = m.fk_frame(m.home, "l_foot") @ np.array([0.01, 0, -0.02, 1.0])
    assert np.allclose(sole[:3, 3], box_bottom[:3], atol=1e-6)


def test_feet_that_touch_the_floor_by_explicit_contact_pairs_are_found(tmp_path):
    """MJX-style files (MuJoCo Playground's, Menagerie's `*_mjx`) turn every geom's contype and
    conaffinity off and pair each foot with the floor: those paired geoms are collision shapes too,
    so the feet are found and their soles fitted as in the file with the bits on."""
    text = (Path(__file__).parent / "mjcf" / "biped.xml").read_text()
    text = text.replace('<geom group="3" rgba="0.5 0.5 0.5 1"/>',
                        '<geom group="3" contype="0" conaffinity="0" rgba="0.5 0.5 0.5 1"/>')
    text = text.replace('<geom class="collision" type="box" pos="0.01 0 -0.015" size="0.05 0.025 0.005"/>\n'
                        '            <site name="l_toe"',
                        '<geom name="l_sole_geom" class="collision" type="box" pos="0.01 0 -0.015" '
                        'size="0.05 0.025 0.005"/>\n            <site name="l_toe"', 1)
    text = text.replace('<geom class="collision" type="box" pos="0.01 0 -0.015" size="0.05 0.025 0.005"/>\n'
                        '          </body>',
                        '<geom name="r_sole_geom" class="collision" type="box" pos="0.01 0 -0.015" '
                        'size="0.05 0.025 0.005"/>\n          </body>', 1)
    text = text.replace("</worldbody>", '</worldbody>\n  <contact><pair geom1="l_sole_geom" geom2="floor"/>'
                                        '<pair geom1="r_sole_geom" geom2="floor"/></contact>', 1)
    assert text.count("_sole_geom") == 4
    path = tmp_path / "paired.xml"
    path.write_text(text)
    m, plain = robots.load(str(path)), robots.load(BIPED)
    assert any("feet found by the tree: l_foot (left), r_foot (right)" in n for n in m.meta["notes"])
    assert m.sole_half == pytest.approx(plain.sole_half)
    assert np.allclose(m.fk_frame(m.home, "l_sole"), plain.fk_frame(plain.home, "l_sole"), atol=1e-9)


def test_a_keyframe_that_tilts_the_feet_is_stood_flat_by_the_ankles(tmp_path):
    """A keyframe made for a learned policy (MuJoCo Playground's Wolfgang: 13°) tilts the soles
    under an upright body; hil's walks and balance checks stand them flat, so home turns each
    ankle until its foot's box lies flat, and says so. A side file's own home is left as given,
    its tilt said."""
    mm = mujoco.MjModel.from_xml_path(BIPED)
    qpos = mm.qpos0.copy()
    for name, value in (("l_hip_pitch", -0.35), ("l_knee", 0.7), ("r_hip_pitch", -0.2), ("r_knee", 0.3)):
        qpos[mm.jnt_qposadr[mm.joint(name).id]] = value
    path = tmp_path / "biped.xml"
    path.write_text(Path(BIPED).read_text().replace(
        "</mujoco>", f'<keyframe><key name="home" qpos="{" ".join(map(str, qpos))}"/></keyframe></mujoco>'))
    m = robots.load(str(path))
    home = dict(zip(m.joint_names, m.home))
    assert home["l_knee"] == pytest.approx(0.7) and home["r_knee"] == pytest.approx(0.3)   # the rest as the file says
    for side, turned in (("l", 0.35), ("r", 0.1)):
        foot = m.fk_frame(m.home, f"{side}_foot")   # (the box lies along its link's axes)
        assert foot[2, 2] == pytest.approx(1.0, abs=1e-9), side
        assert home[f"{side}_ankle"] == pytest.approx(-turned, abs=0.05)
        assert any(n.startswith(f"home: {side}_ankle") and f"to stand {side}_foot's sole flat" in n
                   for n in m.meta["notes"]), m.meta["notes"]
    side = tmp_path / "biped.toml"
    side.write_text('[robot]\nmjcf = "biped.xml"\n[poses]\nhome = { l_hip_pitch = -20, l_knee = 40 }\n')
    robots._cache.clear()
    mine = robots.load(str(side))
    assert mine.home[mine.joint_index("l_ankle")] == 0.0
    assert any(n.startswith("l_foot: its sole tilts 19.6° at home") for n in mine.meta["notes"]), mine.meta["notes"]


@pytest.mark.parametrize("name", ["humanoid17", "puma560", "so101"])
def test_shipped_robots_written_as_mjcf_read_back_the_same(tmp_path, name):
    from hil.physics.build import mjcf_text

    original = robots.load(name)
    path = tmp_path / f"{name}.xml"
    path.write_text(mjcf_text(original, floor=False))
    back = robots.load(str(path))
    assert back.joint_names == original.joint_names and back.kind == original.kind
    assert set(original.frame_names) <= set(back.frame_names)
    rng = np.random.default_rng(5)
    for _ in range(10):
        q = rng.uniform(original.lower, original.upper)
        for f in original.frame_names:
            assert np.allclose(back.fk_frame(q, f), original.fk_frame(q, f), atol=1e-5), f
    assert np.allclose(back.lower, original.lower, atol=1e-5) and np.allclose(back.upper, original.upper, atol=1e-5)
    assert back.masses.sum() == pytest.approx(original.masses.sum(), rel=1e-4)
    if original.kind == "humanoid":
        assert np.allclose(back.sole_half, original.sole_half, atol=1e-6)


def test_an_mjcf_is_compiled_once(tmp_path):
    robots.load(BIPED)
    made = list((tmp_path / "cache" / "hil" / "robots").glob("mjcf-*/robot.urdf"))
    assert len(made) == 1
    stamp = made[0].stat().st_mtime_ns
    robots._cache.clear()
    robots.load(BIPED)
    assert made[0].stat().st_mtime_ns == stamp


@pytest.mark.parametrize("text, said", [
    (b"<mujoco><worldbody><body><joint type='hinge' range='1 0'/></body></worldbody>", "MuJoCo cannot read it"),
    (b"<mujoco model='x'><worldbody><body name='b'><joint name='j' range='0 1' limited='true'/>"
     b"<geom size='0.1' mass='1'/></body></worldbody><asset><mesh file='gone.stl'/></asset></mujoco>",
     "MuJoCo cannot read it"),
    (b"<html><body>a web page saved as .xml</body></html>", "neither an MJCF"),
    (b"\x00\xff\xfe garbage", "neither an MJCF"),
    (b"<mujoco><worldbody><body name='b' pos='nan 0 0'><joint name='j' range='0 1'/><geom size='0.1'/></body>"
     b"</worldbody></mujoco>", "not finite"),
    (b"<mujoco><worldbody/></mujoco>", "no body"),
    # said of the file given, not of the URDF written from it
    (b"<mujoco><worldbody><body name='a'><joint name='j' type='ball'/><geom size='0.1' mass='1'/></body>"
     b"</worldbody></mujoco>", "nothing for hil to drive"),
    (b"<mujoco><compiler angle='radian'/><worldbody><body name='a'><joint name='j' range='-1e9 1e9' "
     b"limited='true'/><geom size='0.1' mass='1'/></body></worldbody></mujoco>", "the MJCF's <joint range>"),
    # a floating base on one leg (a free joint makes a humanoid): no feet to find
    (b"<mujoco><worldbody><body name='b' pos='0 0 1'><freejoint/><geom type='box' size='.1 .1 .1' mass='1'/>"
     b"<body name='c' pos='0 0 -.2'><joint name='k' axis='0 1 0' range='-1 1'/><geom type='box' size='.05 .05 .05' "
     b"mass='.2'/></body></body></worldbody></mujoco>", "no two feet hil can find"),
])
def test_a_bad_mjcf_is_one_clear_error(tmp_path, text, said):
    path = tmp_path / "bad.xml"
    path.write_bytes(text)
    with pytest.raises(ConfigError) as e:
        robots.load(str(path))
    assert said in str(e.value) and str(path) in str(e.value)


def test_the_cli_takes_an_mjcf_robot(tmp_path):
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"))
    r = subprocess.run([*HIL, "robots", "--robot", BIPED], capture_output=True, text=True,
                       env=env, timeout=120)
    assert r.returncode == 0 and "testbiped: from biped.xml (MJCF, compiled by MuJoCo)" in r.stdout, r.stdout + r.stderr
    assert "follows: neck_follow = 0.5 · neck (no servo of its own)" in r.stdout


def test_the_position_actuators_are_the_servo_table(tmp_path):
    """Each joint a position actuator drives gets the actuator's numbers as MuJoCo compiled them
    (stiffness kp·gear², damping with the actuator's kv, armature, friction loss, force range);
    a side file's own [servo] goes over them, and a preset there replaces them."""
    from hil.robots.servos import servo_table

    doc = (Path(BIPED).read_text().replace('<position name="l_knee" joint="l_knee"/>',
                                           '<position name="l_knee" joint="l_knee" kp="40" kv="0.3" gear="2" '
                                           'forcerange="-3 3"/>')
           .replace('<joint name="r_ankle" axis="0 1 0" range="-60 60"/>',
                    '<joint name="r_ankle" axis="0 1 0" range="-60 60" frictionloss="0.07"/>'))
    path = tmp_path / "biped.xml"
    path.write_text(doc)
    (tmp_path / "meshes").mkdir(exist_ok=True)
    model = robots.load(str(path))
    table = servo_table(model)
    mm = mujoco.MjModel.from_xml_path(str(path))
    assert table.declared
    for name in model.joint_names:
        s = table.joint(model.joint_index(name))
        a = mm.actuator(name)
        dof = mm.jnt_dofadr[mm.joint(name).id]
        g = float(a.gear[0])
        assert s.kp_nm_per_rad == pytest.approx(float(a.gainprm[0]) * g * g), name
        assert s.damping_nms_per_rad == pytest.approx(float(mm.dof_damping[dof]) - float(a.biasprm[2]) * g * g), name
        assert s.armature_kgm2 == pytest.approx(float(mm.dof_armature[dof]))
        assert s.friction_nm == pytest.approx(float(mm.dof_frictionloss[dof]))
        assert s.torque_limit_nm == pytest.approx(abs(g) * float(np.max(np.abs(a.forcerange)))), name
    knee = table.joint(model.joint_index("l_knee"))
    assert (knee.kp_nm_per_rad, knee.torque_limit_nm) == (pytest.approx(160.0), pytest.approx(6.0))
    assert table.joint(model.joint_index("r_ankle")).friction_nm == pytest.approx(0.07)
    side = tmp_path / "biped.toml"
    side.write_text('[robot]\nmjcf = "biped.xml"\n[servo]\npreset = "STS3215"\n')
    assert {s.preset for s in servo_table(robots.load(str(side))).servos} == {"STS3215"}
    # keys without a preset go over the actuators': theirs stay where the side file gives none
    side = tmp_path / "over.toml"
    side.write_text('[robot]\nmjcf = "biped.xml"\n[servo]\ncompensation_margin = 1\n'
                    '[servo.joint.l_knee]\ntorque_limit_nm = 4.0\n[servo.joint.r_knee]\npreset = "STS3215"\n')
    over = servo_table(robots.load(str(side)))
    for name in model.joint_names:
        s, own = over.joint(model.joint_index(name)), table.joint(model.joint_index(name))
        if name == "r_knee":
            assert s.preset == "STS3215" and s.compensation_margin == 1.5
            continue
        assert s.compensation_margin == 1.0 and own.compensation_margin == 1.5
        assert s.kp_nm_per_rad == own.kp_nm_per_rad and s.damping_nms_per_rad == own.damping_nms_per_rad, name
        assert s.torque_limit_nm == (4.0 if name == "l_knee" else own.torque_limit_nm), name


def test_a_joint_without_a_range_is_said(tmp_path):
    path = tmp_path / "arm.xml"
    path.write_text("<mujoco><worldbody><body name='base'><geom size='0.05'/><body name='l1' pos='0 0 0.1'>"
                    "<joint name='spin' axis='0 0 1' limited='false'/><geom type='capsule' fromto='0 0 0 0.2 0 0' "
                    "size='0.02' mass='0.2'/></body></body></worldbody></mujoco>")
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"))
    r = subprocess.run([*HIL, "robots", "--robot", str(path)], capture_output=True,
                       text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "note: spin: the file gives no range (continuous): ±360° assumed" in r.stdout, r.stdout


def test_a_force_range_of_a_placeholder_size_declares_no_torque_limit(tmp_path):
    """forcerange="-1e30 1e30" is a file's 'unlimited': the joint keeps the ideal servo's limit,
    never a servo said to give 10³⁰ N·m."""
    from hil.robots.servos import presets, servo_table

    path = tmp_path / "arm.xml"
    path.write_text("<mujoco><worldbody><body name='b'><geom size='.05'/><body name='c' pos='0 0 .1'>"
                    "<joint name='j' range='-1 1'/><geom size='.02' mass='.1'/></body></body></worldbody>"
                    "<actuator><position joint='j' kp='5' forcerange='-1e30 1e30'/></actuator></mujoco>")
    s = servo_table(robots.load(str(path))).joint(0)
    assert s.kp_nm_per_rad == pytest.approx(5.0)
    assert s.torque_limit_nm == presets()["ideal"].torque_limit_nm


def test_the_files_keyframes_are_its_poses_and_home_is_how_its_makers_stand_it(tmp_path):
    """A keyframe named home is the robot's home pose, the others poses of their names; a side
    file's own [poses] win, and a keyframe outside a side file's narrower stops is one line naming
    the keyframe."""
    mm = mujoco.MjModel.from_xml_path(BIPED)
    qpos = mm.qpos0.copy()
    for name, value in (("l_knee", 0.7), ("r_knee", 0.5), ("l_hip_pitch", -0.35)):
        qpos[mm.jnt_qposadr[mm.joint(name).id]] = value
    crouch = mm.qpos0.copy()
    crouch[mm.jnt_qposadr[mm.joint("r_knee").id]] = 1.2
    keys = (f'<keyframe><key name="home" qpos="{" ".join(map(str, qpos))}"/>'
            f'<key name="crouch" qpos="{" ".join(map(str, crouch))}"/></keyframe>')
    path = tmp_path / "biped.xml"
    path.write_text(Path(BIPED).read_text().replace("</mujoco>", keys + "</mujoco>"))
    model = robots.load(str(path))
    home = dict(zip(model.joint_names, model.home))
    assert home["l_knee"] == pytest.approx(0.7) and home["r_knee"] == pytest.approx(0.5)
    assert home["l_hip_pitch"] == pytest.approx(-0.35) and home["waist"] == 0.0
    assert model.poses["crouch"][model.joint_index("r_knee")] == pytest.approx(1.2)
    side = tmp_path / "biped.toml"
    side.write_text('[robot]\nmjcf = "biped.xml"\n[poses]\nhome = { l_knee = 10 }\n')
    robots._cache.clear()
    assert robots.load(str(side)).home[model.joint_index("l_knee")] == pytest.approx(np.radians(10))
    side.write_text('[robot]\nmjcf = "biped.xml"\n[joints.r_knee]\nlower_deg = 0\nupper_deg = 60\n')
    robots._cache.clear()
    with pytest.raises(ConfigError) as e:
        robots.load(str(side))
    assert "the MJCF's keyframe 'crouch'" in str(e.value) and "r_knee = 68.8°" in str(e.value), e.value
    assert "give [poses] crouch in a side file" in str(e.value)


def _checked_pairs(model) -> set:
    from hil.safety import SafetyChecker

    c = SafetyChecker(model)
    names = [model.base_frame, *model.link_names]
    return {frozenset((names[int(c.caps[a, 0]) + 1], names[int(c.caps[b, 0]) + 1])) for a, b, *_ in c.pairs}


def test_links_meant_to_touch_are_left_out_of_the_self_collision_check(tmp_path):
    """The makers' `<contact><exclude>` pairs and a side file's `[collision] allowed` (MoveIt's
    disabled collisions) are not checked against each other; every other pair still is; a link
    that is not there is one line naming it."""
    base = robots.load(BIPED)
    feet, shins = frozenset(("l_foot", "r_foot")), frozenset(("l_shin", "r_shin"))
    assert {feet, shins} <= _checked_pairs(base)
    path = tmp_path / "biped.xml"
    path.write_text(Path(BIPED).read_text().replace(
        "</mujoco>", '<contact><exclude body1="l_foot" body2="r_foot"/></contact></mujoco>'))
    robots._cache.clear()
    model = robots.load(str(path))
    assert _checked_pairs(model) == _checked_pairs(base) - {feet}
    side = tmp_path / "biped.toml"
    side.write_text('[robot]\nmjcf = "biped.xml"\n[collision]\nallowed = [["l_shin", "r_shin"]]\n')
    robots._cache.clear()
    assert _checked_pairs(robots.load(str(side))) == _checked_pairs(base) - {feet, shins}
    side.write_text('[robot]\nmjcf = "biped.xml"\n[collision]\nallowed = [["l_shin", "r_shim"]]\n')
    robots._cache.clear()
    with pytest.raises(ConfigError) as e:
        robots.load(str(side))
    assert "[collision] allowed: 'r_shim' is not a link of" in str(e.value) and "r_shin" in str(e.value), e.value
    side.write_text('[robot]\nmjcf = "biped.xml"\n[collision]\nallowed = ["l_shin"]\n')
    robots._cache.clear()
    with pytest.raises(ConfigError, match="each entry is two link names"):
        robots.load(str(side))


def test_the_soles_are_found_where_the_robot_stands_at_home_not_at_zero(tmp_path):
    """A file whose zero pose is not its standing one (the Berkeley Humanoid's feet are tilted at
    zero, flat in its home keyframe): each sole frame is flat at home, at the bottom of its foot's
    box there, and the foot's box gives the sole's size."""
    biped6 = Path(BIPED).parent / "biped6.xml"
    tilted = biped6.read_text().replace('<body name="l_foot" pos="0 0 -0.12" quat="0.9990482 0 -0.0436194 0">',
                                        '<body name="l_foot" pos="0 0 -0.12" quat="0.9914449 0 -0.1305262 0">')
    tilted = tilted.replace('<body name="r_foot" pos="0 0 -0.12" quat="0.9990482 0 -0.0436194 0">',
                            '<body name="r_foot" pos="0 0 -0.12" quat="0.9914449 0 -0.1305262 0">')
    (tmp_path / "biped6.xml").write_text(tilted)
    side = tmp_path / "tilted.toml"
    side.write_text('[robot]\nmjcf = "biped6.xml"\n[poses]\nhome = { l_ankle = 10, r_ankle = 10 }\n')
    robot = robots.load(str(side))
    mm = mujoco.MjModel.from_xml_path(str(tmp_path / "biped6.xml"))
    d = mujoco.MjData(mm)
    for name in robot.joint_names:
        d.qpos[mm.jnt_qposadr[mm.joint(name).id]] = robot.home[robot.joint_index(name)]
    mujoco.mj_forward(mm, d)
    base = d.xpos[mm.body("pelvis").id]
    for frame, foot in (("l_sole", "l_foot"), ("r_sole", "r_foot")):
        T = robot.fk_frame(robot.home, frame)
        np.testing.assert_allclose(T[:3, 2], [0.0, 0.0, 1.0], atol=1e-6)   # flat at home
        box = next(g for g in range(mm.ngeom) if mm.geom_bodyid[g] == mm.body(foot).id)
        bottom = d.geom_xpos[box] - d.geom_xmat[box].reshape(3, 3)[:, 2] * mm.geom_size[box][2]
        # the pelvis's own yaw (5°) turns the base frame about z: heights compare as they are
        assert T[2, 3] == pytest.approx(bottom[2] - base[2], abs=1e-6)
    assert robot.sole_half == pytest.approx((0.05, 0.025), abs=1e-6)


def test_a_shin_and_a_foot_joined_by_an_ankle_s_pitch_and_roll_are_not_checked_against_each_other(tmp_path):
    """biped6's foot body has two joints (pitch, then roll, at one point): two links here, but one
    body whose parent is the shin, and MuJoCo leaves a body and its parent alone (`filterparent`):
    so does hil. The thigh and the foot are still checked; with `filterparent` off, so are the shin
    and the foot."""
    model = robots.load("tests/unit/mjcf/biped6.xml")
    between = model.joints[model.link_names.index("l_foot")].parent
    assert model.link_names[between] != "l_shin" and not [s for s in model.shapes if s.link == between]
    pairs = _checked_pairs(model)
    assert frozenset(("l_shin", "l_foot")) not in pairs and frozenset(("r_shin", "r_foot")) not in pairs
    assert frozenset(("l_thigh", "l_foot")) in pairs
    path = tmp_path / "biped6.xml"
    path.write_text(Path("tests/unit/mjcf/biped6.xml").read_text().replace(
        '<compiler angle="degree"/>', '<compiler angle="degree"/><option><flag filterparent="disable"/></option>'))
    robots._cache.clear()
    assert frozenset(("l_shin", "l_foot")) in _checked_pairs(robots.load(str(path)))
