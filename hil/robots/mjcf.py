"""Robots from MJCF files (MuJoCo's format, in which MuJoCo Menagerie and many kit makers publish):
MuJoCo compiles the file — its includes, defaults, classes, meshes and angle units — and what it
compiled is written out as an equivalent URDF (with its meshes as STL files) in the user's cache,
which hil's URDF reader (hil.robots.urdf) then builds like any other. One reader of robot trees, not two.

What the URDF cannot say is said in the model's notes: an MJCF gives no velocity limits (a
default is assumed, a side file sets each), ball and slide joints are held, a joint an equality
constraint couples to another follows it (URDF's mimic).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import struct
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from hil.errors import ConfigError, InputError
from hil.inputs import read_bytes
from hil.kinematics.rotations import rpy_angles
from hil.robots.urdf import KEYFRAME_TAG, cache_dir

MAX_BYTES = 64 << 20
MAX_ASSET_FILES = 5000            # files beside an MJCF whose sizes and times key its cache
DEFAULT_VELOCITY_RAD_S = 4.8      # MJCF has no velocity limit; about a hobby servo's no-load speed (275°/s)
CONVERTER_VERSION = 14            # bump when what `to_urdf` writes changes

# mjtGeom and mjtJoint values (fixed by MuJoCo's C API)
PLANE, HFIELD, SPHERE, CAPSULE, ELLIPSOID, CYLINDER, BOX, MESH = range(8)
FREE, BALL, SLIDE, HINGE = range(4)
MAX_SERVO_TORQUE_NM = 1e4         # a force range past this is a file's way of saying "unlimited"
BIAS_AFFINE = 1                   # mjBIAS_AFFINE: a position (or velocity) servo's bias
EQ_JOINT = 2
TRN_JOINT, TRN_JOINT_IN_PARENT, TRN_TENDON = 0, 1, 3   # mjtTrn: what an actuator pulls on
WRAP_JOINT = 1   # mjtWrap: a fixed tendon's joint
FINITE_FIELDS = ("body_pos", "body_quat", "body_ipos", "body_iquat", "body_mass", "body_inertia", "jnt_pos",
                 "jnt_axis", "jnt_range", "geom_pos", "geom_quat", "geom_size", "site_pos", "site_quat", "mesh_vert",
                 "eq_data", "actuator_forcerange", "actuator_gear", "wrap_prm", "tendon_range")


def root_tag(path: str) -> str:
    """The name of an XML file's root element ("mujoco" for an MJCF, "robot" for a URDF), read
    from its first few KB; "" when there is none to read."""
    try:
        with open(path, "rb") as f:
            text = f.read(8192).decode("utf-8", "replace")
    except OSError:
        return ""
    start = 0
    while True:   # past the XML declaration, comments and a DOCTYPE
        k = text.find("<", start)
        if k < 0:
            return ""
        if text.startswith(("<?", "<!"), k):
            close = "-->" if text.startswith("<!--", k) else "?>" if text.startswith("<?", k) else ">"
            end = text.find(close, k)
            if end < 0:
                return ""
            start = end + len(close)
            continue
        name = text[k + 1:].split(None, 1)[0] if text[k + 1:].strip() else ""
        return name.rstrip("/>").split(">", 1)[0]


def is_mjcf(path: str) -> bool:
    return root_tag(path) == "mujoco"


def to_urdf(path: str) -> str:
    """The URDF equivalent of the MJCF at `path` (written once into the cache, found there again
    while the MJCF and the files beside it are unchanged)."""
    folder = _cache_folder(path)
    urdf = folder / "robot.urdf"
    if urdf.is_file():
        return str(urdf)
    model = _compile(path)
    tmp = Path(tempfile.mkdtemp(prefix=".mjcf-", dir=folder.parent))
    try:
        writer = _Writer(model, Path(path).stem, tmp)
        (tmp / "robot.urdf").write_text(writer.urdf())
        (tmp / "servo.json").write_text(json.dumps(writer.servo_table()))
        (tmp / "poses.json").write_text(json.dumps(writer.keyframe_poses()))
        (tmp / "collision.json").write_text(json.dumps(writer.excluded_contacts()))
        (tmp / "unactuated.json").write_text(json.dumps(writer.unactuated()))
        (tmp / "differentials.json").write_text(json.dumps(writer.differential_inputs()))
        (tmp / "floor.json").write_text(json.dumps({"floor_z_m": writer.floor_z()}))
        try:
            os.replace(tmp, folder)
        except OSError:   # another process wrote it meanwhile: theirs is the same
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return str(urdf)


def _written(path: str, name: str, default):
    """One of what `to_urdf` writes beside the URDF (JSON), or `default` where it cannot be read."""
    try:
        return json.loads((Path(to_urdf(path)).parent / name).read_text())
    except (OSError, ValueError):
        return default


def servo_table_of(path: str) -> dict:
    """The MJCF's position actuators as a `[servo]` table ({} where it has none): its makers'
    servo model, which the robot's plans and physics then use."""
    return _written(path, "servo.json", {})


def poses_of(path: str) -> dict:
    """The MJCF's keyframes as a `[poses]` table (joint = degrees; "home" among them where the file
    has a keyframe of that name): the pose its makers stand the robot in."""
    return _written(path, "poses.json", {})


def unactuated_of(path: str) -> list:
    """The MJCF's joints that no actuator moves (`_Writer.unactuated`)."""
    return _written(path, "unactuated.json", [])


def differential_inputs_of(path: str) -> dict:
    """The MJCF's differentials' servo gears that follow the outputs hil plans: {gear: [out, out]}."""
    return _written(path, "differentials.json", {})


def allowed_collisions_of(path: str) -> list:
    """The MJCF's `<contact><exclude>` pairs as a `[collision] allowed` list: bodies its makers let
    touch, which hil's self-collision check leaves alone too."""
    return _written(path, "collision.json", [])


def floor_of(path: str) -> float | None:
    """Where the MJCF's floor is below a robot fixed in its world (`floor_z_m`: the height of its
    world's upward plane in the base frame hil gives the robot); None: it floats, or has no floor."""
    found = _written(path, "floor.json", {})
    value = found.get("floor_z_m") if isinstance(found, dict) else None
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def _cache_folder(path: str) -> Path:
    try:
        data = read_bytes(path, "robot file", MAX_BYTES)
    except InputError as e:
        raise ConfigError(str(e)) from None
    h = hashlib.sha256(f"mjcf|{CONVERTER_VERSION}|{Path(path).resolve()}|".encode() + data)
    here = Path(path).resolve().parent
    seen = 0
    for root, dirs, files in os.walk(here):
        dirs.sort()
        for name in sorted(files):
            seen += 1
            if seen > MAX_ASSET_FILES:
                break
            try:
                st = os.stat(os.path.join(root, name))
            except OSError:
                continue
            h.update(f"|{os.path.relpath(os.path.join(root, name), here)}|{st.st_size}|{st.st_mtime_ns}".encode())
    base = cache_dir()
    try:
        base.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(f"{path}: the robot cache {base} cannot be written ({e.strerror}); set XDG_CACHE_HOME "
                          "to a writable folder") from None
    return base / f"mjcf-{h.hexdigest()[:32]}"


def _compile(path: str):
    try:
        import mujoco   # lazy: an optional extra (physics); only MJCF robots need it to load
    except ImportError:
        raise ConfigError(f"{path}: reading MJCF files needs MuJoCo: pip install mujoco") from None
    try:
        model = mujoco.MjModel.from_xml_path(str(path))
    except Exception as e:   # noqa: BLE001 - MuJoCo's own error text names the element and the line
        first = str(e).strip().splitlines()
        raise ConfigError(f"{path}: MuJoCo cannot read it: {' '.join(first[:3])}") from None
    # MuJoCo takes "nan" for a number; nothing hil builds from may be one
    for field in FINITE_FIELDS:
        values = np.asarray(getattr(model, field))
        if values.size and not np.all(np.isfinite(values)):
            raise ConfigError(f"{path}: a number is not finite ({field.replace('_', ' ')}: NaN or inf); give every "
                              "position, size, range and mass as a finite number")
    if model.nbody < 2:
        raise ConfigError(f"{path}: the MJCF has no body: nothing for hil to drive")
    return model


# --------------------------------------------------------------------------- the URDF
def _name(model, kind: str, i: int, fallback: str) -> str:
    adr = getattr(model, f"name_{kind}adr")[i]
    raw = bytes(model.names[adr:]).split(b"\0", 1)[0].decode("utf-8", "replace")
    return raw or fallback


def _rot(quat) -> np.ndarray:
    w, x, y, z = (float(v) for v in quat)
    n = math.sqrt(w * w + x * x + y * y + z * z) or 1.0
    w, x, y, z = w / n, x / n, y / n, z / n
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def _pose(pos, quat) -> np.ndarray:
    T = np.eye(4)
    T[:3, :3] = _rot(quat)
    T[:3, 3] = np.asarray(pos, dtype=float)
    return T


def _shift(p) -> np.ndarray:
    T = np.eye(4)
    T[:3, 3] = p
    return T


def _origin(parent: ET.Element, T: np.ndarray) -> None:
    r, p, y = rpy_angles(T[:3, :3])
    ET.SubElement(parent, "origin", xyz=" ".join(f"{v:.9g}" for v in T[:3, 3]), rpy=f"{r:.12g} {p:.12g} {y:.12g}")


class _Writer:
    """What MuJoCo compiled, as URDF links and joints. A body with a hinge at `jnt_pos` becomes a
    link whose frame sits at the hinge (URDF turns a link about its own origin); a body with k
    hinges, k links (the first k − 1 massless)."""

    def __init__(self, model, stem: str, folder: Path) -> None:
        self.m, self.stem, self.folder = model, stem, folder
        self.meshes: dict[int, str] = {}
        self.joint_name: dict[int, str] = {}   # MuJoCo joint id → the URDF joint written for it
        self._couplings: dict | None = None
        self._differentials: dict | None = None

    def urdf(self) -> str:
        m = self.m
        root_body = self._root_body()
        model_name = bytes(m.names).split(b"\0", 1)[0].decode("utf-8", "replace")
        # a file without <mujoco model="…"> is named "MuJoCo Model" by MuJoCo: it is named after its file here
        robot = ET.Element("robot", name=self.stem if model_name in ("", "MuJoCo Model") else model_name)
        frame_of: dict[int, tuple[str, np.ndarray]] = {}   # body → (its last link, body frame in that link)
        order = [b for b in range(1, m.nbody) if self._under(b, root_body)]
        for b in order:
            self._body(robot, b, root_body, frame_of)
        first = int(m.body_jntadr[root_body])
        if any(m.jnt_type[j] == FREE for j in range(first, first + int(m.body_jntnum[root_body]))):
            # a free joint on the root: the URDF way to say the base floats
            ET.SubElement(robot, "link", name="world")
            free = ET.SubElement(robot, "joint", name="floating_base", type="floating")
            ET.SubElement(free, "parent", link="world")
            ET.SubElement(free, "child", link=_name(m, "body", root_body, f"body{root_body}"))
        self._mimics(robot)
        ET.indent(robot)
        return ET.tostring(robot, encoding="unicode")

    def floor_z(self) -> float | None:
        """The height of the world's highest upward plane in the base frame hil gives a robot
        fixed in its world: its root body's frame (the world's, where the root turns on a hinge of
        its own). None where the robot floats (physics stands it on its floor), where the world
        has no such plane, or where the root is turned (its z is not the world's)."""
        m, root = self.m, self._root_body()
        first = int(m.body_jntadr[root])
        joints = [m.jnt_type[j] for j in range(first, first + int(m.body_jntnum[root]))]
        planes = [g for g in range(m.ngeom) if m.geom_bodyid[g] == 0 and m.geom_type[g] == PLANE
                  and np.allclose(_rot(m.geom_quat[g])[:, 2], (0.0, 0.0, 1.0), atol=1e-6)]
        if FREE in joints or not planes:
            return None
        if HINGE in joints:
            return float(max(m.geom_pos[g][2] for g in planes))
        if not np.allclose(_rot(m.body_quat[root]), np.eye(3), atol=1e-6):
            return None
        return float(max(m.geom_pos[g][2] for g in planes) - m.body_pos[root][2])

    def _root_body(self) -> int:
        """The robot's root: the child of the world with the most joints below it."""
        m = self.m
        counts = {}
        for b in range(1, m.nbody):
            top = b
            while m.body_parentid[top] != 0:
                top = m.body_parentid[top]
            counts[top] = counts.get(top, 0) + int(m.body_jntnum[b])
        if not counts:
            raise ConfigError("the MJCF has no body: nothing for hil to drive")
        return max(counts, key=lambda k: (counts[k], -k))

    def _under(self, b: int, root: int) -> bool:
        while b not in (0, root):
            b = self.m.body_parentid[b]
        return b == root

    def _body(self, robot, b: int, root: int, frame_of: dict) -> None:
        m = self.m
        name = _name(m, "body", b, f"body{b}")
        first = int(m.body_jntadr[b])
        hinges = [j for j in range(first, first + int(m.body_jntnum[b])) if m.jnt_type[j] == HINGE]
        if b == root and hinges:   # the root turns on a hinge of its own: it hangs from the world (a massless link)
            ET.SubElement(robot, "link", name="world")
            parent, placed = "world", _pose(m.body_pos[b], m.body_quat[b])
        elif b == root:
            parent, placed = None, np.eye(4)
        else:
            parent, in_parent = frame_of[int(m.body_parentid[b])]
            placed = in_parent @ _pose(m.body_pos[b], m.body_quat[b])   # the body's frame in the parent link's
        # MuJoCo turns a body about each of its hinges in turn, each at its anchor in the frame the
        # ones before left: a chain of links, each at its hinge's anchor
        anchor = np.zeros(3)
        for k, j in enumerate(hinges):
            link = name if k == len(hinges) - 1 else f"{name}__{_name(m, 'jnt', j, f'joint{j}')}"
            origin = placed @ _shift(m.jnt_pos[j]) if k == 0 else _shift(m.jnt_pos[j] - anchor)
            ET.SubElement(robot, "link", name=link)
            self._joint(robot, j, _name(m, "jnt", j, f"joint{j}"), parent, link, origin)
            parent, anchor = link, np.asarray(m.jnt_pos[j], dtype=float)
        if not hinges:
            ET.SubElement(robot, "link", name=name)
            if parent is not None:
                fixed = ET.SubElement(robot, "joint", name=f"{name}__fixed", type="fixed")
                _origin(fixed, placed)
                ET.SubElement(fixed, "parent", link=parent)
                ET.SubElement(fixed, "child", link=name)
        body_in_link = _shift(-anchor)
        link = robot.find(f"link[@name='{name}']")
        self._inertial(link, b, body_in_link)
        self._geoms(link, b, body_in_link)
        self._sites(robot, b, name, body_in_link)
        frame_of[b] = (name, body_in_link)

    def _sites(self, robot, b: int, link: str, body_in_link: np.ndarray) -> None:
        """A body's sites (MJCF's named frames: a tool point, a foot's sole, a camera mount) as frames."""
        m = self.m
        for k in range(m.nsite):
            if m.site_bodyid[k] != b:
                continue
            name = _name(m, "site", k, "")
            if not name or robot.find(f"link[@name='{name}']") is not None:
                continue
            ET.SubElement(robot, "link", name=name)
            fixed = ET.SubElement(robot, "joint", name=f"{name}__site", type="fixed")
            _origin(fixed, body_in_link @ _pose(m.site_pos[k], m.site_quat[k]))
            ET.SubElement(fixed, "parent", link=link)
            ET.SubElement(fixed, "child", link=name)

    def _joint(self, robot, j: int, jname: str, parent, link: str, origin: np.ndarray) -> None:
        m = self.m
        self.joint_name[j] = jname
        limited = bool(m.jnt_limited[j]) and m.jnt_range[j][0] < m.jnt_range[j][1]
        el = ET.SubElement(robot, "joint", name=jname, type="revolute" if limited else "continuous")
        _origin(el, origin)
        ET.SubElement(el, "parent", link=parent)
        ET.SubElement(el, "child", link=link)
        ET.SubElement(el, "axis", xyz=" ".join(f"{v:.12g}" for v in m.jnt_axis[j]))
        lo, hi = (float(m.jnt_range[j][0]), float(m.jnt_range[j][1])) if limited else (0.0, 0.0)
        ET.SubElement(el, "limit", lower=f"{lo:.12g}", upper=f"{hi:.12g}", effort=f"{self._effort(j):.6g}",
                      velocity=f"{DEFAULT_VELOCITY_RAD_S:g}")
        if m.dof_damping[m.jnt_dofadr[j]] > 0 or m.dof_frictionloss[m.jnt_dofadr[j]] > 0:
            ET.SubElement(el, "dynamics", damping=f"{m.dof_damping[m.jnt_dofadr[j]]:.6g}",
                          friction=f"{m.dof_frictionloss[m.jnt_dofadr[j]]:.6g}")

    def servo_table(self) -> dict:
        """The position actuators as a `[servo]` table (hil.robots.servos), one entry per joint one
        drives: stiffness kp·gear², damping the joint's own plus the actuator's kv·gear², the
        joint's armature and friction loss, the torque its force range (or the joint's actuator
        force range) allows. {} where none is a position servo (motors, or no actuators)."""
        m = self.m
        out = {}
        for a in range(m.nu):
            j = int(m.actuator_trnid[a][0])
            kp, bias = float(m.actuator_gainprm[a][0]), m.actuator_biasprm[a]
            position = (m.actuator_trntype[a] == 0 and m.actuator_biastype[a] == BIAS_AFFINE and kp > 0
                        and abs(float(bias[1]) + kp) <= 1e-9 * kp)   # force = kp (ctrl − length) − kv · velocity
            if not position or j not in self.joint_name:
                continue
            g2 = float(m.actuator_gear[a][0]) ** 2
            dof = int(m.jnt_dofadr[j])
            entry = {"kp_nm_per_rad": kp * g2,
                     "damping_nms_per_rad": float(m.dof_damping[dof]) + max(0.0, -float(bias[2])) * g2,
                     "armature_kgm2": float(m.dof_armature[dof]), "friction_nm": float(m.dof_frictionloss[dof])}
            torque = self._effort(j)
            if torque <= 0 and m.jnt_actfrclimited[j]:
                torque = float(np.max(np.abs(m.jnt_actfrcrange[j])))
            if 0 < torque <= MAX_SERVO_TORQUE_NM:   # past it, a placeholder for "no limit" (1e30): none declared
                entry["torque_limit_nm"] = torque
            out[self.joint_name[j]] = entry
        return {"joint": out} if out else {}

    def keyframe_poses(self) -> dict:
        """Each keyframe as {joint: degrees} over the hinges hil drives (a key without a name is
        `key<k>`; one named "zero" is hil's own and left out), tagged with where it comes from."""
        m = self.m
        out = {}
        for k in range(m.nkey):
            name = _name(m, "key", k, f"key{k}")
            if name == "zero":
                continue
            pose = {jname: math.degrees(float(m.key_qpos[k][m.jnt_qposadr[j]]))
                    for j, jname in self.joint_name.items() if m.jnt_type[j] == HINGE}
            if pose:
                out[name] = {KEYFRAME_TAG: f"the MJCF's keyframe {name!r}", **pose}
        return out

    def excluded_contacts(self) -> list:
        """Each `<contact><exclude>` as [body, body] (their links in the URDF written), and each body
        with its parent body where MuJoCo leaves those alone (its `filterparent`, on unless the
        file disables it): a body with several joints is several links here, and its parent's
        shapes meet its own about them as about one joint (a shin and a foot at an ankle's pitch
        and roll)."""
        import mujoco   # lazy: an optional extra, loaded already (it compiled the file)

        m = self.m
        out = []
        for sig in m.exclude_signature[:m.nexclude]:
            b1, b2 = int(sig) >> 16, int(sig) & 0xFFFF
            if b1 > 0 and b2 > 0:   # the world is no link
                out.append([_name(m, "body", b1, f"body{b1}"), _name(m, "body", b2, f"body{b2}")])
        if not m.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_FILTERPARENT:
            for b in range(1, m.nbody):
                p = int(m.body_parentid[b])
                if p > 0:
                    out.append([_name(m, "body", p, f"body{p}"), _name(m, "body", b, f"body{b}")])
        return out

    def unactuated(self) -> list[str]:
        """The hinges hil writes as joints that no actuator of the file moves and no equality
        constraint ties to another: a linkage's passive joints (a knee turned by rods), or joints
        left free. [] for a file with no actuators at all (a kinematic model: its joints are taken
        as servos, as a URDF's are)."""
        m = self.m
        if m.nu == 0:
            return []
        driven = set()
        for a in range(m.nu):
            if m.actuator_trntype[a] in (TRN_JOINT, TRN_JOINT_IN_PARENT):
                driven.add(int(m.actuator_trnid[a][0]))
            elif m.actuator_trntype[a] == TRN_TENDON:   # a fixed tendon's joints move with it
                t = int(m.actuator_trnid[a][0])
                for w in range(int(m.tendon_adr[t]), int(m.tendon_adr[t]) + int(m.tendon_num[t])):
                    if m.wrap_type[w] == WRAP_JOINT:
                        driven.add(int(m.wrap_objid[w]))
        followers = set(self.couplings()) | set(self.differentials())
        outputs = {lead for j, (_, leads) in self.differentials().items() if j in driven for lead, _ in leads}
        return [name for j, name in self.joint_name.items()
                if j not in driven and j not in followers and j not in outputs]

    def differential_inputs(self) -> dict[str, list[str]]:
        """{servo gear: [the two outputs it is turned with]} for each differential whose gears follow."""
        driven = _actuated_joints(self.m)
        return {self.joint_name[j]: [self.joint_name[lead] for lead, _ in leads]
                for j, (_, leads) in self.differentials().items()
                if j in driven and j in self.joint_name and all(lead in self.joint_name for lead, _ in leads)}

    def _effort(self, j: int) -> float:
        """The most torque an actuator on joint j gives (its force range times its gear), 0 if none."""
        m = self.m
        best = 0.0
        for a in range(m.nu):
            if m.actuator_trnid[a][0] == j and m.actuator_trntype[a] == 0:   # mjTRN_JOINT
                gear = abs(float(m.actuator_gear[a][0])) or 1.0
                if m.actuator_forcelimited[a]:
                    best = max(best, gear * float(np.max(np.abs(m.actuator_forcerange[a]))))
        return best

    def _inertial(self, link, b: int, body_in_link: np.ndarray) -> None:
        m = self.m
        mass = float(m.body_mass[b])
        if mass <= 0:
            return
        T = body_in_link @ _pose(m.body_ipos[b], m.body_iquat[b])
        el = ET.SubElement(link, "inertial")
        _origin(el, T)
        ET.SubElement(el, "mass", value=f"{mass:.9g}")
        ixx, iyy, izz = (float(v) for v in m.body_inertia[b])
        ET.SubElement(el, "inertia", ixx=f"{ixx:.9g}", iyy=f"{iyy:.9g}", izz=f"{izz:.9g}", ixy="0", ixz="0", iyz="0")

    def _geoms(self, link, b: int, body_in_link: np.ndarray) -> None:
        m = self.m
        geoms = [g for g in range(m.ngeom) if m.geom_bodyid[g] == b]
        # a geom collides by its contype/conaffinity, or by an explicit <contact><pair> (MJX-style
        # files turn the bits off and pair each foot with the floor)
        paired = {int(g) for g in m.pair_geom1[:m.npair]} | {int(g) for g in m.pair_geom2[:m.npair]}
        collide = [g for g in geoms if m.geom_contype[g] or m.geom_conaffinity[g] or g in paired]
        seen = [g for g in geoms if g not in collide and m.geom_group[g] <= 2] or collide
        for g in collide:
            self._geom(ET.SubElement(link, "collision"), g, body_in_link)
        for g in seen:
            el = ET.SubElement(link, "visual")
            if self._geom(el, g, body_in_link):
                rgba = m.mat_rgba[m.geom_matid[g]] if m.geom_matid[g] >= 0 else m.geom_rgba[g]
                mat = ET.SubElement(el, "material", name=f"rgba_{g}")
                ET.SubElement(mat, "color", rgba=" ".join(f"{float(v):.4g}" for v in rgba))

    def _geom(self, el, g: int, body_in_link: np.ndarray) -> bool:
        m = self.m
        kind, size = int(m.geom_type[g]), m.geom_size[g]
        T = body_in_link @ _pose(m.geom_pos[g], m.geom_quat[g])
        _origin(el, T)
        shape = ET.SubElement(el, "geometry")
        if kind == SPHERE:
            ET.SubElement(shape, "sphere", radius=f"{size[0]:.9g}")
        elif kind == ELLIPSOID:   # bounded by a sphere: the collision checks stay on the safe side
            ET.SubElement(shape, "sphere", radius=f"{float(np.max(size)):.9g}")
        elif kind in (CAPSULE, CYLINDER):
            # (a URDF cylinder is read as the capsule around its axis: a capsule's own shape)
            ET.SubElement(shape, "cylinder", radius=f"{size[0]:.9g}", length=f"{2 * size[1]:.9g}")
        elif kind == BOX:
            ET.SubElement(shape, "box", size=" ".join(f"{2 * v:.9g}" for v in size))
        elif kind == MESH:
            ET.SubElement(shape, "mesh", filename=self._mesh(int(m.geom_dataid[g])))
        else:   # a plane or a height field on the robot: nothing hil checks against
            el.remove(shape)
            return False
        return True

    def _mesh(self, k: int) -> str:
        if k not in self.meshes:
            m = self.m
            v = m.mesh_vert[m.mesh_vertadr[k]:m.mesh_vertadr[k] + m.mesh_vertnum[k]]
            f = m.mesh_face[m.mesh_faceadr[k]:m.mesh_faceadr[k] + m.mesh_facenum[k]]
            name = f"mesh_{k}.stl"
            write_stl(self.folder / name, np.asarray(v, dtype=np.float32), np.asarray(f, dtype=np.int64))
            self.meshes[k] = name
        return self.meshes[k]

    def couplings(self) -> dict[int, tuple[int, float, float]]:
        """joint → (the joint it follows, c0, c1), joint = c0 + c1 · leader: the file's linear joint
        equalities, and the passive joints of its closed linkages that move in proportion to the
        linkage's servo (`_linkage_couplings`)."""
        if self._couplings is None:
            self._couplings = {**_linkage_couplings(self.m), **_linear_couplings(self.m)}
        return self._couplings

    def differentials(self) -> dict[int, tuple[float, list[tuple[int, float]]]]:
        """joint → (c0, [(leader, c), (leader2, c2)]), joint = c0 + c · leader + c2 · leader2: the gears
        and outputs of the file's differentials (`_tendon_couplings`)."""
        if self._differentials is None:
            self._differentials = _tendon_couplings(self.m)
        return self._differentials

    def _mimics(self, robot) -> None:
        """A joint an equality constraint ties to another (joint1 = c0 + c1·joint2), or a closed
        linkage to its servo, follows it. A polynomial coupling of higher degree, or a linkage
        whose joints do not move in proportion, is no mimic: those joints are left as the file's
        other passive joints are (`hil robots` lists them as moved by no actuator)."""
        m = self.m
        for j1, (j2, c0, c1) in self.couplings().items():
            follower = robot.find(f"joint[@name='{_name(m, 'jnt', j1, '')}']")
            leader = _name(m, "jnt", j2, "")
            if follower is not None and leader:
                ET.SubElement(follower, "mimic", joint=leader, multiplier=f"{c1:.9g}", offset=f"{c0:.9g}")
        for j, (c0, ((j1, c1), (j2, c2))) in self.differentials().items():   # hil's two-joint mimic
            follower = robot.find(f"joint[@name='{_name(m, 'jnt', j, '')}']")
            if follower is not None:
                ET.SubElement(follower, "mimic", joint=_name(m, "jnt", j1, ""), multiplier=f"{c1:.12g}",
                              offset=f"{c0:.12g}", joint2=_name(m, "jnt", j2, ""), multiplier2=f"{c2:.12g}")


def _linear_couplings(m) -> dict[int, tuple[int, float, float]]:
    """joint1 → (joint2, c0, c1) for each joint equality joint1 = c0 + c1·joint2 (a polynomial of
    higher degree is none)."""
    return {int(m.eq_obj1id[e]): (int(m.eq_obj2id[e]), float(m.eq_data[e][0]), float(m.eq_data[e][1]))
            for e in range(m.neq)
            if m.eq_type[e] == EQ_JOINT and m.eq_obj2id[e] >= 0 and not np.any(m.eq_data[e][2:5] != 0.0)}


COUPLING_SLACK_RAD = 0.1         # a fixed tendon held within this span couples its joints (ToddlerBot's waist: ±0.03)


def _actuated_joints(m) -> set[int]:
    """The joints an actuator of the file pulls on directly (a joint transmission)."""
    return {int(m.actuator_trnid[a][0]) for a in range(m.nu) if m.actuator_trntype[a] in (TRN_JOINT, TRN_JOINT_IN_PARENT)}


def _tendon_couplings(m) -> dict[int, tuple[float, list[tuple[int, float]]]]:
    """A differential: fixed tendons held (near) constant, each summing a passive joint and the same
    two servos' joints (ToddlerBot's waist: roll and yaw from two bevel gears). Solved for the joints
    the robot hangs from: where the servos' gears carry nothing driven, the gears follow the outputs
    (hil plans the outputs, as a gear train turned round); else the outputs follow the gears. Each
    as joint → (c0, [(leader, c), (leader2, c2)]); {} where no such pair of tendons is."""
    actuated = _actuated_joints(m)
    rows = []
    for t in range(m.ntendon):
        wraps = range(int(m.tendon_adr[t]), int(m.tendon_adr[t]) + int(m.tendon_num[t]))
        lo, hi = (float(v) for v in m.tendon_range[t])
        if (not m.tendon_limited[t] or hi - lo > COUPLING_SLACK_RAD
                or any(m.wrap_type[w] != WRAP_JOINT or m.jnt_type[m.wrap_objid[w]] != HINGE for w in wraps)):
            continue
        # length = Σ c·q, held at the middle of its range (measured from its length at qpos0)
        rows.append(({int(m.wrap_objid[w]): float(m.wrap_prm[w]) for w in wraps},
                     float(m.tendon_length0[t]) + (lo + hi) / 2))
    out: dict[int, tuple[float, list[tuple[int, float]]]] = {}
    for pair in _pairs_of_tendons(rows, actuated):
        out.update(_solved_differential(m, pair, actuated))
    return out


def _pairs_of_tendons(rows, actuated: set[int]) -> list:
    """Pairs of coupling tendons over the same two servos, each with one passive joint of its own."""
    pairs = []
    for i in range(len(rows)):
        for k in range(i + 1, len(rows)):
            (a, _), (b, _) = rows[i], rows[k]
            servos_a, servos_b = set(a) & actuated, set(b) & actuated
            passive_a, passive_b = set(a) - actuated, set(b) - actuated
            if (len(servos_a) == 2 and servos_a == servos_b and len(passive_a) == len(passive_b) == 1
                    and passive_a != passive_b):
                pairs.append((rows[i], rows[k]))
    return pairs


def _solved_differential(m, pair, actuated: set[int]) -> dict:
    (a, ra), (b, rb) = pair
    gears = sorted(set(a) & actuated)
    outputs = [next(iter(set(a) - actuated)), next(iter(set(b) - actuated))]
    C_out = np.array([[a.get(j, 0.0) for j in outputs], [b.get(j, 0.0) for j in outputs]])
    C_gear = np.array([[a.get(j, 0.0) for j in gears], [b.get(j, 0.0) for j in gears]])
    r = np.array([ra, rb])
    if abs(np.linalg.det(C_out)) < 1e-9 or abs(np.linalg.det(C_gear)) < 1e-9:
        return {}
    carry = _carries_an_actuated_joint(m, gears, actuated)
    if not carry:   # C_out·out + C_gear·gear = r  →  gear = C_gear⁻¹ (r − C_out·out)
        lead, follow, inv, C_lead = outputs, gears, np.linalg.inv(C_gear), C_out
    else:
        lead, follow, inv, C_lead = gears, outputs, np.linalg.inv(C_out), C_gear
    c0 = inv @ r
    c = -inv @ C_lead
    return {follow[k]: (float(c0[k]), [(lead[0], float(c[k, 0])), (lead[1], float(c[k, 1]))]) for k in range(2)}


def _carries_an_actuated_joint(m, joints, actuated: set[int]) -> bool:
    """Whether a body below any of `joints` (or on its own body, after it) has an actuated joint."""
    for j in joints:
        top = int(m.jnt_bodyid[j])
        for b in range(m.nbody):
            x = b
            while x > 0 and x != top:
                x = int(m.body_parentid[x])
            if x != top:
                continue
            first = int(m.body_jntadr[b])
            for k in range(first, first + int(m.body_jntnum[b])):
                if k in actuated and k not in joints and (b != top or k > j):
                    return True
    return False


EQ_CONNECT, EQ_WELD, OBJ_BODY = 0, 1, 1   # mjtEq, mjtObj
LINKAGE_STEPS = 32               # servo angles at which a linkage is closed, across its range
LINKAGE_LINEAR_RAD = math.radians(0.25)   # a passive joint this close to proportional to its servo follows it
                                          # (ToddlerBot's neck rods, not quite parallel: within 0.13°)
CLOSED_RESIDUAL = 1e-6           # a closure's constraint error (m, rad) taken as closed


def _linkage_couplings(m) -> dict[int, tuple[int, float, float]]:
    """passive joint → (servo joint, c0, c1) for each closed linkage of the file (bodies its
    `<weld>` or `<connect>` equalities join: a knee turned by rods, a parallelogram) that one
    servo moves and whose passive joints move in proportion to it (joint = c0 + c1 · servo,
    within LINKAGE_LINEAR_RAD across the servo's range). Found by closing the linkage with
    MuJoCo's own constraint errors at servo angles from the file's pose to each end of its range."""
    import mujoco   # lazy: loaded already (it compiled the file)

    actuated = _actuated_joints(m)
    coupled = set(_linear_couplings(m))
    linkages = _closed_linkages(m, actuated)
    if not linkages:
        return {}
    # closed in the file's own model, its options set for it meanwhile (dense constraint Jacobians,
    # no contacts or limits): a copy of a model with many meshes is a hundred megabytes more
    options = (int(m.opt.jacobian), int(m.opt.disableflags))
    m.opt.jacobian = mujoco.mjtJacobian.mjJAC_DENSE
    m.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONTACT) | int(mujoco.mjtDisableBit.mjDSBL_LIMIT)
    try:
        return _closed_in(mujoco, m, mujoco.MjData(m), linkages, actuated, coupled)
    finally:
        m.opt.jacobian, m.opt.disableflags = options


def _closed_in(mujoco, m, d, linkages, actuated: set[int], coupled: set[int]) -> dict[int, tuple[int, float, float]]:
    """`_linkage_couplings` of the `linkages`, closed in `m` (set up for it) with its data `d`."""
    out: dict[int, tuple[int, float, float]] = {}
    for eqs, joints in linkages:
        servo = sorted(joints & actuated)
        passive = sorted(joints - actuated)
        if (len(servo) != 1 or not passive or joints & coupled
                or any(m.jnt_type[j] != HINGE for j in joints)):
            continue   # several servos, or joints of other kinds: its passive joints stay unactuated
        traced = _trace_linkage(mujoco, m, d, eqs, servo[0], passive)
        if traced is None:
            continue
        a, p = traced
        A = np.column_stack([np.ones_like(a), a])
        coef, *_ = np.linalg.lstsq(A, p, rcond=None)
        if np.max(np.abs(A @ coef - p)) > LINKAGE_LINEAR_RAD:
            continue   # a four-bar whose joints do not turn in proportion: no mimic says it
        for k, j in enumerate(passive):
            out[j] = (servo[0], float(coef[0, k]), float(coef[1, k]))
    return out


def _closed_linkages(m, actuated: set[int]) -> list[tuple[list[int], set[int]]]:
    """The file's closed linkages: (their closing equalities, the joints around their loops), loops
    that share a joint other than a servo's taken together (a knee's two rods)."""
    def joints_up(b: int) -> set[int]:
        out = set()
        while b > 0:
            out.update(range(int(m.body_jntadr[b]), int(m.body_jntadr[b]) + int(m.body_jntnum[b])))
            b = int(m.body_parentid[b])
        return out

    loops = []
    for e in range(m.neq):
        if m.eq_type[e] in (EQ_CONNECT, EQ_WELD) and m.eq_objtype[e] == OBJ_BODY:
            joints = joints_up(int(m.eq_obj1id[e])) ^ joints_up(int(m.eq_obj2id[e]))
            if joints:
                loops.append(([e], joints))
    merged: list[tuple[list[int], set[int]]] = []
    for eqs, joints in loops:
        for other in [g for g in merged if (g[1] & joints) - actuated]:
            merged.remove(other)
            eqs, joints = eqs + other[0], joints | other[1]
        merged.append((eqs, joints))
    return merged


def _trace_linkage(mujoco, m, d, eqs: list[int], servo: int, passive: list[int]):
    """(servo angles, passive joints' angles at each) with the linkage closed, from the file's
    pose to each end of the servo's range (or as far as it closes); None where it does not close
    at the file's pose. `m`: the file's model with dense constraint Jacobians, `d` its data."""
    adr = np.array([m.jnt_qposadr[j] for j in passive])
    dof = np.array([m.jnt_dofadr[j] for j in passive])
    s = int(m.jnt_qposadr[servo])

    def close(q: np.ndarray) -> bool:
        # Gauss–Newton on the closures' errors: least squares, as a linkage drawn with two rods
        # not quite parallel (ToddlerBot's neck) closes only within a micrometre
        for _ in range(40):
            d.qpos[:] = q
            mujoco.mj_fwdPosition(m, d)
            n = int(d.nefc)
            rows = np.flatnonzero((d.efc_type[:n] == mujoco.mjtConstraint.mjCNSTR_EQUALITY)
                                  & np.isin(d.efc_id[:n], eqs))
            r = d.efc_pos[rows]
            if not len(r):
                return True
            J = d.efc_J[:n * m.nv].reshape(n, m.nv)[rows][:, dof]
            if not (np.all(np.isfinite(J)) and np.all(np.isfinite(r))):
                return False
            step = np.linalg.lstsq(J, r, rcond=None)[0]
            q[adr] -= step
            if np.max(np.abs(step)) < 1e-12:
                break
        return bool(np.max(np.abs(r)) < CLOSED_RESIDUAL)

    q0 = m.qpos0.copy()
    lo, hi = (m.jnt_range[servo] if m.jnt_limited[servo] else (-math.pi, math.pi))
    q0[s] = min(max(q0[s], lo), hi)
    if not close(q0):
        return None
    angles, values = [q0[s]], [q0[adr].copy()]
    for end in (hi, lo):
        if end == q0[s]:
            continue
        q = q0.copy()
        n = max(1, int(math.ceil(LINKAGE_STEPS * abs(end - q0[s]) / max(hi - lo, 1e-9))))
        for a in np.linspace(q0[s], end, n + 1)[1:]:
            q[s] = a
            if not close(q):
                break   # the linkage locks here: its servo's range beyond is not reached
            angles.append(a)
            values.append(q[adr].copy())
    return np.array(angles), np.array(values)


def write_stl(path: Path, vertices: np.ndarray, faces: np.ndarray) -> None:
    """A binary STL of the triangles `faces` (indices into `vertices`)."""
    tri = vertices[faces] if len(faces) else np.zeros((0, 3, 3), dtype=np.float32)
    rec = np.zeros(len(tri), dtype=[("n", "<f4", 3), ("v", "<f4", (3, 3)), ("attr", "<u2")])
    rec["v"] = tri
    with open(path, "wb") as out:
        out.write(b"hil: a mesh MuJoCo compiled from an MJCF".ljust(80, b" "))
        out.write(struct.pack("<I", len(tri)))
        out.write(rec.tobytes())
