"""Robots as data: `load(name)` reads `hil/robots/data/<name>.toml` into a `RobotModel`.

A data file describes joints either as a standard Denavit–Hartenberg table (`[dh]`)
or as explicit `[[joint]]` entries (placement 3x4 in model units, axis, limits), plus
named frames, shapes, masses and poses. `mirror_of` builds a limb as the mirror image
of another across the x–z plane of the base frame (see docs/robots.md).
Angles in data files are degrees and lengths are in model units
(`scale_m_per_unit`, 1 for metres); the loaded model is SI.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from hil.errors import ConfigError, InputError, did_you_mean
from hil.inputs import parse_toml, read_text
from hil.kinematics.rotations import rpy_matrix
from hil.robots import mjcf, servos, urdf
from hil.robots.model import Joint, RobotModel, Shape

DATA_DIR = Path(__file__).with_name("data")
_MIRROR = np.diag([1.0, -1.0, 1.0, 1.0])
_cache: dict[str, RobotModel] = {}

__all__ = ["load", "available", "RobotModel", "Joint", "Shape", "DATA_DIR"]


def available() -> list[str]:
    """Names of the robots shipped with hil."""
    return sorted(p.stem for p in DATA_DIR.glob("*.toml"))


def load(name: str | Path) -> RobotModel:
    """Load a robot model: a shipped name (`puma560`, `humanoid17`, `so101`, see `available()`), a
    URDF file (`*.urdf`), or a robot TOML file (ours, or a side file naming a URDF: docs/robots.md)."""
    if not isinstance(name, (str, Path)):
        raise ConfigError(f"robot name must be a string, got {name!r}")
    key = str(name)
    if key in _cache:
        return _cache[key]
    path = Path(key)
    if path.is_dir():
        raise ConfigError(f"robot {key!r} is a folder; give a robot file in it (.urdf, MJCF .xml or .toml) or a shipped name "
                          f"({', '.join(available())})")
    shipped = path.suffix not in (".toml", ".urdf", ".xml", ".mjcf")
    if shipped:
        path = DATA_DIR / f"{key}.toml"
        if "/" in key or not path.exists():
            raise ConfigError(f"unknown robot {key!r}{did_you_mean(key, available())}; shipped robots: "
                              f"{', '.join(available())}; or give a "
                              ".urdf, MJCF (.xml) or .toml file")
    if not path.is_file():
        raise ConfigError(f"robot file {path} " + ("is not a regular file (a device, a pipe?)" if os.path.lexists(path)
                                                    else "does not exist"))
    if path.suffix == ".urdf":
        model = urdf.build(str(path))
    elif path.suffix in (".xml", ".mjcf"):
        model = _from_mjcf(path)
    else:
        model = _load_toml(path)
    model.spec = key if shipped else str(path.resolve())
    if "servo" in model.meta:   # its numbers checked now, not when a plan or a physics run needs them
        servos.servo_table(model)
    _cache[key] = model
    return model


def _from_mjcf(path: Path) -> RobotModel:
    root = mjcf.root_tag(str(path))
    if root == "robot":   # a URDF named .xml
        return urdf.build(str(path))
    if root != "mujoco":
        raise ConfigError(f"robot file {path}: neither an MJCF (root element <mujoco>) nor a URDF (<robot>)"
                          + (f"; its root element is <{root}>" if root else "") + "; a robot file is a .urdf, an MJCF "
                          ".xml or a .toml")
    side = {"robot": {"description": f"from {path.name} (MJCF, compiled by MuJoCo)"}}
    floor = mjcf.floor_of(str(path))
    if floor is not None:   # a robot fixed above its world's floor (on a stand, a table)
        side["robot"]["floor_z_m"] = floor
    servo = mjcf.servo_table_of(str(path))
    if servo:   # its makers' servo model: the position actuators
        side["servo"] = servo
    poses = mjcf.poses_of(str(path))
    if poses:   # its keyframes: "home" is how its makers stand it
        side["poses"] = poses
    allowed = mjcf.allowed_collisions_of(str(path))
    if allowed:   # the bodies its makers let touch
        side["collision"] = {"allowed": allowed}
    written = mjcf.to_urdf(str(path))
    try:
        model = urdf.build(written, side, str(path), legs_by_tree=False)
    except ConfigError as e:   # about the URDF written from it: said of the file the user gave
        said = str(e).replace(written, str(path)).replace("the URDF's <limit>", "the MJCF's <joint range>")
        raise ConfigError(said) from None
    return _with_its_file(model, str(path))


def _with_its_file(model: RobotModel, mjcf_path: str) -> RobotModel:
    """An MJCF robot remembers its file: physics simulates it from there (hil.physics.build); and
    which of its joints no actuator moves (said by `hil robots`; a walk is not planned through
    them)."""
    model.meta["mjcf"] = str(Path(mjcf_path).resolve())
    gears = mjcf.differential_inputs_of(mjcf_path)
    if gears:
        model.meta["differential_inputs"] = gears
        outputs = sorted({o for pair in gears.values() for o in pair})
        model.meta.setdefault("notes", []).append(
            f"{', '.join(sorted(gears))}: a differential's servos, turning {' and '.join(outputs)} together; hil "
            f"plans, checks and draws {' and '.join(outputs)} and turns the gears with them; over a bus each servo "
            f"is told its gear's angle from both (a board config's [[joint]] names the gear its servo sits on: "
            f"`hil robots --bus` prints one)")
    _servos_at_their_outputs(model)
    passive = [j for j in mjcf.unactuated_of(mjcf_path) if j in model.joint_names]
    if passive:
        model.meta["unactuated_joints"] = passive
        # a range to set in a side file means nothing for a joint no servo turns (a linkage's rod)
        notes = [n for n in model.meta.get("notes", []) if not any(n.startswith(f"{j}: ") for j in passive)]
        model.meta["notes"] = notes
    return model


def _servos_at_their_outputs(model: RobotModel) -> None:
    """A servo the file puts on a transmission's input (a gear, a linkage's plate) whose output hil
    plans (`urdf._gear_trains_turned_round`), or on a differential's gear (both its outputs): its
    `[servo]` numbers moved to the output joints, as each output feels them
    (`servos.through_transmission`, a differential's two servos `together`); physics drives the
    file's actuator through the coupling where it can (hil.physics.build)."""
    table = model.meta.get("servo")
    joints = table.get("joint") if isinstance(table, dict) else None
    if not isinstance(joints, dict):
        return
    inputs = model.meta.get("transmission_inputs", {})
    gears = model.meta.get("differential_inputs", {})
    felt: dict[str, list] = {}
    for f in model.followers:
        if f.name not in joints or not (inputs.get(f.name) == model.joint_names[f.leader] or f.name in gears):
            continue
        entry = joints.pop(f.name)
        for lead, multiplier in f.leaders():
            felt.setdefault(model.joint_names[lead], []).append(servos.through_transmission(entry, multiplier))
    for output, entries in felt.items():
        if output not in joints:   # (a servo of the output's own goes over what its transmission gives)
            joints[output] = servos.together(entries)


def _load_toml(path: Path) -> RobotModel:
    try:
        data = parse_toml(read_text(str(path), "robot file"), f"robot file {path}")
    except InputError as e:
        raise ConfigError(str(e)) from None
    robot = data.get("robot")
    if isinstance(robot, dict) and ("urdf" in robot or "mjcf" in robot):
        key = "urdf" if "urdf" in robot else "mjcf"
        source = _urdf_of(robot[key], path, key)
        if mjcf.is_mjcf(source):
            actuators = mjcf.servo_table_of(source)
            if actuators:   # a side file's own [servo] goes over the MJCF's actuators
                data = {**data, "servo": servos.over_actuators(actuators, data.get("servo", {}))}
            keyframes = mjcf.poses_of(source)
            if keyframes:   # the file's keyframes, under the side file's own poses
                data = {**data, "poses": {**keyframes, **data.get("poses", {})}} if isinstance(data.get("poses", {}), dict) else data
            excluded = mjcf.allowed_collisions_of(source)
            own = data.get("collision", {})
            if excluded and isinstance(own, dict) and isinstance(own.get("allowed", []), list):
                data = {**data, "collision": {**own, "allowed": excluded + own.get("allowed", [])}}
            if "description" not in robot:   # (the URDF MuJoCo's file was turned into is no one's name for it)
                data = {**data, "robot": {**data["robot"], "description": f"from {Path(source).name} (MJCF, compiled by MuJoCo)"}}
            floor = mjcf.floor_of(source)
            if floor is not None and "floor_z_m" not in robot:   # (the side file's own goes over it)
                data = {**data, "robot": {**data["robot"], "floor_z_m": floor}}
            return _with_its_file(urdf.build(mjcf.to_urdf(source), data, str(path), legs_by_tree=False), source)
        return urdf.build(source, data, str(path))
    try:
        return _build(data, str(path))
    except ConfigError:
        raise
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:
        # a file that parses but does not describe a robot: say where, not how the builder tripped
        raise ConfigError(f"robot file {path}: not a robot description ({type(e).__name__}: {e}); see "
                          f"{DATA_DIR / 'puma560.toml'} for the format") from e


MAKERS_FILES = "; the robot's own files go there (the side file's comments say where they come from)"


def _urdf_of(ref, side: Path, key: str = "urdf") -> str:
    """The robot file a side file names under `key` (urdf or mjcf): a path relative to the side file,
    or package://P/… (ROS lookup)."""
    if not isinstance(ref, str) or not ref:
        raise ConfigError(f"{side}: [robot] {key} must be a file path or package:// address, got {ref!r}")
    try:
        found = urdf.resolve_file(ref, str(side))
    except FileNotFoundError as e:
        hint = (" (pip install example-robot-data)" if ref.startswith("package://example-robot-data/") else
                "" if ref.startswith("package://") else MAKERS_FILES)
        raise ConfigError(f"{side}: [robot] {key} = {ref!r}: {e}{hint}") from None
    except urdf.OutsideError as e:   # a FIFO, a device, a link out of the side file's folders
        raise ConfigError(f"{side}: [robot] {key}: {e}; point it at the robot's own file") from None
    if not found.is_file():
        raise ConfigError(f"{side}: [robot] {key} = {ref!r}: {found} does not exist{MAKERS_FILES}")
    return str(found)


# --------------------------------------------------------------------------- helpers
def _get(d: dict, key: str, where: str, kind=None, default: Any = ...):
    if key not in d:
        if default is ...:
            raise ConfigError(f"{where}: missing key {key!r}")
        return default
    v = d[key]
    numbers = kind == (int, float)
    if kind is not None and (not isinstance(v, kind) or (numbers and isinstance(v, bool))):
        what = "a number" if numbers else getattr(kind, "__name__", kind)
        raise ConfigError(f"{where}: {key!r} must be {what}, got {v!r}")
    if numbers and not math.isfinite(v):
        raise ConfigError(f"{where}: {key!r} must be a finite number, got {v!r}")
    return v


def _vec(v, n: int, where: str) -> np.ndarray:
    try:
        a = np.asarray(v, dtype=np.float64)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: expected {n} numbers, got {v!r}") from None
    if a.shape != (n,) or not np.all(np.isfinite(a)):
        raise ConfigError(f"{where}: expected {n} finite numbers, got {v!r}")
    return a


def _transform(rows, scale: float, where: str) -> np.ndarray:
    try:
        a = np.asarray(rows, dtype=np.float64)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: expected a 3x4 matrix, got {rows!r}") from None
    if a.shape != (3, 4) or not np.all(np.isfinite(a)):
        raise ConfigError(f"{where}: expected a finite 3x4 matrix [R | p], got shape {a.shape}")
    R = a[:, :3]
    if not np.allclose(R @ R.T, np.eye(3), atol=1e-9) or np.linalg.det(R) < 0:
        raise ConfigError(f"{where}: rotation part is not a proper rotation (det = {np.linalg.det(R):+.6f})")
    T = np.eye(4)
    T[:3, :3] = R
    T[:3, 3] = urdf.checked_lengths(a[:, 3] * scale, where)
    return T


def _offset(entry: dict, scale: float, where: str) -> np.ndarray:
    if "offset" in entry:
        return _transform(entry["offset"], scale, where)
    T = np.eye(4)
    if "translation" in entry:
        w = where + ".translation"
        T[:3, 3] = urdf.checked_lengths(_vec(entry["translation"], 3, w) * scale, w)
    if "rpy_deg" in entry:
        r, p, y = np.radians(_vec(entry["rpy_deg"], 3, where + ".rpy_deg"))
        T[:3, :3] = rpy_matrix(r, p, y)
    return T


def dh_constant(a: float, d: float, alpha: float) -> np.ndarray:
    """Tz(d) Tx(a) Rx(alpha): the part of a standard DH transform after Rz(theta)."""
    ca, sa = math.cos(alpha), math.sin(alpha)
    return np.array([[1, 0, 0, a], [0, ca, -sa, 0], [0, sa, ca, d], [0, 0, 0, 1.0]])


# ---------------------------------------------------------------------------- build
def _build(data: dict, source: str) -> RobotModel:
    b = _Builder(data, source)
    b.dh_joints()
    b.listed_joints()
    b.named_frames()
    shapes = b.shapes()
    masses, coms, inertias = b.masses()
    home = np.radians(np.array(b.home_deg, dtype=float))
    poses = b.poses(home)
    meta = b.meta()
    model = RobotModel(b.name, b.joints, b.frames, b.tool_frame, b.base_frame, b.link_names, home, poses, shapes,
                       masses, coms, meta, None, source)
    if not inertias:
        return model
    full = model.inertias.copy()   # the box estimate where an entry gives none
    for row, tensor in inertias.items():
        full[row] = tensor
    return RobotModel(b.name, b.joints, b.frames, b.tool_frame, b.base_frame, b.link_names, home, poses, shapes,
                      masses, coms, meta, None, source, full)


class _Builder:
    """A robot TOML's tables, read in order: [dh] or [[joint]]s, [[frame]]s, [[shape]]s, [[mass]]es,
    [poses], [robot]'s meta; ConfigError naming the file, the entry and the key otherwise."""

    def __init__(self, data: dict, source: str) -> None:
        self.data, self.where = data, source
        self.robot = _get(data, "robot", source, dict)
        w = source + " [robot]"
        self.name = _get(self.robot, "name", w, str)
        self.scale = float(_get(self.robot, "scale_m_per_unit", w, (int, float), 1.0))
        self.base_frame = _get(self.robot, "base_frame", w, str, "base")
        self.tool_frame = _get(self.robot, "tool_frame", w, str)
        mirror_cfg = data.get("mirror", {})
        self.left, self.right = mirror_cfg.get("left_prefix", "l_"), mirror_cfg.get("right_prefix", "r_")
        self.joints: list[Joint] = []
        self.link_names: list[str] = []
        self.frames: dict[str, tuple[int, np.ndarray]] = {}
        self.home_deg: list[float] = []
        self.meta_dh = None
        self._T_zero: list[np.ndarray] | None = None

    def link_index(self, link: str, ctx: str) -> int:
        if link == self.base_frame:
            return -1
        if link not in self.link_names:
            raise ConfigError(f"{ctx}: unknown link {link!r}; links are {self.base_frame}, "
                              f"{', '.join(self.link_names)}")
        return self.link_names.index(link)

    def mirrored_link(self, link: str) -> str:
        return self.right + link[len(self.left):] if link.startswith(self.left) else link

    def dh_joints(self) -> None:
        if "dh" not in self.data:
            return
        dh, w = self.data["dh"], self.where + " [dh]"
        jn = _get(dh, "joints", w, list)
        n = len(jn)
        a = urdf.checked_lengths(_vec(_get(dh, "a_m", w), n, w + ".a_m"), w + ".a_m")
        d = urdf.checked_lengths(_vec(_get(dh, "d_m", w), n, w + ".d_m"), w + ".d_m")
        alpha = np.radians(_vec(_get(dh, "alpha_deg", w), n, w + ".alpha_deg"))
        lo = np.radians(_vec(_get(dh, "lower_deg", w), n, w + ".lower_deg"))
        hi = np.radians(_vec(_get(dh, "upper_deg", w), n, w + ".upper_deg"))
        vel = np.radians(_vec(_get(dh, "velocity_deg_s", w), n, w + ".velocity_deg_s"))
        acc = np.radians(_vec(_get(dh, "acceleration_deg_s2", w), n, w + ".acceleration_deg_s2"))
        self.home_deg = list(_vec(_get(dh, "home_deg", w), n, w + ".home_deg"))
        links = _get(dh, "links", w, list, [f"link{i + 1}" for i in range(n)])
        for i in range(n):
            placement = np.eye(4) if i == 0 else dh_constant(a[i - 1], d[i - 1], alpha[i - 1])
            self.joints.append(Joint(str(jn[i]), i - 1, placement, np.array([0.0, 0.0, 1.0]),
                                     lo[i], hi[i], vel[i], acc[i]))
            self.link_names.append(str(links[i]))
        last = dh_constant(a[n - 1], d[n - 1], alpha[n - 1])
        for fname in _get(dh, "end_frames", w, list, ["flange"]):
            self.frames[str(fname)] = (n - 1, last)
        self.meta_dh = {"a": a, "d": d, "alpha": alpha}

    def listed_joints(self) -> None:
        by_name: dict[str, dict] = {}
        for k, entry in enumerate(self.data.get("joint", [])):
            jname = _get(entry, "name", f"{self.where} [[joint]] #{k + 1}", str)
            w = f"{self.where} joint {jname!r}"
            if "mirror_of" in entry:
                parent_link, placement, axis, lo, hi, vel, acc, home = self._mirrored_joint(entry, by_name, w)
            else:
                parent_link, placement, axis, lo, hi, vel, acc, home = self._joint(entry, w)
            if not lo < hi:
                raise ConfigError(f"{w}: lower limit must be below upper limit")
            if not lo <= math.radians(home) <= hi:
                raise ConfigError(f"{w}: home {home}° outside [{math.degrees(lo):.1f}, {math.degrees(hi):.1f}]°")
            parent = self.link_index(parent_link, w)
            self.joints.append(Joint(jname, parent, placement, axis, lo, hi, vel, acc))
            self.link_names.append(str(entry.get("link", jname)))
            self.home_deg.append(home)
            by_name[jname] = dict(entry, _parent_link=parent_link, _home_deg=home)
        n = len(self.joints)
        if n == 0:
            raise ConfigError(f"{self.where}: no joints ([dh] or [[joint]])")
        if len(set(j.name for j in self.joints)) != n:
            raise ConfigError(f"{self.where}: joint names must be unique")

    def _mirrored_joint(self, entry: dict, by_name: dict, w: str) -> tuple:
        src_name = entry["mirror_of"]
        if src_name not in by_name:
            raise ConfigError(f"{w}: mirror_of {src_name!r} must name an earlier joint")
        src = by_name[src_name]
        src_joint = self.joints[joint_names_index(self.joints, src_name)]
        parent_link = src["_parent_link"]
        if parent_link.startswith(self.left):
            parent_link = self.right + parent_link[len(self.left):]
        placement = _MIRROR @ src_joint.placement @ _MIRROR
        axis = -(_MIRROR[:3, :3] @ src_joint.axis)
        return (parent_link, placement, axis, src_joint.lower, src_joint.upper, src_joint.velocity_limit,
                src_joint.acceleration_limit, src["_home_deg"])

    def _joint(self, entry: dict, w: str) -> tuple:
        parent_link = _get(entry, "parent", w, str)
        placement = _transform(_get(entry, "placement", w), self.scale, w + ".placement")
        axis = _vec(_get(entry, "axis", w), 3, w + ".axis")
        norm = np.linalg.norm(axis)
        if norm < 1e-9:
            raise ConfigError(f"{w}: axis must not be zero")
        limits = [math.radians(float(_get(entry, key, w, (int, float))))
                  for key in ("lower_deg", "upper_deg", "velocity_deg_s", "acceleration_deg_s2")]
        return (parent_link, placement, axis / norm, *limits, float(entry.get("home_deg", 0.0)))

    def named_frames(self) -> None:
        for k, entry in enumerate(self.data.get("frame", [])):
            w = f"{self.where} [[frame]] #{k + 1}"
            fname = _get(entry, "name", w, str)
            link = _get(entry, "link", w, str)
            off = _offset(entry, self.scale, w)
            self.frames[fname] = (self.link_index(link, w), off)
            if entry.get("mirror", False):
                self.frames[self.mirrored_link(fname)] = (self.link_index(self.mirrored_link(link), w),
                                                          _MIRROR @ off @ _MIRROR)

    def T_zero(self, link_idx: int) -> np.ndarray:
        """A link's pose with every joint at zero (for entries given in the base frame, in_base_at_zero)."""
        if self._T_zero is None:
            self._T_zero = []
            for j in self.joints:
                self._T_zero.append((np.eye(4) if j.parent < 0 else self._T_zero[j.parent]) @ j.placement)
        return self._T_zero[link_idx]

    def to_link(self, link_idx: int, point: np.ndarray, in_base: bool) -> np.ndarray:
        if not in_base or link_idx < 0:
            return point
        T = self.T_zero(link_idx)
        return T[:3, :3].T @ (point - T[:3, 3])

    def half_to_link(self, link_idx: int, half: np.ndarray, in_base: bool) -> np.ndarray:
        if not in_base or link_idx < 0:
            return half
        return np.abs(self.T_zero(link_idx)[:3, :3].T) @ half

    def shapes(self) -> list[Shape]:
        S3, scale, shapes = _MIRROR[:3, :3], self.scale, []
        for k, entry in enumerate(self.data.get("shape", [])):
            w = f"{self.where} [[shape]] #{k + 1}"
            link = _get(entry, "link", w, str)
            kind = _get(entry, "kind", w, str)
            if kind not in ("capsule", "box"):
                raise ConfigError(f"{w}: kind must be 'capsule' or 'box', got {kind!r}")
            in_base = bool(entry.get("in_base_at_zero", False))
            p0 = _vec(_get(entry, "p0", w), 3, w + ".p0") * scale
            p1 = _vec(entry.get("p1", [0, 0, 0]), 3, w + ".p1") * scale
            half = _vec(entry.get("half", [0, 0, 0]), 3, w + ".half") * scale
            radius = float(entry.get("radius", 0.0)) * scale
            sname = entry.get("name", link)
            variants = [(link, p0, p1, sname)]
            if entry.get("mirror", False):
                # mirroring maps base-frame points and link-local points alike: p -> S p
                variants.append((self.mirrored_link(link), S3 @ p0, S3 @ p1, self.mirrored_link(sname)))
            for lk, a0, a1, nm in variants:
                li = self.link_index(lk, w)
                shapes.append(Shape(li, kind, tuple(self.to_link(li, a0, in_base)), tuple(self.to_link(li, a1, in_base)),
                                    radius, tuple(self.half_to_link(li, half, in_base)), nm))
        return shapes

    def masses(self) -> tuple[np.ndarray, np.ndarray, dict[int, np.ndarray]]:
        n, S3 = len(self.joints), _MIRROR[:3, :3]
        masses, coms, inertias = np.zeros(n + 1), np.zeros((n + 1, 3)), {}
        for k, entry in enumerate(self.data.get("mass", [])):
            w = f"{self.where} [[mass]] #{k + 1}"
            link = _get(entry, "link", w, str)
            m = float(_get(entry, "mass_kg", w, (int, float)))
            if not m >= 0:
                raise ConfigError(f"{w}: mass_kg must be ≥ 0")
            in_base = bool(entry.get("in_base_at_zero", False))
            c = _vec(_get(entry, "com", w), 3, w + ".com") * self.scale
            inertia = _inertia(entry, w)
            items = [(link, c, inertia)]
            if entry.get("mirror", False):
                items.append((self.mirrored_link(link), S3 @ c, None if inertia is None else S3 @ inertia @ S3))
            for lk, cc, ii in items:
                li = self.link_index(lk, w)
                masses[li + 1] = m
                coms[li + 1] = self.to_link(li, cc, in_base)
                if ii is not None:
                    R = self.T_zero(li)[:3, :3] if in_base and li >= 0 else np.eye(3)
                    inertias[li + 1] = R.T @ ii @ R
        if masses.sum() <= 0:
            raise ConfigError(f"{self.where}: total mass must be positive ([[mass]] entries)")
        return masses, coms, inertias

    def poses(self, home: np.ndarray) -> dict[str, np.ndarray]:
        poses: dict[str, np.ndarray] = {"home": home}
        names = [j.name for j in self.joints]
        for pname, pdeg in self.data.get("poses", {}).items():
            w = f"{self.where} [poses].{pname}"
            if isinstance(pdeg, dict):  # {joint: deg}, others from home
                q = home.copy()
                for jname, v in pdeg.items():
                    if jname not in names:
                        raise ConfigError(f"{w}: unknown joint {jname!r}")
                    q[names.index(jname)] = math.radians(float(v))
            else:
                q = np.radians(_vec(pdeg, len(names), w))
            for i, j in enumerate(self.joints):
                if not j.lower - 1e-12 <= q[i] <= j.upper + 1e-12:
                    raise ConfigError(f"{w}: {j.name} = {math.degrees(q[i]):.2f}° is outside its range")
            poses[pname] = q
        return poses

    def meta(self) -> dict[str, object]:
        kind = self.robot.get("kind", "arm")
        if kind not in ("arm", "humanoid"):
            raise ConfigError(f"{self.where}: [robot] kind = {kind!r}; kinds are 'arm' and 'humanoid'")
        if kind == "humanoid" and not {"l_sole", "r_sole"} <= set(self.frames):
            raise ConfigError(f"{self.where}: a humanoid needs frames named l_sole and r_sole (its soles: walking "
                              "and balance use them)")
        meta: dict[str, object] = {k: v for k, v in self.robot.items() if k not in ("name",)}
        meta["scale_m_per_unit"] = self.scale
        if self.meta_dh is not None:
            meta["dh"] = self.meta_dh
        for key in ("workspace", "balance", "wire", "servo"):
            if key in self.data:
                meta[key] = self.data[key]
        if "path" in self.data:
            meta["path"] = urdf.path_section(self.data["path"], self.where)
        return meta


def _inertia(entry: dict, where: str) -> np.ndarray | None:
    """A [[mass]] entry's `inertia_kgm2` (about its centre of mass): [Ixx, Iyy, Izz] or
    [Ixx, Iyy, Izz, Ixy, Ixz, Iyz], kg·m², in the frame its `com` is given in; None if absent."""
    if "inertia_kgm2" not in entry:
        return None
    v = entry["inertia_kgm2"]
    if not isinstance(v, list) or len(v) not in (3, 6) or not all(isinstance(x, (int, float)) for x in v):
        raise ConfigError(f"{where}: inertia_kgm2 must be [Ixx, Iyy, Izz] or [Ixx, Iyy, Izz, Ixy, Ixz, Iyz] (kg·m²)")
    a = [float(x) for x in v] + [0.0] * (6 - len(v))
    I = np.array([[a[0], a[3], a[4]], [a[3], a[1], a[5]], [a[4], a[5], a[2]]])
    if not np.all(np.isfinite(I)) or np.linalg.eigvalsh(I).min() < -1e-12:
        raise ConfigError(f"{where}: inertia_kgm2 {v} is not a physical inertia (finite, positive semi-definite)")
    return I


def joint_names_index(joints: list[Joint], name: str) -> int:
    for i, j in enumerate(joints):
        if j.name == name:
            return i
    raise ConfigError(f"unknown joint {name!r}")
