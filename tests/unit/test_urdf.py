"""Robots from URDF files: the loaded model against Pinocchio loading the same file, IK on it,
the refusals of malformed files, side files, the cache, and the meshes' bounding capsules."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from hil import robots
from hil.errors import ConfigError, HilError
from hil.robots import urdf

pin = pytest.importorskip("pinocchio")
pytestmark = pytest.mark.usefixtures("own_robot_cache")

ERD = "package://example-robot-data/robots/"
ARM = ERD + "so_arm_description/urdf/so101.urdf"
HUMANOID = ERD + "g1_description/urdf/g1_29dof_rev_1_0.urdf"
CONTINUOUS = ERD + "double_pendulum_description/urdf/double_pendulum_continuous.urdf"
G1_SOLES = {"robot": {"kind": "humanoid"}, "soles": {"left": "left_ankle_roll_link", "right": "right_ankle_roll_link"}}
PENDULUM_SPEEDS = {"joints": {"joint1": {"velocity_deg_s": 90}, "joint2": {"velocity_deg_s": 90}}}


def erd(ref: str) -> str:
    """A file of the example-robot-data package, found the way hil finds package:// files."""
    try:
        return str(urdf.resolve_file(ref, __file__))
    except FileNotFoundError:
        pytest.skip("example-robot-data is not installed (pip install -e '.[test]')")


def pin_q(pm, model, q):
    """Pinocchio's configuration for our q (continuous joints are (cos, sin) there)."""
    qp = pin.neutral(pm)
    for i, name in enumerate(model.joint_names):
        j = pm.joints[pm.getJointId(name)]
        if j.nq == 2:
            qp[j.idx_q:j.idx_q + 2] = math.cos(q[i]), math.sin(q[i])
        else:
            qp[j.idx_q] = q[i]
    return qp


TALOS = ERD + "talos_data/robots/talos_reduced.urdf"   # its grippers turn below fixed joints


@pytest.mark.parametrize("ref,side,n", [(ARM, {}, 6), (HUMANOID, G1_SOLES, 29), (CONTINUOUS, PENDULUM_SPEEDS, 2),
                                        (TALOS, {}, 32)],
                         ids=["so101-arm", "g1-floating-base", "continuous-joints", "talos-joints-below-fixed"])
def test_every_frame_matches_pinocchio(ref, side, n):
    path = erd(ref)
    model = urdf.build(path, side)
    pm = pin.buildModelFromUrdf(path)
    pd = pm.createData()
    assert model.n == n == pm.nv
    names = {f.name for f in pm.frames}
    links = [name for name in model.frame_names if name in names]
    assert len(links) >= n + 1          # every URDF link is a frame of ours, named as in the file
    rows = [model.frame_index(name) for name in links]
    ids = [pm.getFrameId(name) for name in links]
    rng = np.random.default_rng(7)
    worst = 0.0
    for _ in range(1000):
        q = rng.uniform(model.lower, model.upper)
        pin.framesForwardKinematics(pm, pd, pin_q(pm, model, q))
        F = model.fk_frames(q)
        for r, f in zip(rows, ids):
            worst = max(worst, float(np.abs(F[r] - pd.oMf[f].homogeneous).max()))
    assert worst <= 1e-9


def test_jacobian_and_com_match_pinocchio():
    path = erd(HUMANOID)
    model = urdf.build(path, G1_SOLES)
    # a free-flyer root, as a legged robot is: Pinocchio leaves a fixed root's own mass out of the COM
    pm = pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer())
    pd = pm.createData()
    rng = np.random.default_rng(3)
    hand = "left_rubber_hand"
    for _ in range(50):
        q = rng.uniform(model.lower, model.upper)
        qp = pin_q(pm, model, q)
        pin.computeJointJacobians(pm, pd, qp)
        pin.framesForwardKinematics(pm, pd, qp)
        J = pin.getFrameJacobian(pm, pd, pm.getFrameId(hand), pin.LOCAL_WORLD_ALIGNED)
        cols = [pm.joints[pm.getJointId(name)].idx_v for name in model.joint_names]
        assert np.abs(model.jacobian(q, hand) - J[:, cols]).max() < 1e-9
        assert np.abs(model.com(q) - pin.centerOfMass(pm, pd, qp)).max() < 1e-9


def test_names_order_and_what_is_not_driven():
    panda = urdf.build(erd(ERD + "panda_description/urdf/panda.urdf"))
    assert panda.joint_names == tuple(f"panda_joint{i}" for i in range(1, 8))
    assert panda.base_frame == "panda_link0" and "panda_hand" in panda.frame_names
    # its fingers are prismatic (one mimics the other): held, listed, not silently dropped
    assert any("panda_finger_joint1 (prismatic" in s for s in panda.meta["locked_joints"])
    assert any("panda_finger_joint2 (mimic" in s for s in panda.meta["locked_joints"])
    g1 = urdf.build(erd(HUMANOID), G1_SOLES)
    for j in g1.joints:   # parents before children, as the kernels need
        assert j.parent < g1.joint_names.index(j.name)


def test_limits_come_from_the_file_and_the_side_file():
    m = urdf.build(erd(ARM))
    i = m.joint_index("shoulder_pan")
    assert m.lower[i] == pytest.approx(-1.91986) and m.upper[i] == pytest.approx(1.91986)
    assert m.velocity_limit[i] == pytest.approx(10.0)
    assert m.acceleration_limit[i] == pytest.approx(urdf.ACCEL_PER_VELOCITY * 10.0)
    s = urdf.build(erd(ARM), {"joints": {"shoulder_pan": {"upper_deg": 45, "velocity_deg_s": 90}}})
    assert math.degrees(s.upper[i]) == pytest.approx(45) and math.degrees(s.velocity_limit[i]) == pytest.approx(90)
    c = urdf.build(erd(CONTINUOUS), PENDULUM_SPEEDS)
    assert np.allclose(np.degrees(c.upper), urdf.CONTINUOUS_RANGE_DEG)


_MIMIC_ARM = """<robot name="mimic_arm">
  <link name="base"/><link name="upper"/><link name="lower"/><link name="hand"/>
  <joint name="shoulder" type="revolute"><parent link="base"/><child link="upper"/><axis xyz="0 1 0"/>
    <limit lower="-1.5" upper="1.5" effort="5" velocity="3"/></joint>
  <joint name="elbow" type="revolute"><parent link="upper"/><child link="lower"/><origin xyz="0 0 0.3"/>
    <axis xyz="0 1 0"/><limit lower="{lo}" upper="{hi}" effort="5" velocity="3"/>
    <mimic joint="shoulder" multiplier="{m}" offset="{o}"/></joint>
  <joint name="wrist" type="revolute"><parent link="lower"/><child link="hand"/><origin xyz="0 0 0.3"/>
    <axis xyz="0 1 0"/><limit lower="-1.5" upper="1.5" effort="5" velocity="3"/></joint>
</robot>"""


@pytest.mark.parametrize("m, o, lo, hi, want", [
    (2.0, 0.1, -1.5, 1.5, (-0.8, 0.7)),       # the follower turns twice as far: the leader half its range
    (-2.0, 0.0, -1.0, 0.5, (-0.25, 0.5)),     # a follower turning the other way bounds the other side
    (1.0, 0.0, -2.0, 2.0, (-1.5, 1.5)),       # a follower with room to spare narrows nothing
])
def test_a_leader_moves_only_as_far_as_its_mimic_follower_can(tmp_path, m, o, lo, hi, want):
    path = tmp_path / "arm.urdf"
    path.write_text(_MIMIC_ARM.format(m=m, o=o, lo=lo, hi=hi))
    model = urdf.build(str(path))
    i = model.joint_index("shoulder")
    assert (model.lower[i], model.upper[i]) == pytest.approx(want)
    assert model.joint_names == ("shoulder", "wrist")   # the follower is never commanded
    assert bool(model.meta["narrowed_by_followers"]) == (want != (-1.5, 1.5))


@pytest.mark.parametrize("m, o, said", [(1.0, 4.0, "wherever 'shoulder' stands"), (0.0, 2.0, "stands at 114.6°")])
def test_a_mimic_follower_that_cannot_stay_in_its_range_is_refused(tmp_path, m, o, said):
    path = tmp_path / "arm.urdf"
    path.write_text(_MIMIC_ARM.format(m=m, o=o, lo=-1.5, hi=1.5))
    with pytest.raises(ConfigError) as e:
        urdf.build(str(path))
    assert "joint 'elbow' (mimic of 'shoulder'" in str(e.value) and said in str(e.value)


def test_a_missing_limit_is_named_with_how_to_supply_it():
    with pytest.raises(ConfigError) as e:
        urdf.build(erd(CONTINUOUS))
    msg = str(e.value)
    assert "joint 'joint1'" in msg and "velocity" in msg and "[joints.joint1]" in msg


def test_ik_reaches_reachable_targets():
    from hil.kinematics.ik import Task, ik_lm

    for ref, side, frame in ((ARM, {}, "gripper_frame_link"), (HUMANOID, G1_SOLES, "left_rubber_hand")):
        model = urdf.build(erd(ref), side)
        rng = np.random.default_rng(11)
        ok = 0
        for _ in range(40):
            T = model.fk_frame(rng.uniform(model.lower, model.upper), frame)
            res = ik_lm(model, [Task(frame, T)], model.home, restarts=30)
            if res.success:
                assert np.abs(model.fk_frame(res.q, frame) - T).max() < 1e-4
                assert model.within_limits(res.q)
                ok += 1
        assert ok >= 38, f"{model.name}: {ok}/40"


def test_humanoid_soles_are_at_the_bottom_of_the_feet():
    m = urdf.build(erd(HUMANOID), G1_SOLES)
    assert m.kind == "humanoid" and m.tool_frame == "l_sole"
    zero = np.zeros(m.n)
    l, r = m.fk_frame(zero, "l_sole"), m.fk_frame(zero, "r_sole")
    assert np.allclose(l[:3, :3], np.eye(3), atol=1e-9)         # flat, axes of the base
    assert l[2, 3] == pytest.approx(r[2, 3]) and l[1, 3] == pytest.approx(-r[1, 3], abs=1e-6)
    # every point of every foot shape is above its sole
    from hil.safety import _collision_shapes

    caps, _ = _collision_shapes(m)
    poses = m.fk_frames(zero)
    for c in caps:
        if int(c[0]) == m.frame_link[m.frame_index("l_sole")]:
            T = poses[1 + int(c[0])]
            for p in (c[1:4], c[4:7]):
                assert (T[:3, :3] @ p + T[:3, 3])[2] - c[7] >= l[2, 3] - 1e-9
    from hil.safety import SafetyChecker

    assert SafetyChecker(m).check(zero)        # it stands: COM over the feet, nothing collides


MALFORMED = {
    "missing parent": ('<joint name="j1" type="revolute"><child link="b"/><limit lower="-1" upper="1" velocity="1"/>'
                       '</joint>', "joint 'j1'", "<parent"),
    "unknown type": ('<joint name="j1" type="hinge"><parent link="a"/><child link="b"/></joint>',
                     "joint 'j1'", "'hinge'"),
    "nan origin": ('<joint name="j1" type="revolute"><parent link="a"/><child link="b"/>'
                   '<origin xyz="0 nan 0"/><limit lower="-1" upper="1" velocity="1"/></joint>', "joint 'j1'", "finite"),
    "missing limits": ('<joint name="j1" type="revolute"><parent link="a"/><child link="b"/></joint>',
                       "joint 'j1'", "limits"),
    "unknown link": ('<joint name="j1" type="revolute"><parent link="a"/><child link="zz"/>'
                     '<limit lower="-1" upper="1" velocity="1"/></joint>', "joint 'j1'", "'zz'"),
    "cycle": ('<joint name="j1" type="revolute"><parent link="a"/><child link="b"/>'
              '<limit lower="-1" upper="1" velocity="1"/></joint>'
              '<joint name="j2" type="revolute"><parent link="b"/><child link="a"/>'
              '<limit lower="-1" upper="1" velocity="1"/></joint>', "cycle", ""),
    "two parents": ('<link name="c"/><joint name="j1" type="revolute"><parent link="a"/><child link="b"/>'
                    '<limit lower="-1" upper="1" velocity="1"/></joint>'
                    '<joint name="j2" type="revolute"><parent link="c"/><child link="b"/>'
                    '<limit lower="-1" upper="1" velocity="1"/></joint>', "joint 'j2'", "already has a parent"),
    "bad number": ('<joint name="j1" type="revolute"><parent link="a"/><child link="b"/>'
                   '<limit lower="-1" upper="one" velocity="1"/></joint>', "joint 'j1'", "not a number"),
    "bad inertia": ('<joint name="j1" type="revolute"><parent link="a"/><child link="b"/>'
                    '<limit lower="-1" upper="1" velocity="1"/></joint>'
                    '<link name="d"><inertial><mass value="1"/><inertia ixx="heavy" iyy="1" izz="1"/></inertial></link>',
                    "line 1", 'ixx="heavy"'),
    "bad mimic": ('<joint name="j1" type="revolute"><parent link="a"/><child link="b"/>'
                  '<limit lower="-1" upper="1" velocity="1"/><mimic joint="j0" multiplier="nan"/></joint>',
                  "<mimic", "finite"),
    "bad colour": ('<material name="m"><color rgba="1 0 zero 1"/></material>', "<color", "finite"),
    "empty geometry": ('<joint name="j1" type="revolute"><parent link="a"/><child link="b"/>'
                       '<limit lower="-1" upper="1" velocity="1"/></joint>'
                       '<link name="d"><collision><geometry/></collision></link>', "link 'd'", "geometry"),
    "missing mesh": ('<joint name="j1" type="revolute"><parent link="a"/><child link="b"/>'
                     '<limit lower="-1" upper="1" velocity="1"/></joint>'
                     '<link name="d"><collision><geometry><mesh filename="package://nowhere/x.stl"/></geometry>'
                     '</collision></link><joint name="jd" type="fixed"><parent link="b"/><child link="d"/></joint>',
                     "link 'd'", "nowhere"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_urdfs_are_refused_naming_the_element(tmp_path, case):
    body, element, detail = MALFORMED[case]
    links = '<link name="a"/>' + ('' if case == "missing parent" else '<link name="b"/>')
    path = tmp_path / "bad.urdf"
    path.write_text(f'<?xml version="1.0"?><robot name="bad">{links}{body}</robot>')
    with pytest.raises(ConfigError) as e:
        robots.load(str(path))
    assert str(path) in str(e.value) and element in str(e.value) and detail in str(e.value), str(e.value)


@pytest.mark.parametrize("data", [b"", b"\x00\xff\xfe garbage", b"<robot name='x'></robot>", b"<robot><link/></robot>",
                                  b"<notarobot/>", "<robot name='é'><link name='ä'/></robot>".encode("latin-1")])
def test_any_bytes_give_one_clear_error(tmp_path, data):
    path = tmp_path / "x.urdf"
    path.write_bytes(data)
    with pytest.raises(HilError) as e:
        robots.load(str(path))
    assert str(path) in str(e.value)


def test_a_side_file_names_the_urdf_and_adds_to_it(tmp_path):
    shutil.copy(erd(CONTINUOUS), tmp_path / "pendulum.urdf")
    side = tmp_path / "pendulum.toml"
    side.write_text('[robot]\nname = "pendulum"\nurdf = "pendulum.urdf"\ntool_frame = "tip"\n'
                    '[joints.joint1]\nvelocity_deg_s = 90\n[joints.joint2]\nvelocity_deg_s = 45\n'
                    '[poses]\nhome = { joint1 = 30 }\n'
                    '[[frame]]\nname = "tip"\nlink = "link2"\ntranslation = [0, 0, 0.5]\n')
    m = robots.load(str(side))
    assert m.name == "pendulum" and m.spec == str(side.resolve())
    assert math.degrees(m.home[0]) == pytest.approx(30)
    T2 = m.fk_frame(m.home, "link2")
    assert np.allclose(m.fk(m.home)[:3, 3], T2[:3, 3] + T2[:3, 2] * 0.5)
    bad = tmp_path / "bad.toml"
    bad.write_text(side.read_text().replace("translation = [0, 0, 0.5]", "translation = [0, 0, 999999999999999999]"))
    with pytest.raises(ConfigError, match="'tip': translation: 1e\\+18 m is past 10000 m: a unit mistake"):
        robots.load(str(bad))
    # past TOML's own bound for an integer (2**63), it is refused as the file is read
    bad.write_text(side.read_text().replace("translation = [0, 0, 0.5]", "translation = [0, 0, 99999999999999999999]"))
    with pytest.raises(ConfigError, match="bad.toml: the integer 999999999999… \\(20 digits\\) is too large"):
        robots.load(str(bad))
    bad.write_text('[robot]\nurdf = "pendulum.urdf"\n[joints.joint1]\nvelocity_deg_s = 90\nspeed = 3\n')
    with pytest.raises(ConfigError, match="unknown key 'speed'"):
        robots.load(str(bad))
    bad.write_text('[robot]\nurdf = "nowhere.urdf"\n')
    with pytest.raises(ConfigError, match="nowhere.urdf"):
        robots.load(str(bad))


def test_the_shipped_so101_comes_from_its_package():
    m = robots.load("so101")
    assert m.joint_names == ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")
    assert m.tool_frame == "gripper_frame_link" and m.board == "servos" and m.spec == "so101"


def test_the_model_is_cached_and_rebuilt_when_the_file_changes(tmp_path):
    src = tmp_path / "arm.urdf"
    shutil.copy(erd(CONTINUOUS), src)
    side = PENDULUM_SPEEDS
    first = urdf.build(str(src), side)
    cached = list((tmp_path / "cache" / "hil" / "robots").glob("*.json"))
    assert len(cached) == 1
    again = urdf.build(str(src), side)
    q = np.array([0.3, -0.7])
    assert np.array_equal(first.fk_frames(q), again.fk_frames(q))
    assert [s for s in first.shapes] == [s for s in again.shapes]
    # the cache holds what a model is built from; an edit of the URDF builds it anew
    src.write_text(src.read_text().replace('<origin xyz="0 0 0.1"', '<origin xyz="0 0 0.3"', 1))
    changed = urdf.build(str(src), side)
    assert len(list((tmp_path / "cache" / "hil" / "robots").glob("*.json"))) == 2
    assert not np.array_equal(first.fk_frames(q), changed.fk_frames(q)) or \
        '<origin xyz="0 0 0.1"' not in (tmp_path / "arm.urdf").read_text()
    # a corrupt cache entry is built again, not trusted
    for f in (tmp_path / "cache" / "hil" / "robots").glob("*.json"):
        f.write_text(json.dumps({"name": 3}))
    assert np.array_equal(urdf.build(str(src), side).fk_frames(q), changed.fk_frames(q))
    # the same side file in two places: each model names its own (a copy is another user's file)
    here, there = tmp_path / "a" / "side.toml", tmp_path / "b" / "side.toml"
    assert urdf.build(str(src), side, side_path=str(here)).source == str(here)
    assert urdf.build(str(src), side, side_path=str(there)).source == str(there)


def test_bounding_capsules_hold_every_point():
    rng = np.random.default_rng(5)
    for _ in range(200):
        pts = rng.normal(size=(rng.integers(1, 60), 3)) * rng.uniform(0.01, 1.0, size=3)
        p0, p1, r = urdf.bounding_capsule(pts)
        d = p1 - p0
        t = np.clip((pts - p0) @ d / max(d @ d, 1e-300), 0, 1) if d @ d > 0 else np.zeros(len(pts))
        dist = np.linalg.norm(pts - (p0 + np.outer(t, d)), axis=1)
        assert dist.max() <= r + 1e-12


def test_the_workspace_is_a_reach_sphere_unless_configured():
    from hil.safety import WORKSPACE, SafetyChecker

    full = urdf.build(erd(ARM))
    checker = SafetyChecker(full)
    rng = np.random.default_rng(2)
    Q = rng.uniform(full.lower, full.upper, size=(300, full.n))
    assert not any(checker.check(q).flags & WORKSPACE for q in Q)   # the whole chain's length: never left
    small = urdf.build(erd(ARM), {"workspace": {"reach_m": 0.2}})
    checker = SafetyChecker(small)
    far = [q for q in Q if np.linalg.norm(small.fk(q)[:3, 3]) > 0.2 + 2e-3]
    near = [q for q in Q if np.linalg.norm(small.fk(q)[:3, 3]) < 0.2 - 2e-3]
    assert far and near
    assert all(checker.check(q).flags & WORKSPACE for q in far)
    assert not any(checker.check(q).flags & WORKSPACE for q in near)
    assert "reach sphere (r = 200 mm)" in " ".join(checker.check(far[0]).reasons)


ONE_LINK = """<robot name="r"><link name="base"/><link name="l1"><collision><geometry><mesh filename="{mesh}"/>
</geometry></collision><inertial><mass value="1"/><inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/>
</inertial></link><joint name="j1" type="revolute"><parent link="base"/><child link="l1"/><axis xyz="0 0 1"/>
<limit lower="-1" upper="1" effort="1" velocity="1"/></joint></robot>"""


def _stl(path: Path) -> None:
    """A binary STL of one triangle."""
    import struct

    path.write_bytes(b"\0" * 80 + struct.pack("<I", 1) + struct.pack("<12fH", 0, 0, 1, 0, 0, 0, 0.1, 0, 0, 0, 0.1, 0, 0))


@pytest.mark.parametrize("mesh,refused", [
    ("../meshes/ok.stl", None), ("package://robot/meshes/ok.stl", None), ("package:///ok_here.stl", None),
    ("/etc/passwd", "outside the URDF's folder tree"), ("file:///etc/passwd", "outside the URDF's folder tree"),
    ("../../../../../../../../etc/passwd", "outside the URDF's folder tree"),
    ("package://../../etc/passwd", "is not a package name"), ("package:///../meshes/ok.stl", "outside package ''"),
    ("../meshes/away.stl", "points to /etc/passwd"), ("../meshes/pipe.stl", "not a regular file"),
    ("package://robot/meshes/gone.stl", "the package was found, the file is missing from it"),
    ("package://nowhere/x.stl", "package 'nowhere' not found"),
    ("../meshes/notes.stl", "no finite vertices"),
])
def test_mesh_paths_stay_inside_the_robots_own_folders(tmp_path, mesh, refused):
    """A URDF's meshes are read only inside its package, its own folder tree or a declared package
    root: `..`, absolute paths, file:// and symlinks pointing away are refused naming the path,
    special files too; a missing file names the file, not the package."""
    root = tmp_path / "robot"
    (root / "urdf").mkdir(parents=True)
    (root / "meshes").mkdir()
    _stl(root / "meshes" / "ok.stl")
    _stl(root / "urdf" / "ok_here.stl")
    (root / "meshes" / "away.stl").symlink_to("/etc/passwd")
    (root / "meshes" / "notes.stl").write_text("not a mesh at all\n" * 20)
    os.mkfifo(root / "meshes" / "pipe.stl")
    path = root / "urdf" / "r.urdf"
    path.write_text(ONE_LINK.format(mesh=mesh))
    if refused is None:
        assert robots.load(str(path)).n == 1
        return
    with pytest.raises(ConfigError, match=re.escape(refused)) as e:
        robots.load(str(path))
    assert "link 'l1'" in str(e.value) and mesh in str(e.value)


def test_entities_are_refused_before_any_is_expanded(tmp_path):
    path = tmp_path / "r.urdf"
    path.write_text('<?xml version="1.0"?>\n<!DOCTYPE robot [<!ENTITY x SYSTEM "file:///etc/passwd">]>\n'
                    '<robot name="&x;"><link name="base"/></robot>\n')
    with pytest.raises(ConfigError, match=r"DOCTYPE or entities|external entity"):
        robots.load(str(path))


def test_a_urdf_whose_tree_stands_on_two_legs_is_a_humanoid_without_a_side_file():
    """URDF files leave the base unattached to the world (no floating joint), so a kit's humanoid
    came in as an arm. Its tree says what it is: two chains of three joints or more hanging from
    one link well above their last links, the lowest at zero; a side file's kind still decides."""
    talos = urdf.build(erd(TALOS))
    assert talos.kind == "humanoid" and talos.floating
    assert any("stands on two legs" in n for n in talos.meta["notes"])
    assert talos.frame_offset("l_sole")[0] == talos.link_names.index("leg_left_6_link")
    assert talos.frame_offset("r_sole")[0] == talos.link_names.index("leg_right_6_link")
    assert urdf.build(erd(TALOS), {"robot": {"kind": "arm"}}).kind == "arm"
    for arm in (ARM, ERD + "panda_description/urdf/panda.urdf", ERD + "ur_description/urdf/ur5_robot.urdf"):
        assert urdf.build(erd(arm)).kind == "arm", arm


FOLDED_BIPED = """<robot name="folded">
  <link name="pelvis"><inertial><mass value="1"/><inertia ixx="1e-3" iyy="1e-3" izz="1e-3" ixy="0" ixz="0" iyz="0"/></inertial>
    <collision><geometry><box size="0.1 0.2 0.05"/></geometry></collision></link>
{legs}
</robot>"""
LEG = """  <link name="{s}_thigh"><inertial><mass value="0.2"/><inertia ixx="1e-4" iyy="1e-4" izz="1e-4" ixy="0" ixz="0" iyz="0"/></inertial>
    <collision><origin xyz="0 0 -0.06"/><geometry><box size="0.03 0.03 0.12"/></geometry></collision></link>
  <joint name="{s}_hip" type="revolute"><parent link="pelvis"/><child link="{s}_thigh"/><origin xyz="0 {y} -0.03"/>
    <axis xyz="0 1 0"/><limit lower="-1" upper="1" velocity="5" effort="1"/></joint>
  <link name="{s}_shin"><inertial><mass value="0.2"/><inertia ixx="1e-4" iyy="1e-4" izz="1e-4" ixy="0" ixz="0" iyz="0"/></inertial>
    <collision><origin xyz="0 0 -0.1"/><geometry><box size="0.03 0.03 0.2"/></geometry></collision></link>
  <joint name="{s}_knee" type="revolute"><parent link="{s}_thigh"/><child link="{s}_shin"/><origin xyz="0 0 -0.12"/>
    <axis xyz="0 1 0"/><limit lower="-1" upper="1" velocity="5" effort="1"/></joint>
  <link name="{s}_foot"><inertial><mass value="0.1"/><inertia ixx="1e-4" iyy="1e-4" izz="1e-4" ixy="0" ixz="0" iyz="0"/></inertial>
    <collision><origin xyz="0.02 0 -0.01"/><geometry><box size="0.1 0.05 0.02"/></geometry></collision></link>
  <joint name="{s}_ankle" type="revolute"><parent link="{s}_shin"/><child link="{s}_foot"/><origin xyz="0 0 -0.1"/>
    <axis xyz="0 1 0"/><limit lower="-1" upper="1" velocity="5" effort="1"/></joint>"""


def test_feet_found_by_the_tree_are_the_legs_last_links_even_where_a_shin_hangs_lower(tmp_path):
    """The Open Duck Mini's URDF at zero has its shins below its feet: the lowest links end in the
    feet below them, which are the soles' links (here the shins reach 20 cm down, the feet stop at 12)."""
    path = tmp_path / "folded.urdf"
    path.write_text(FOLDED_BIPED.format(legs="\n".join(LEG.format(s=s, y=y) for s, y in (("l", 0.06), ("r", -0.06)))))
    m = urdf.build(str(path))
    assert m.kind == "humanoid"
    assert m.frame_offset("l_sole")[0] == m.link_names.index("l_foot")
    assert m.frame_offset("r_sole")[0] == m.link_names.index("r_foot")
    assert any("feet found by the tree: l_foot (left), r_foot (right)" in n for n in m.meta["notes"])


TWO_BLOCKS = """<robot name="blocks"><link name="base"><collision><origin xyz="0 0 0.05"/><geometry>{a}</geometry>
</collision></link><link name="hub"><inertial><mass value="0.1"/><inertia ixx="0.001" iyy="0.001" izz="0.001"
ixy="0" ixz="0" iyz="0"/></inertial></link><link name="arm"><collision><origin xyz="0.2 0 0.05"/><geometry>{b}
</geometry></collision><inertial><mass value="1"/><inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/>
</inertial></link><joint name="swing" type="revolute"><parent link="base"/><child link="hub"/><origin xyz="0.2 0 0"/>
<axis xyz="0 0 1"/><limit lower="-3" upper="3" effort="1" velocity="1"/></joint><joint name="lift" type="revolute">
<parent link="hub"/><child link="arm"/><axis xyz="0 1 0"/><limit lower="-1" upper="1" effort="1" velocity="1"/>
</joint></robot>"""


def _box_stl(path: Path, half: tuple[float, float, float]) -> None:
    """A binary STL of a closed box centred on the origin."""
    import struct

    c = [np.array([sx, sy, sz]) * half for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)]
    faces = [(0, 1, 3), (0, 3, 2), (4, 6, 7), (4, 7, 5), (0, 4, 5), (0, 5, 1), (2, 3, 7), (2, 7, 6), (0, 2, 6),
             (0, 6, 4), (1, 5, 7), (1, 7, 3)]
    body = b"".join(struct.pack("<12fH", 0, 0, 0, *c[i], *c[j], *c[k], 0) for i, j, k in faces)
    path.write_bytes(b"\0" * 80 + struct.pack("<I", len(faces)) + body)


def test_a_collision_of_shapes_around_meshes_says_so_and_where_to_look(tmp_path):
    """A mesh is checked as the shapes around it, which can reach past its faces: a collision
    between such shapes says so, names `hil twin --shapes` and the side file's allowance; one
    between the file's own boxes says nothing of the kind."""
    from hil.safety import COLLISION, SafetyChecker

    _box_stl(tmp_path / "slab.stl", (0.04, 0.03, 0.01))
    box = '<box size="0.08 0.06 0.02"/>'
    for geometry, hinted in (('<mesh filename="slab.stl"/>', True), (box, False)):
        path = tmp_path / f"blocks_{hinted}.urdf"
        path.write_text(TWO_BLOCKS.format(a=geometry, b=geometry))
        model = robots.load(str(path))
        assert ("mesh_shapes" in model.meta) == hinted
        checker = SafetyChecker(model)
        folded = np.array([2.9, 0.0])   # the arm's block swung back onto the base's
        res = checker.check(folded)
        assert res.flags & COLLISION, res.reasons
        said = " ".join(res.reasons)
        assert re.search(r"self-collision: base(\.\d)? and arm(\.\d)? overlap", said), said
        assert ("shapes around their meshes" in said and "--shapes" in said
                and "[collision] allowed" in said) == hinted, said
        assert not checker.check(np.zeros(2)).flags & COLLISION


BRACKETS = """<robot name="brackets"><link name="base"><collision><origin xyz="-0.017 0 0.05"/><geometry>{g}
</geometry></collision></link><link name="hub"><inertial><mass value="0.1"/><inertia ixx="0.001" iyy="0.001"
izz="0.001" ixy="0" ixz="0" iyz="0"/></inertial></link><link name="arm"><collision><origin xyz="0.017 0 0.05"
rpy="0 0 0.4"/><geometry>{g}</geometry></collision><inertial><mass value="1"/><inertia ixx="0.01" iyy="0.01"
izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link><joint name="swing" type="revolute"><parent link="base"/>
<child link="hub"/><axis xyz="0 0 1"/><limit lower="-3" upper="3" effort="1" velocity="1"/></joint>
<joint name="lift" type="revolute"><parent link="hub"/><child link="arm"/><axis xyz="0 1 0"/>
<limit lower="-1" upper="1" effort="1" velocity="1"/></joint></robot>"""


def test_flat_brackets_are_checked_as_their_boxes_not_as_capsules_that_reach_past_their_faces(tmp_path):
    """Two servo brackets' meshes (1 cm thick, 6 × 8 cm) face to face 24 mm apart, the way a
    humanoid's knees stand: each is checked as the box around it, turned as the mesh is (the
    arm's is turned 0.4 rad), and they are clear of each other; the capsules around such a slab
    reach 25 mm past its faces, and would overlap."""
    from hil.robots.urdf import bounding_capsules
    from hil.safety import COLLISION, SafetyChecker, check_shapes

    _box_stl(tmp_path / "slab.stl", (0.005, 0.03, 0.04))
    path = tmp_path / "brackets.urdf"
    path.write_text(BRACKETS.format(g='<mesh filename="slab.stl"/>'))
    model = robots.load(str(path))
    shapes = [s for s in check_shapes(model) if s.kind == "box"]   # each mesh: its box, and its capsules
    assert len(shapes) == 2
    slab = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)]) * [0.005, 0.03, 0.04]
    turn = np.array([[math.cos(0.4), -math.sin(0.4), 0], [math.sin(0.4), math.cos(0.4), 0], [0, 0, 1]])
    for sh, placed in zip(shapes, (slab + [-0.017, 0, 0.05], slab @ turn.T + [0.017, 0, 0.05])):
        assert sorted(sh.half) == pytest.approx([0.005, 0.03, 0.04], abs=1e-6)   # the slab itself
        gaps = np.linalg.norm(sh.corners()[:, None, :] - placed[None, :, :], axis=2)
        assert gaps.min(axis=0).max() < 1e-6 and gaps.min(axis=1).max() < 1e-6   # its corners are the slab's
    checker = SafetyChecker(model)
    from hil.safety import _kernel as SK
    assert len(np.unique(checker.pairs[:, SK.P_PARTS])) == 1   # base and arm: checked against each other
    for q in ([0.0, 0.0], [0.1, 0.0], [-0.1, 0.2]):
        assert not checker.check(np.array(q)).flags & COLLISION, checker.check(np.array(q)).reasons
    assert checker.check(np.array([2.0, 0.0])).flags & COLLISION   # swung through the other: caught
    # the capsules around such a slab (a mesh's many vertices on its faces) reach past its broad faces
    g = np.linspace(-1, 1, 7)
    grid = np.array([[x, y, z] for x in g for y in g for z in g if max(abs(x), abs(y), abs(z)) == 1])
    capsules = bounding_capsules(grid * [0.005, 0.03, 0.04])
    reach = max(max(abs(p0[0]), abs(p1[0])) + r for p0, p1, r in capsules) - 0.005
    assert reach > 0.012, reach                         # by more than half the gap


def test_a_mesh_bounded_both_ways_is_written_as_its_box_and_read_back_the_same(tmp_path):
    """`hil urdf` writes each part once (a tool reading the file would take two bounds as one larger
    part): a mesh's box, turned as it was fitted, which reads back corner for corner."""
    from hil.robots.model import one_bound_each
    from hil.robots.urdf_export import to_urdf

    _box_stl(tmp_path / "slab.stl", (0.005, 0.03, 0.04))
    path = tmp_path / "brackets.urdf"
    path.write_text(BRACKETS.format(g='<mesh filename="slab.stl"/>'))
    model = robots.load(str(path))
    once = one_bound_each(model.shapes)
    assert [s.kind for s in once] == ["box", "box"] and len(model.shapes) > 2
    out = tmp_path / "written.urdf"
    out.write_text(to_urdf(model))
    again = robots.load(str(out))
    assert [s.kind for s in again.shapes] == ["box", "box"]
    for a, b in zip(once, again.shapes):
        gaps = np.linalg.norm(a.corners()[:, None, :] - b.corners()[None, :, :], axis=2)
        assert gaps.min(axis=0).max() < 1e-9 and gaps.min(axis=1).max() < 1e-9


PYRAMID_APEX, PYRAMID_BASE = (0.02, 0.01, 0.09), [(0, 0, 0), (0.06, 0, 0), (0.06, 0.03, 0), (0, 0.03, 0)]


def _pyramid_stl(path: Path) -> Path:
    """A square pyramid as a binary STL: each triangle lists its corners (the apex four times)."""
    import struct

    apex, base = PYRAMID_APEX, PYRAMID_BASE
    faces = [(base[0], base[2], base[1]), (base[0], base[3], base[2])]
    faces += [(base[k], base[(k + 1) % 4], apex) for k in range(4)]
    path.write_bytes(b"\0" * 80 + struct.pack("<I", len(faces))
                     + b"".join(struct.pack("<12fH", 0, 0, 0, *(c for p in f for c in p), 0) for f in faces))
    return path


def test_a_mesh_is_bounded_by_its_points_however_often_its_triangles_list_them(tmp_path):
    """An STL lists each triangle's corners: a square pyramid's apex four times, its base corners three
    or four. The shapes fitted to it are those of its five points, each once."""
    apex, base = PYRAMID_APEX, PYRAMID_BASE
    stl = _pyramid_stl(tmp_path / "pyramid.stl")
    shapes, lo, hi = urdf.mesh_bounds(stl, np.ones(3), np.eye(4))
    points = np.array([apex, *base], dtype=np.float32).astype(float)
    once = urdf.bounding_shapes(points)
    assert len(shapes) == len(once)
    for got, want in zip(shapes, once):
        assert got[0] == want[0]
        for a, b in zip(got[1:], want[1:]):
            assert np.allclose(a, b, atol=1e-12), (got, want)
    assert np.allclose(lo, points.min(axis=0)) and np.allclose(hi, points.max(axis=0))


def test_a_mesh_read_leaves_nothing_behind_for_a_rare_collection(tmp_path):
    """trimesh's meshes are reference cycles: in a command's process, which collects rarely, each
    read mesh's arrays would stay until a collection came; they are gone when mesh_bounds returns."""
    import gc

    import trimesh

    from hil.process_life import COMMAND_GC_THRESHOLD

    stl = _pyramid_stl(tmp_path / "pyramid.stl")
    before = gc.get_threshold()
    gc.collect()
    gc.set_threshold(*COMMAND_GC_THRESHOLD)
    try:
        urdf.mesh_bounds(stl, np.ones(3), np.eye(4))
        left = [o for o in gc.get_objects() if isinstance(o, trimesh.Trimesh)]
    finally:
        gc.set_threshold(*before)
    assert not left, left
