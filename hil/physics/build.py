"""A MuJoCo model of any hil robot, built from its `RobotModel` (nothing written per robot).

Every link is a body placed as the model places it, turning about its joint's axis (a hinge with
the model's limits); its mass, centre of mass and inertia are the model's (`RobotModel.inertias`,
the numbers `hil urdf` writes and `hil.dynamics` uses); its shapes are its geoms (capsules and
boxes). A humanoid gets a free base standing on a floor (it can tip over and fall), an arm is
fixed to the ground. Each joint has a position servo with the robot's servo numbers
(`hil.robots.servos`): stiffness, damping, armature, friction and the torque it can give.

Geoms collide with the floor only: hil checks self-collision itself, and the links' capsules
overlap at their joints by design. The soles have the friction and contact settings of rubber on
a hard floor.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from firmware_protocol.servo_mix import ServoMix

from hil.errors import InputError
from hil.kinematics.rotations import matrix_quaternion
from hil.robots.model import SOLE_FRAMES, one_bound_each
from hil.robots.servos import servo_table

TIMESTEP_S = 0.0005
COUPLING_TIME_CONSTANT_S = 0.004   # a follower's coupling: 8 steps (MuJoCo's floor is 2)
FLOOR_FRICTION = (1.0, 0.005, 0.0001)      # sliding, torsional, rolling
ROBOT_GEOM, FLOOR_GEOM = 2, 1              # contype/conaffinity bits: robot ↔ floor only
MIN_MASS_KG = 1e-4                         # MuJoCo refuses a moving body without mass
MIN_INERTIA = 1e-9
SOLE_HALF_THICKNESS_M = 0.004              # a sole box's half height, above the sole's plane


def _mujoco():
    try:
        import mujoco   # lazy: an optional extra; hil without it never builds a physics model
    except ImportError:
        raise InputError("--physics needs MuJoCo: pip install -e '.[physics]' (or pip install mujoco)") from None
    return mujoco


@dataclass
class PhysicsModel:
    """The compiled MuJoCo model and where hil's joints and frames are in it."""

    model: object              # mujoco.MjModel
    floating: bool
    qpos_of_joint: np.ndarray  # qpos index of each hil joint
    dof_of_joint: np.ndarray   # qvel index of each hil joint
    base_body: int
    site_of_frame: dict        # hil frame name → MuJoCo site id
    home_qpos: np.ndarray
    servo: object              # hil.robots.servos.ServoTable used
    ctrl_of_joint: np.ndarray | None = None   # the actuator of each hil joint (None: the i-th drives joint i)
    floor_geom: int = -1       # the floor's geom, -1 without one
    source: str = "built from hil's model"   # what MuJoCo simulates, said in the run's physics report
    # actuators on a transmission's input (a gear, a linkage's plate, a differential's bevel gear)
    # are told their own angle from the hil joints they turn, as a bus's servos are
    # (firmware_protocol.servo_mix; None: each actuator its joint's angle)
    ctrl_mix: ServoMix | None = None
    # the followers' qpos, their leaders (hil joints), multipliers and offsets, second leaders and
    # multipliers (a differential's gear; else the first again, times 0): `set_joints`
    followers: tuple = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), np.zeros(0),
                        np.zeros(0, np.int64), np.zeros(0))

    def set_joints(self, qpos: np.ndarray, q: np.ndarray) -> None:
        """qpos with hil's joints at q and each follower where its coupling holds it (a linkage
        closed, a gear meshed: never a start its constraints must first pull together)."""
        qpos[self.qpos_of_joint] = q
        at, leader, mul, off, leader2, mul2 = self.followers
        q = np.asarray(q)
        qpos[at] = mul * q[leader] + mul2 * q[leader2] + off

    def __post_init__(self) -> None:
        n = len(self.qpos_of_joint)
        if self.ctrl_of_joint is None:
            self.ctrl_of_joint = np.arange(n, dtype=np.int64)


def _add_inertial(body, mass: float, com, inertia: np.ndarray) -> None:
    body.mass = max(float(mass), MIN_MASS_KG)
    body.ipos = [float(c) for c in com]
    I = np.array(inertia, dtype=float)
    if mass < MIN_MASS_KG or np.trace(I) < 3 * MIN_INERTIA:
        I = np.eye(3) * MIN_INERTIA
    # MuJoCo needs a physical tensor (each principal moment ≤ the sum of the other two)
    w, V = np.linalg.eigh(I)
    w = np.maximum(w, MIN_INERTIA)
    for k in range(3):
        w[k] = min(w[k], w[(k + 1) % 3] + w[(k + 2) % 3])
    I = V @ np.diag(w) @ V.T
    body.fullinertia = [I[0, 0], I[1, 1], I[2, 2], I[0, 1], I[0, 2], I[1, 2]]
    body.explicitinertial = True


def _fitted_soles(robot, by_link: dict) -> dict[int, str]:
    """The links whose floor contact is a box fitted to the sole (link → sole frame): every foot
    but one that is already a box named as a foot (humanoid17's). A foot drawn from a mesh is
    bounded by capsules, whose round bottoms reach below the sole (Talos's by 56 mm), or by a box
    turned to the mesh, not to the sole: standing on them, the robot would start inside the floor."""
    out = {}
    for sole, foot in zip(SOLE_FRAMES, ("l_foot", "r_foot")):
        link = int(robot.frame_link[robot.frame_index(sole)])
        around_meshes = set(robot.meta.get("mesh_shapes", ()))
        if not any(sh.name == foot and sh.kind == "box" and sh.name not in around_meshes
                   for sh in by_link.get(link, [])):
            out[link] = sole
    return out


def _add_sole_box(mujoco, body, robot, sole: str) -> None:
    """The sole's rectangle (the support polygon's, `robot.sole_half`) as a thin box on its plane."""
    _, T = robot.frame_offset(sole)
    hl, hw = robot.sole_half
    g = body.add_geom()
    g.name = f"sole_{sole}"
    g.type = mujoco.mjtGeom.mjGEOM_BOX
    g.size = [float(hl), float(hw), SOLE_HALF_THICKNESS_M]
    g.pos = [float(v) for v in T[:3, 3] + T[:3, 2] * SOLE_HALF_THICKNESS_M]
    g.quat = list(matrix_quaternion(T[:3, :3]))
    g.contype, g.conaffinity = ROBOT_GEOM, FLOOR_GEOM
    g.mass = 0.0
    g.density = 0.0
    g.friction = list(FLOOR_FRICTION)
    g.condim = 4


def _add_shape(mujoco, body, shape, sole: bool, touches_floor: bool = True) -> None:
    g = body.add_geom()
    g.name = f"geom_{shape.name}" if shape.name else ""
    if shape.kind == "box":
        g.type = mujoco.mjtGeom.mjGEOM_BOX
        g.size = [max(float(h), 1e-4) for h in shape.half]
        g.pos = [float(v) for v in shape.p0]
        if shape.axes:
            g.quat = list(matrix_quaternion(shape.rotation()))
    else:
        p0, p1 = np.asarray(shape.p0, float), np.asarray(shape.p1, float)
        if np.linalg.norm(p1 - p0) < 1e-9:
            g.type = mujoco.mjtGeom.mjGEOM_SPHERE
            g.size = [max(float(shape.radius), 1e-4), 0, 0]
            g.pos = [float(v) for v in p0]
        else:
            g.type = mujoco.mjtGeom.mjGEOM_CAPSULE
            g.fromto = [*map(float, p0), *map(float, p1)]
            g.size = [max(float(shape.radius), 1e-4), 0, 0]
    # a foot whose floor contact is its sole box: its other shapes are drawn, not touched
    g.contype, g.conaffinity = (ROBOT_GEOM, FLOOR_GEOM) if touches_floor else (0, 0)
    g.mass = 0.0
    g.density = 0.0
    g.friction = list(FLOOR_FRICTION)
    g.condim = 4 if sole else 3


def build(robot, servo=None, floor: bool | None = None) -> PhysicsModel:
    """Compile `robot` (a hil RobotModel) into MuJoCo with its servo table (default: its own)."""
    mujoco = _mujoco()
    servo = servo or servo_table(robot)
    why = ""
    if robot.meta.get("mjcf"):
        pm, why = _from_its_own_file(mujoco, robot, servo, floor)
        if pm is not None:
            return pm
    spec, sites, floating = _spec(mujoco, robot, servo, floor)
    try:
        m = spec.compile()
    except Exception as e:   # MuJoCo's own error text says which element
        raise InputError(f"{robot.name}: MuJoCo cannot build this robot: {e}") from None
    qpos_of = np.array([m.jnt_qposadr[m.joint(j.name).id] for j in robot.joints], dtype=np.int64)
    dof_of = np.array([m.jnt_dofadr[m.joint(j.name).id] for j in robot.joints], dtype=np.int64)
    home = m.qpos0.copy()
    followers = _followers_in(m, robot)
    if floating:
        home[0:3] = 0.0, 0.0, _standing_height(robot)
        home[3:7] = 1.0, 0.0, 0.0, 0.0
    floor_geom = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, "floor")
    pm = PhysicsModel(m, floating, qpos_of, dof_of, m.body(robot.base_frame).id,
                      {k: m.site(k).id for k in sites}, home, servo, floor_geom=floor_geom,
                      source="built from hil's model" + (f" (not its MJCF file: {why})" if why else ""),
                      followers=followers)
    pm.set_joints(pm.home_qpos, robot.home)
    return pm


def _followers_in(m, robot) -> tuple:
    """`PhysicsModel.followers` for the robot's followers that are joints of `m`."""
    named = [(int(m.jnt_qposadr[m.joint(f.name).id]), f) for f in robot.followers
             if _joint_id(m, f.name) >= 0]
    return (np.array([a for a, _ in named], dtype=np.int64), np.array([f.leader for _, f in named], dtype=np.int64),
            np.array([f.multiplier for _, f in named]), np.array([f.offset for _, f in named]),
            np.array([f.leader2 if f.leader2 >= 0 else f.leader for _, f in named], dtype=np.int64),
            np.array([f.multiplier2 for _, f in named]))


def _joint_id(m, name: str) -> int:
    import mujoco   # lazy: loaded already (it built m)

    return int(mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, name))


def _from_its_own_file(mujoco, robot, servo, floor) -> tuple[PhysicsModel | None, str]:
    """An MJCF robot as its file says (its bodies, contacts, equality constraints, options), each hil
    joint driven by the file's own position actuator with the servo table's numbers (the file's, unless
    a side file or board config says otherwise); a floor added where the file has none. (None, why)
    where the file cannot be driven so: a joint without a position actuator, a walker without a free
    joint first."""
    path = robot.meta["mjcf"]
    try:
        spec = mujoco.MjSpec.from_file(path)
        m = spec.compile()
    except Exception as e:   # MuJoCo's own words name the element
        raise InputError(f"{path}: MuJoCo cannot compile it: {e}") from None
    act = _position_actuators(mujoco, m)
    if m.nu and not act:   # (ToddlerBot's: its makers' policy closes the position loop)
        return None, "its actuators are motors a controller of its own closes the loop of, not position servos"
    through = _servo_joints(robot, act)
    missing = [j for i, j in enumerate(robot.joint_names) if i not in through]
    if missing:
        return None, f"{', '.join(missing[:3])}{' …' if len(missing) > 3 else ''} without a position actuator"
    free = [j for j in range(m.njnt) if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE]
    if robot.floating and (not free or m.jnt_qposadr[free[0]] != 0):
        return None, "no free joint on its root body"
    planes = [g for g in range(m.ngeom) if m.geom_type[g] == mujoco.mjtGeom.mjGEOM_PLANE and m.geom_bodyid[g] == 0]
    if not planes and (floor if floor is not None else True):
        ground = spec.worldbody.add_geom()
        ground.name = "floor" if mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, "floor") < 0 else "hil_floor"
        ground.type = mujoco.mjtGeom.mjGEOM_PLANE
        ground.size = [0, 0, 0.05]
        ground.friction = list(FLOOR_FRICTION)
        m = spec.compile()
        planes = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, ground.name)]
    ctrl = np.array([act[through[i][0]] for i in range(robot.n)], dtype=np.int64)
    matrix, offset = np.zeros((robot.n, robot.n)), np.array([through[i][2] for i in range(robot.n)])
    for i in range(robot.n):
        for lead, coefficient in through[i][1]:
            matrix[i, lead] += coefficient
    qpos_of = np.array([m.jnt_qposadr[m.joint(j).id] for j in robot.joint_names], dtype=np.int64)
    dof_of = np.array([m.jnt_dofadr[m.joint(j).id] for j in robot.joint_names], dtype=np.int64)
    for i in range(robot.n):   # the servos in use, on the file's actuators and joints
        if len(through[i][1]) > 1:   # a differential's gear: the servo table has its two felt together,
            continue                 # not each apart; its actuator keeps the file's own numbers
        # (a servo's numbers are the planned joint's: on a transmission's input, g = its ratio)
        sv, a, g = servo.joint(i), ctrl[i], matrix[i, i]
        dof = int(m.jnt_dofadr[m.joint(through[i][0]).id])
        m.actuator_gainprm[a, 0] = sv.kp_nm_per_rad / g ** 2
        m.actuator_biasprm[a, 1] = -sv.kp_nm_per_rad / g ** 2
        m.actuator_forcelimited[a] = 1
        m.actuator_forcerange[a] = (-sv.torque_limit_nm / abs(g), sv.torque_limit_nm / abs(g))
        m.dof_damping[dof], m.dof_armature[dof], m.dof_frictionloss[dof] = (
            sv.damping_nms_per_rad / g ** 2, sv.armature_kgm2 / g ** 2, sv.friction_nm / abs(g))
    home = m.qpos0.copy()
    if robot.floating:
        base = int(m.jnt_bodyid[free[0]])
        home[0:3] = 0.0, 0.0, _standing_height(robot)
        home[3:7] = 1.0, 0.0, 0.0, 0.0
    else:
        base = int(m.jnt_bodyid[m.joint(robot.joint_names[0]).id])
        while m.body_parentid[base] != 0:
            base = int(m.body_parentid[base])
    pm = PhysicsModel(m, robot.floating, qpos_of, dof_of, base, {}, home, servo, ctrl_of_joint=ctrl,
                      floor_geom=int(planes[0]) if planes else -1, source=f"its own MJCF file {path}",
                      ctrl_mix=None if np.array_equal(matrix, np.eye(robot.n)) and not offset.any()
                      else ServoMix.of(matrix, offset), followers=_followers_in(m, robot))
    pm.set_joints(pm.home_qpos, robot.home)
    return pm, ""


def _servo_joints(robot, act: dict[str, int]) -> dict[int, tuple[str, list[tuple[int, float]], float]]:
    """hil joint → (the file's joint its servo's actuator pulls on, [(hil joint, coefficient)], offset):
    the joint itself ([(i, 1)], 0), the input of the transmission hil plans the joint as the output
    of (a gear, a linkage's plate: input = gain · joint + offset, `urdf._gear_trains_turned_round`),
    or a differential's bevel gear in the slot of one of the two joints it turns (both, with their
    ratios: hil.board_config puts a bus's servos the same way)."""
    out = {i: (name, [(i, 1.0)], 0.0) for i, name in enumerate(robot.joint_names) if name in act}
    inputs = robot.meta.get("transmission_inputs", {})
    gears = robot.meta.get("differential_inputs", {})
    for f in robot.followers:
        if f.name not in act:
            continue
        if f.leader2 < 0 and f.leader not in out and inputs.get(f.name) == robot.joint_names[f.leader]:
            out[f.leader] = (f.name, [(f.leader, f.multiplier)], f.offset)
        elif f.leader2 >= 0 and f.name in gears:
            free = [lead for lead, _ in sorted(f.leaders()) if lead not in out]
            if free:
                out[free[0]] = (f.name, f.leaders(), f.offset)
    return out


def _position_actuators(mujoco, m) -> dict[str, int]:
    """Joint name → the first actuator of `m` that servos its position (a joint transmission, a
    gain and an affine bias pulling back to the target)."""
    out: dict[str, int] = {}
    for a in range(m.nu):
        if (m.actuator_trntype[a] == mujoco.mjtTrn.mjTRN_JOINT and m.actuator_gaintype[a] == mujoco.mjtGain.mjGAIN_FIXED
                and m.actuator_biastype[a] == mujoco.mjtBias.mjBIAS_AFFINE and m.actuator_gainprm[a, 0] > 0
                and m.actuator_biasprm[a, 1] < 0):
            out.setdefault(m.joint(int(m.actuator_trnid[a, 0])).name, a)
    return out


def mjcf_text(robot, servo=None, floor: bool | None = None) -> str:
    """The MJCF of what `build` compiles (MuJoCo writes it)."""
    mujoco = _mujoco()
    spec, _, _ = _spec(mujoco, robot, servo or servo_table(robot), floor)
    spec.compile()
    return spec.to_xml()


def _spec(mujoco, robot, servo, floor):
    """The MjSpec of `robot`, the sites of its frames, and whether its base floats."""
    spec = mujoco.MjSpec()
    spec.modelname = robot.name
    spec.compiler.degree = False   # joint ranges in radians, as everything in hil
    spec.option.timestep = TIMESTEP_S
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    spec.option.cone = mujoco.mjtCone.mjCONE_ELLIPTIC
    spec.option.gravity = [0.0, 0.0, -9.81]
    floating = robot.floating
    bodies = _add_links(mujoco, spec.worldbody, robot, servo, floating)
    sites = _add_frame_sites(robot, bodies)
    _add_couplings(mujoco, spec, robot)
    _add_servos(mujoco, spec, robot, servo)
    if floor if floor is not None else True:
        ground = spec.worldbody.add_geom()
        ground.name = "floor"
        ground.type = mujoco.mjtGeom.mjGEOM_PLANE
        ground.size = [0, 0, 0.05]
        ground.pos = [0, 0, float(robot.meta.get("floor_z_m", 0.0)) if not floating else 0.0]
        ground.contype, ground.conaffinity = FLOOR_GEOM, ROBOT_GEOM
        ground.friction = list(FLOOR_FRICTION)
    return spec, sites, floating


def _add_links(mujoco, world, robot, servo, floating: bool) -> list:
    """A body per link (the base first, free where it floats), each with its inertia, its joint
    (range, the servo's damping, armature and friction) and its shapes; a floating robot's feet
    stand on soles fitted to them. The bodies, base first."""
    base = world.add_body()
    base.name = robot.base_frame
    if floating:
        base.add_freejoint()
    masses, coms = robot.masses, robot.tables[1][:, 1:4]
    _add_inertial(base, masses[0], coms[0], robot.inertias[0])
    by_link: dict[int, list] = {}
    for sh in one_bound_each(robot.shapes):   # a mesh bounded both ways touches the world with its box
        by_link.setdefault(sh.link, []).append(sh)
    sole_of_link = _fitted_soles(robot, by_link) if floating else {}
    for sh in by_link.get(-1, []):
        _add_shape(mujoco, base, sh, False)
    bodies = [base]
    for i, j in enumerate(robot.joints + robot.followers):
        b = _add_link_body(mujoco, bodies[0] if j.parent < 0 else bodies[1 + j.parent], robot, servo, i, j)
        for sh in by_link.get(i, []):
            _add_shape(mujoco, b, sh, sh.name in ("l_foot", "r_foot"), touches_floor=i not in sole_of_link)
        if i in sole_of_link:
            _add_sole_box(mujoco, b, robot, sole_of_link[i])
        bodies.append(b)
    return bodies


def _add_link_body(mujoco, parent, robot, servo, i: int, j):
    """Link i's body on its hinge: a driven joint's with its range and its servo's damping, armature
    and friction; a follower's free (its coupling holds it)."""
    b = parent.add_body()
    b.name = robot.link_names[i]
    b.pos = [float(v) for v in j.placement[:3, 3]]
    b.quat = list(matrix_quaternion(j.placement[:3, :3]))
    _add_inertial(b, robot.masses[i + 1], robot.tables[1][i + 1, 1:4], robot.inertias[i + 1])
    hinge = b.add_joint()
    hinge.name = j.name
    hinge.type = mujoco.mjtJoint.mjJNT_HINGE
    hinge.axis = [float(v) for v in j.axis]
    if i >= robot.n:
        return b   # a follower: turned by its coupling (`_add_couplings`), no servo of its own
    hinge.range = [float(j.lower), float(j.upper)]
    hinge.limited = mujoco.mjtLimited.mjLIMITED_TRUE
    s = servo.joint(i)
    hinge.damping = [s.damping_nms_per_rad, 0.0, 0.0]   # (MuJoCo 4: linear, then two higher terms)
    hinge.armature = s.armature_kgm2
    hinge.frictionloss = s.friction_nm
    return b


def _add_couplings(mujoco, spec, robot) -> None:
    """Each follower held to its leader by a joint equality, θ = multiplier · leader + offset: the
    mechanism's coupling, as an MJCF says it; a differential's gear, turned by two, by a fixed tendon
    θ − m₁ · a − m₂ · b held at the offset (its length at qpos0, all zeros, is 0)."""
    for f in robot.followers:
        eq = spec.add_equality()
        # stiff, as a gear mesh or a rod is (MuJoCo's default lets a loaded coupling give by a degree)
        eq.solref = [COUPLING_TIME_CONSTANT_S, 1.0]
        eq.solimp = [0.9999, 0.9999, 0.001, 0.5, 2.0]
        rest = [0.0] * (len(eq.data) - 5)
        if f.leader2 < 0:
            eq.type = mujoco.mjtEq.mjEQ_JOINT
            eq.name1, eq.name2 = f.name, robot.joint_names[f.leader]
            eq.data = [f.offset, f.multiplier, 0.0, 0.0, 0.0] + rest
            continue
        tendon = spec.add_tendon()
        tendon.name = f"{f.name}__turned_by_two"
        tendon.wrap_joint(f.name, 1.0)
        for lead, c in f.leaders():
            tendon.wrap_joint(robot.joint_names[lead], -c)
        eq.type = mujoco.mjtEq.mjEQ_TENDON
        eq.name1 = tendon.name
        eq.data = [f.offset, 0.0, 0.0, 0.0, 0.0] + rest


def _add_frame_sites(robot, bodies: list) -> dict:
    """A site at each of the robot's named frames (its tool, its soles, …), by name."""
    sites = {}
    for f in range(robot.n_links + 1, len(robot.frame_names)):
        name = robot.frame_names[f]
        link, offset = robot.frame_offset(name)
        site = bodies[0 if link < 0 else link + 1].add_site()
        site.name = name
        site.pos = [float(v) for v in offset[:3, 3]]
        site.quat = list(matrix_quaternion(offset[:3, :3]))
        sites[name] = site
    return sites


def _add_servos(mujoco, spec, robot, servo) -> None:
    """A position actuator per joint: the servo's stiffness, its torque limit."""
    for i, j in enumerate(robot.joints):
        s = servo.joint(i)
        a = spec.add_actuator()
        a.name = j.name
        a.target = j.name
        a.trntype = mujoco.mjtTrn.mjTRN_JOINT
        a.set_to_position(kp=s.kp_nm_per_rad)
        a.forcelimited = mujoco.mjtLimited.mjLIMITED_TRUE
        a.forcerange = [-s.torque_limit_nm, s.torque_limit_nm]
        a.ctrllimited = mujoco.mjtLimited.mjLIMITED_FALSE


def _standing_height(robot) -> float:
    """How high the base stands at home with its lowest sole on the floor (z = 0)."""
    q = robot.home
    lows = []
    hl, hw = robot.sole_half
    for sole in SOLE_FRAMES:
        T = robot.fk_frame(q, sole)
        for sx in (-hl, hl):
            for sy in (-hw, hw):
                lows.append((T @ np.array([sx, sy, 0.0, 1.0]))[2])
    return -min(lows)
