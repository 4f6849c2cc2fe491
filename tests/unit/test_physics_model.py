"""Physics without processes: the MuJoCo model built from hil's own robot model, servo tables as
data (and their bad input), the compensated walk replayed open-loop on a MuJoCo model built
independently from `hil urdf`'s file, as an outside check builds it."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

import hil.robots
from hil.dynamics import inverse_dynamics
from hil.errors import ConfigError
from hil.motion import walking
from hil.robots.servos import parse_table, servo_table
from hil.robots.urdf_export import to_urdf

mujoco = pytest.importorskip("mujoco")

from hil.physics.build import build  # noqa: E402 - needs MuJoCo, skipped above without it
from hil.physics.physics_plant import PhysicsPlant  # noqa: E402


@pytest.fixture(scope="module")
def h17():
    return hil.robots.load("humanoid17")


@pytest.mark.parametrize("robot", ["puma560", "humanoid17", "so101"])
def test_the_physics_model_is_the_robot_model(robot):
    """Every link where hil's FK puts it, gravity's torques those of hil's inverse dynamics."""
    model = hil.robots.load(robot)
    pm = build(model)
    d = mujoco.MjData(pm.model)
    rng = np.random.default_rng(2)
    for _ in range(5):
        q = rng.uniform(model.lower, model.upper)
        d.qpos[:] = pm.home_qpos
        d.qpos[pm.qpos_of_joint] = q
        d.qvel[:] = 0.0
        mujoco.mj_forward(pm.model, d)
        base = pm.base_body
        R0, p0 = d.xmat[base].reshape(3, 3), d.xpos[base]
        F = model.fk_frames(q)
        for i, name in enumerate(model.link_names):
            b = pm.model.body(name).id
            assert np.allclose(R0.T @ (d.xpos[b] - p0), F[1 + i][:3, 3], atol=1e-9)
            assert np.allclose(R0.T @ d.xmat[b].reshape(3, 3), F[1 + i][:3, :3], atol=1e-9)
        if not pm.floating:
            gravity = inverse_dynamics(model, q, np.zeros(model.n), np.zeros(model.n))
            assert np.allclose(d.qfrc_bias[pm.dof_of_joint], gravity, atol=1e-9)


def test_a_humanoid_stands_on_its_servos_and_falls_limp(h17):
    """On its stand until its servos hold, then on its feet; torque off, it falls."""
    plant = PhysicsPlant(build(h17), h17.home.copy())
    on = np.ones(h17.n, dtype=bool)
    t = 0.0
    for _ in range(300):   # 1.5 s with every servo holding home
        t += 0.005
        plant.drive(h17.home, on)
        plant.advance(t)
    assert not plant.on_stand and plant.imu() is not None
    assert plant.truth()["max_tilt_deg"] < 5 and not plant.truth()["fell"]
    assert np.degrees(np.abs(plant.q - h17.home)).max() < 5       # sags, a little
    for _ in range(400):
        t += 0.005
        plant.drive(h17.home, ~on)
        plant.advance(t)
    assert plant.truth()["fell"]


def test_servo_tables_take_presets_and_refuse_bad_numbers(h17):
    table = servo_table(h17)
    assert table.declared and table.joint(0).kp_nm_per_rad == 20.0 and table.joint(0).torque_limit_nm == 1.5
    knee = parse_table({"preset": "XL430-W250", "joint": {"l_knee": {"torque_limit_nm": 2.5}}}, h17.joint_names, "x")
    assert knee.joint(h17.joint_index("l_knee")).torque_limit_nm == 2.5
    assert knee.joint(0).torque_limit_nm == 1.5
    for bad, says in (({"kp_nm_per_rad": -3}, "positive"), ({"kp_nm_per_rad": math.nan}, "positive"),
                      ({"preset": "XL999"}, "not one of"), ({"damping": 1}, "unknown key"),
                      ({"torque_speed": [5, 2]}, "below"), ({"joint": {"nose": {}}}, "no joint"),
                      ({"compensation_margin": 0.5}, "compensation_margin = 0.5 must be 1 … 3"),
                      ({"compensation_margin": math.inf}, "compensation_margin = inf must be 1 … 3"),
                      ({"compensation_margin": "1"}, "must be a number")):
        with pytest.raises(ConfigError, match=says):
            parse_table({"preset": "XL430-W250", **bad}, h17.joint_names, "the robot file")
    assert not servo_table(hil.robots.load("examples/robots/g1.toml")).declared   # no [servo]: ideal, no compensation
    from hil.robots.servos import presets

    # identified numbers are compensated as they are; estimated ones with a margin
    assert presets()["XM430-W350-OP3"].compensation_margin == 1.0 and table.joint(0).compensation_margin == 1.5


def test_a_servo_s_torque_falls_with_speed_along_its_line():
    s = parse_table({"preset": "XL330-M288"}, ("j",), "x").joint(0)
    assert s.available_torque(1.0) == s.torque_limit_nm
    assert s.available_torque(6.65) == pytest.approx(s.torque_limit_nm / 2)
    assert s.available_torque(20.0) == 0.0


def _independent_model(urdf: str, kp: float, mass: float, friction: float):
    """humanoid17 as an outside check builds it: hil's URDF loaded by MuJoCo, a free base, a floor,
    position servos with humanoid17's numbers (kp changed), masses and friction changed."""
    spec = mujoco.MjSpec.from_file(urdf)
    spec.option.timestep = 0.0005
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    spec.worldbody.first_body().add_freejoint()
    floor = spec.worldbody.add_geom()
    floor.type, floor.size = mujoco.mjtGeom.mjGEOM_PLANE, [0, 0, 1]
    for g in spec.geoms:
        g.friction = [friction, 0.005, 0.0001]
    names = []
    for j in spec.joints:
        if j.type == mujoco.mjtJoint.mjJNT_HINGE:
            j.damping, j.armature, j.frictionloss = [0.1, 0.0, 0.0], 0.004, 0.05
            a = spec.add_actuator()
            a.target, a.trntype = j.name, mujoco.mjtTrn.mjTRN_JOINT
            a.set_to_position(kp=kp)
            a.forcelimited, a.forcerange = mujoco.mjtLimited.mjLIMITED_TRUE, [-1.5, 1.5]
            names.append(j.name)
    m = spec.compile()
    m.body_mass[:] *= mass
    m.body_inertia[:] *= mass
    return m, names


def _replay(urdf, t, Q, joint_names, **variation) -> tuple[float, float]:
    """(x travel of the base in metres, largest tilt in degrees) of commands replayed open loop."""
    m, names = _independent_model(urdf, **variation)
    d = mujoco.MjData(m)
    act = [names.index(n) for n in joint_names]
    d.qpos[[m.jnt_qposadr[m.joint(n).id] for n in joint_names]] = Q[0]
    mujoco.mj_forward(m, d)
    d.qpos[2] -= min(d.geom_xpos[i][2] - m.geom_rbound[i] for i in range(1, m.ngeom))   # onto the floor
    ctrl = np.zeros(m.nu)
    ctrl[act] = Q[0]
    d.ctrl[:] = ctrl
    for _ in range(4000):
        mujoco.mj_step(m, d)
    x0, tilt, per = d.qpos[0], 0.0, int(round((t[1] - t[0]) / m.opt.timestep))
    for k in range(len(Q)):
        ctrl[act] = Q[k]
        d.ctrl[:] = ctrl
        for _ in range(per):
            mujoco.mj_step(m, d)
        w, x, y, z = d.qpos[3:7]
        tilt = max(tilt, math.degrees(math.acos(max(-1.0, min(1.0, 1 - 2 * (x * x + y * y))))))
    return d.qpos[0] - x0, tilt


@pytest.mark.slow
@pytest.mark.parametrize("knee_stretched", [False, True], ids=["bent", "stretched"])
def test_the_compensated_walk_holds_on_servos_softer_heavier_or_slipperier_than_planned(h17, tmp_path, knee_stretched):
    """The commands of a planned walk, replayed open loop in physics built apart from hil (from its
    URDF): ≥ 90 % of the planned distance, upright, with servos 20 % softer, links 15 % heavier and
    30 % less friction than planned; without the compensation the soft servos let it fall."""
    urdf = tmp_path / "h17.urdf"
    urdf.write_text(to_urdf(h17))
    res = walking.plan(h17, walking.WalkParams(steps=6, knee_stretched=knee_stretched), say=lambda s: None)
    planned = res.com_w[-1, 0] - res.com_w[0, 0]
    for variation in (dict(kp=20.0, mass=1.0, friction=1.0), dict(kp=16.0, mass=1.15, friction=0.7),
                      dict(kp=25.0, mass=0.85, friction=1.0)):
        travel, tilt = _replay(str(urdf), res.t, res.q_cmd, h17.joint_names, **variation)
        assert travel >= 0.9 * planned and tilt < 20, (variation, travel / planned, tilt)
    travel, tilt = _replay(str(urdf), res.t, res.q, h17.joint_names, kp=16.0, mass=1.15, friction=1.0)
    assert tilt > 30 or travel < 0.9 * planned


def _op3_replay(xml: str, t, Q, joint_names, kp: float, mass: float, friction: float | None) -> tuple[float, float]:
    """(x travel of the body in metres, largest tilt in degrees): commands replayed open loop at
    each physics step (interpolated) in an MJCF robot on a floor, its actuators' stiffness, its
    masses and its friction changed."""
    spec = mujoco.MjSpec.from_file(xml)
    floor = spec.worldbody.add_geom()
    floor.type, floor.size = mujoco.mjtGeom.mjGEOM_PLANE, [0, 0, 1]
    m = spec.compile()
    m.actuator_gainprm[:, 0] *= kp
    m.actuator_biasprm[:, 1] *= kp
    m.body_mass[:] *= mass
    m.body_inertia[:] *= mass
    if friction is not None:
        m.geom_friction[:, 0] = friction
    d = mujoco.MjData(m)
    col = [list(joint_names).index(m.joint(m.actuator_trnid[a, 0]).name) for a in range(m.nu)]
    d.qpos[[m.jnt_qposadr[m.actuator_trnid[a, 0]] for a in range(m.nu)]] = Q[0, col]
    mujoco.mj_forward(m, d)
    d.qpos[2] -= min(d.geom_xpos[g][2] - m.geom_rbound[g] for g in range(m.ngeom) if m.geom_bodyid[g] > 0)
    d.ctrl[:] = Q[0, col]
    for _ in range(int(0.5 / m.opt.timestep)):
        mujoco.mj_step(m, d)
    x0, tilt = d.qpos[0], 0.0
    for k in range(int(t[-1] / m.opt.timestep)):
        d.ctrl[:] = [np.interp(k * m.opt.timestep, t, Q[:, c]) for c in col]
        mujoco.mj_step(m, d)
        w, x, y, z = d.qpos[3:7]
        tilt = max(tilt, math.degrees(math.acos(max(-1.0, min(1.0, 1 - 2 * (x * x + y * y))))))
    for _ in range(int(1.0 / m.opt.timestep)):   # standing after the last step
        mujoco.mj_step(m, d)
    return d.qpos[0] - x0, tilt


@pytest.mark.slow
def test_the_op3_walk_holds_in_its_own_model_on_servos_softer_heavier_or_slipperier(tmp_path):
    """examples/robots/op3.toml over the OP3 stand-in (Menagerie's bodies, axes, offsets and
    identified servos): the default walk's commands, replayed open loop in that file with its
    servos 20 % softer or stiffer, masses 10 % lighter or heavier and friction 0.7, walk ≥ 90 % of
    the plan upright. Its servos are compensated by their numbers as they are (the side file's
    compensation_margin = 1): at hil's default 1.5 the robot stands too tall and steps short."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    (tmp_path / "robotis_op3").mkdir()
    xml = tmp_path / "robotis_op3" / "op3.xml"
    xml.write_text((root / "tests" / "unit" / "mjcf" / "op3like.xml").read_text())
    side = (root / "examples" / "robots" / "op3.toml").read_text()
    assert "\ncompensation_margin = 1\n" in side
    (tmp_path / "op3.toml").write_text(side)
    (tmp_path / "op3_default.toml").write_text(side.replace("\ncompensation_margin = 1\n", "\n"))
    for name, holds in (("op3.toml", True), ("op3_default.toml", False)):
        robot = hil.robots.load(str(tmp_path / name))
        gait = walking.default_gait(robot)   # as `hil walk` chooses it for these legs
        res = walking.plan(robot, walking.WalkParams(steps=6, stride=gait["stride"], period=gait["period"],
                                                     lift=gait["lift"]), say=lambda s: None)
        planned = res.com_w[-1, 0] - res.com_w[0, 0]
        variations = ([(kp, mass, fr) for kp in (0.8, 1.2) for mass in (0.9, 1.1) for fr in (None, 0.7)]
                      + [(1.0, 1.0, None)]) if holds else [(1.0, 1.0, None)]
        for kp, mass, fr in variations:
            travel, tilt = _op3_replay(str(xml), res.t, res.q_cmd, robot.joint_names, kp, mass, fr)
            assert (travel >= 0.9 * planned and tilt < 20) == holds, (name, kp, mass, fr, travel / planned, tilt)


def _lowest_floor_point(pm, d) -> dict[str, float]:
    """Per body, the lowest point (z, m) of its geoms that touch the floor."""
    m, out = pm.model, {}
    for g in range(m.ngeom):
        if not m.geom_contype[g] or m.geom_type[g] == mujoco.mjtGeom.mjGEOM_PLANE:
            continue
        R, c, s, t = d.geom_xmat[g].reshape(3, 3), d.geom_xpos[g], m.geom_size[g], m.geom_type[g]
        if t == mujoco.mjtGeom.mjGEOM_BOX:
            z = c[2] - np.abs(R[2]) @ s
        elif t in (mujoco.mjtGeom.mjGEOM_CAPSULE, mujoco.mjtGeom.mjGEOM_CYLINDER):
            z = c[2] - abs(R[2, 2]) * s[1] - s[0] * math.sqrt(max(0.0, 1 - R[2, 2] ** 2))
        else:   # a sphere
            z = c[2] - s[0]
        body = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, m.geom_bodyid[g])
        out[body] = min(out.get(body, np.inf), float(z))
    return out


def test_a_mesh_foot_stands_on_its_sole_box_on_the_floor_not_inside_it(tmp_path):
    """Talos's feet are collision meshes, bounded by capsules whose round bottoms reach 56 mm below
    the sole: in physics each foot touches the floor with a thin box of its sole's rectangle, and at
    home the robot stands on it, nothing below the floor; humanoid17's foot boxes stay as they are."""
    side = tmp_path / "talos.toml"
    side.write_text('[robot]\nname = "talos"\nkind = "humanoid"\n'
                    'urdf = "package://example-robot-data/robots/talos_data/robots/talos_reduced.urdf"\n'
                    '[soles]\nleft = "leg_left_6_link"\nright = "leg_right_6_link"\n')
    try:
        talos = hil.robots.load(str(side))
    except Exception as e:   # noqa: BLE001 - the package is a test extra
        pytest.skip(f"talos needs example-robot-data ({e})")
    for robot, fitted in ((talos, True), (hil.robots.load("humanoid17"), False)):
        pm = build(robot)
        d = mujoco.MjData(pm.model)
        d.qpos[:] = pm.home_qpos
        mujoco.mj_forward(pm.model, d)
        low = _lowest_floor_point(pm, d)
        assert min(low.values()) == pytest.approx(0.0, abs=5e-4), low
        boxes = [mujoco.mj_id2name(pm.model, mujoco.mjtObj.mjOBJ_GEOM, g) or "" for g in range(pm.model.ngeom)]
        assert sum(b.startswith("sole_") for b in boxes) == (2 if fitted else 0)
        if fitted:
            g = boxes.index("sole_l_sole")
            assert pm.model.geom_size[g][:2] == pytest.approx(robot.sole_half)


def test_an_mjcf_robot_is_simulated_from_its_own_file_with_the_servos_in_use(tmp_path):
    """Its file's options, contacts and equality constraint, its joints driven by its own position
    actuators (found by joint, whatever their order) with the servo table's numbers; a file that
    cannot be driven so is built from hil's model, and says why."""
    from pathlib import Path

    here = Path(__file__).parent / "mjcf"
    robot = hil.robots.load(str(here / "biped6.toml"))
    pm = build(robot)
    assert pm.source == f"its own MJCF file {(here / 'biped6.xml').resolve()}"
    assert pm.model.opt.timestep == pytest.approx(0.002) and pm.model.neq == 1   # the file's, not hil's 0.5 ms
    for i, name in enumerate(robot.joint_names):
        a = int(pm.ctrl_of_joint[i])
        assert pm.model.joint(int(pm.model.actuator_trnid[a, 0])).name == name
    weak = parse_table({"kp_nm_per_rad": 3.0, "torque_limit_nm": 0.5}, robot.joint_names, "test")
    pm = build(robot, weak)
    assert np.allclose(pm.model.actuator_gainprm[pm.ctrl_of_joint, 0], 3.0)
    assert np.allclose(pm.model.actuator_forcerange[pm.ctrl_of_joint, 1], 0.5)
    # the actuators listed backwards: each joint still finds its own
    text = (here / "biped6.xml").read_text()
    head, body = text.split("<actuator>")
    acts, tail = body.split("</actuator>")
    lines = [s for s in acts.strip().splitlines()]
    (tmp_path / "rev.xml").write_text(head + "<actuator>\n" + "\n".join(reversed(lines)) + "\n</actuator>" + tail)
    rev = hil.robots.load(str(tmp_path / "rev.xml"))
    pm = build(rev)
    assert pm.source.startswith("its own MJCF file") and pm.ctrl_of_joint[0] == rev.n - 1
    # one joint without an actuator: built from hil's tables, said
    (tmp_path / "less.xml").write_text(text.replace('<position name="r_knee" joint="r_knee"/>', ""))
    pm = build(hil.robots.load(str(tmp_path / "less.xml")))
    assert pm.source == "built from hil's model (not its MJCF file: r_knee without a position actuator)"
    # torque motors a controller of its own closes the loop of (ToddlerBot's): said as such
    (tmp_path / "motors.xml").write_text(head + "<actuator>" + re.sub(r"<position ([^>]*)/>", r"<motor \1/>", acts)
                                         + "</actuator>" + tail)
    pm = build(hil.robots.load(str(tmp_path / "motors.xml")))
    assert pm.source.startswith("built from hil's model (not its MJCF file: its actuators are motors"), pm.source


def test_docs_list_every_servo_preset_with_its_numbers():
    """docs/physics.md's preset table says what presets.toml holds: every preset, each number."""
    import re
    from pathlib import Path

    from hil.robots.servos import presets

    text = (Path(__file__).resolve().parents[2] / "docs" / "physics.md").read_text()
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| ([\w-]+) \| (.*)$", text, flags=re.M)}
    for name, s in presets().items():
        assert name in rows, f"docs/physics.md has no row for the preset {name}"
        nums = [float(v) for v in re.findall(r"[-\d.]+", rows[name])[:5]]
        assert nums == pytest.approx([s.kp_nm_per_rad, s.damping_nms_per_rad, s.armature_kgm2, s.friction_nm,
                                      s.torque_limit_nm]), (name, nums)
