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
from pathlib import Path
from typing import Any

import numpy as np

from hil.errors import ConfigError, InputError
from hil.inputs import parse_toml, read_text
from hil.kinematics.rotations import rpy_matrix
from hil.robots import servos, urdf
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
    shipped = path.suffix not in (".toml", ".urdf")
    if shipped:
        path = DATA_DIR / f"{key}.toml"
        if "/" in key or not path.exists():
            raise ConfigError(f"unknown robot {key!r}; shipped robots: {', '.join(available())}; or give a "
                              ".urdf or .toml file")
    if not path.is_file():
        raise ConfigError(f"robot file {path} does not exist")
    if path.suffix == ".urdf":
        model = urdf.build(str(path))
    else:
        model = _load_toml(path)
    model.spec = key if shipped else str(path.resolve())
    if "servo" in model.meta:   # its numbers checked now, not when a plan or a physics run needs them
        servos.servo_table(model)
    _cache[key] = model
    return model


def _load_toml(path: Path) -> RobotModel:
    try:
        data = parse_toml(read_text(str(path), "robot file"), f"robot file {path}")
    except InputError as e:
        raise ConfigError(str(e)) from None
    robot = data.get("robot")
    if isinstance(robot, dict) and "urdf" in robot:
        return urdf.build(_urdf_of(robot["urdf"], path), data, str(path))
    try:
        return _build(data, str(path))
    except ConfigError:
        raise
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:
        # a file that parses but does not describe a robot: say where, not how the builder tripped
        raise ConfigError(f"robot file {path}: not a robot description ({type(e).__name__}: {e}); see "
                          f"{DATA_DIR / 'puma560.toml'} for the format") from e


def _urdf_of(ref, side: Path) -> str:
    """The URDF a side file names: a path relative to the side file, or package://P/… (ROS lookup)."""
    if not isinstance(ref, str) or not ref:
        raise ConfigError(f"{side}: [robot] urdf must be a file path or package:// address, got {ref!r}")
    try:
        found = urdf.resolve_file(ref, str(side))
    except FileNotFoundError as e:
        hint = " (pip install example-robot-data)" if ref.startswith("package://example-robot-data/") else ""
        raise ConfigError(f"{side}: [robot] urdf = {ref!r}: {e}{hint}") from None
    if not found.is_file():
        raise ConfigError(f"{side}: [robot] urdf = {ref!r}: {found} does not exist")
    return str(found)


# --------------------------------------------------------------------------- helpers
def _get(d: dict, key: str, where: str, kind=None, default: Any = ...):
    if key not in d:
        if default is ...:
            raise ConfigError(f"{where}: missing key {key!r}")
        return default
    v = d[key]
    if kind is not None and not isinstance(v, kind):
        raise ConfigError(f"{where}: {key!r} must be {getattr(kind, '__name__', kind)}, got {v!r}")
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
    T[:3, 3] = a[:, 3] * scale
    return T


def _offset(entry: dict, scale: float, where: str) -> np.ndarray:
    if "offset" in entry:
        return _transform(entry["offset"], scale, where)
    T = np.eye(4)
    if "translation" in entry:
        T[:3, 3] = _vec(entry["translation"], 3, where + ".translation") * scale
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
    where = source
    robot = _get(data, "robot", where, dict)
    name = _get(robot, "name", where + " [robot]", str)
    scale = float(_get(robot, "scale_m_per_unit", where + " [robot]", (int, float), 1.0))
    base_frame = _get(robot, "base_frame", where + " [robot]", str, "base")
    tool_frame = _get(robot, "tool_frame", where + " [robot]", str)
    mirror_cfg = data.get("mirror", {})
    left, right = mirror_cfg.get("left_prefix", "l_"), mirror_cfg.get("right_prefix", "r_")

    joints: list[Joint] = []
    link_names: list[str] = []
    frames: dict[str, tuple[int, np.ndarray]] = {}
    home_deg: list[float] = []

    def link_index(link: str, ctx: str) -> int:
        if link == base_frame:
            return -1
        if link not in link_names:
            raise ConfigError(f"{ctx}: unknown link {link!r}; links are {base_frame}, {', '.join(link_names)}")
        return link_names.index(link)

    if "dh" in data:
        dh = data["dh"]
        w = where + " [dh]"
        jn = _get(dh, "joints", w, list)
        n = len(jn)
        a = _vec(_get(dh, "a_m", w), n, w + ".a_m")
        d = _vec(_get(dh, "d_m", w), n, w + ".d_m")
        alpha = np.radians(_vec(_get(dh, "alpha_deg", w), n, w + ".alpha_deg"))
        lo = np.radians(_vec(_get(dh, "lower_deg", w), n, w + ".lower_deg"))
        hi = np.radians(_vec(_get(dh, "upper_deg", w), n, w + ".upper_deg"))
        vel = np.radians(_vec(_get(dh, "velocity_deg_s", w), n, w + ".velocity_deg_s"))
        acc = np.radians(_vec(_get(dh, "acceleration_deg_s2", w), n, w + ".acceleration_deg_s2"))
        home_deg = list(_vec(_get(dh, "home_deg", w), n, w + ".home_deg"))
        links = _get(dh, "links", w, list, [f"link{i + 1}" for i in range(n)])
        for i in range(n):
            placement = np.eye(4) if i == 0 else dh_constant(a[i - 1], d[i - 1], alpha[i - 1])
            joints.append(Joint(str(jn[i]), i - 1, placement, np.array([0.0, 0.0, 1.0]),
                                lo[i], hi[i], vel[i], acc[i]))
            link_names.append(str(links[i]))
        last = dh_constant(a[n - 1], d[n - 1], alpha[n - 1])
        for fname in _get(dh, "end_frames", w, list, ["flange"]):
            frames[str(fname)] = (n - 1, last)
        meta_dh = {"a": a, "d": d, "alpha": alpha}
    else:
        meta_dh = None

    by_name: dict[str, dict] = {}
    for k, entry in enumerate(data.get("joint", [])):
        w = f"{where} [[joint]] #{k + 1}"
        jname = _get(entry, "name", w, str)
        w = f"{where} joint {jname!r}"
        if "mirror_of" in entry:
            src_name = entry["mirror_of"]
            if src_name not in by_name:
                raise ConfigError(f"{w}: mirror_of {src_name!r} must name an earlier joint")
            src = by_name[src_name]
            src_joint = joints[joint_names_index(joints, src_name)]
            parent_link = src["_parent_link"]
            if parent_link.startswith(left):
                parent_link = right + parent_link[len(left):]
            placement = _MIRROR @ src_joint.placement @ _MIRROR
            axis = -(_MIRROR[:3, :3] @ src_joint.axis)
            lo, hi = src_joint.lower, src_joint.upper
            vel, acc = src_joint.velocity_limit, src_joint.acceleration_limit
            home = src["_home_deg"]
            link = entry.get("link", jname)
        else:
            parent_link = _get(entry, "parent", w, str)
            placement = _transform(_get(entry, "placement", w), scale, w + ".placement")
            axis = _vec(_get(entry, "axis", w), 3, w + ".axis")
            norm = np.linalg.norm(axis)
            if norm < 1e-9:
                raise ConfigError(f"{w}: axis must not be zero")
            axis = axis / norm
            lo = math.radians(float(_get(entry, "lower_deg", w, (int, float))))
            hi = math.radians(float(_get(entry, "upper_deg", w, (int, float))))
            vel = math.radians(float(_get(entry, "velocity_deg_s", w, (int, float))))
            acc = math.radians(float(_get(entry, "acceleration_deg_s2", w, (int, float))))
            home = float(entry.get("home_deg", 0.0))
            link = entry.get("link", jname)
        if not lo < hi:
            raise ConfigError(f"{w}: lower limit must be below upper limit")
        if not lo <= math.radians(home) <= hi:
            raise ConfigError(f"{w}: home {home}° outside [{math.degrees(lo):.1f}, {math.degrees(hi):.1f}]°")
        parent = link_index(parent_link, w)
        joints.append(Joint(jname, parent, placement, axis, lo, hi, vel, acc))
        link_names.append(str(link))
        home_deg.append(home)
        by_name[jname] = dict(entry, _parent_link=parent_link, _home_deg=home)

    n = len(joints)
    if n == 0:
        raise ConfigError(f"{where}: no joints ([dh] or [[joint]])")
    if len(set(j.name for j in joints)) != n:
        raise ConfigError(f"{where}: joint names must be unique")

    def mirrored_link(link: str) -> str:
        return right + link[len(left):] if link.startswith(left) else link

    for k, entry in enumerate(data.get("frame", [])):
        w = f"{where} [[frame]] #{k + 1}"
        fname = _get(entry, "name", w, str)
        link = _get(entry, "link", w, str)
        off = _offset(entry, scale, w)
        frames[fname] = (link_index(link, w), off)
        if entry.get("mirror", False):
            frames[mirrored_link(fname)] = (link_index(mirrored_link(link), w), _MIRROR @ off @ _MIRROR)

    # link poses with every joint at zero, for entries given in the base frame (in_base_at_zero)
    T_zero = []
    for j in joints:
        T_zero.append((np.eye(4) if j.parent < 0 else T_zero[j.parent]) @ j.placement)

    def to_link(link_idx: int, point: np.ndarray, in_base: bool) -> np.ndarray:
        if not in_base or link_idx < 0:
            return point
        T = T_zero[link_idx]
        return T[:3, :3].T @ (point - T[:3, 3])

    def half_to_link(link_idx: int, half: np.ndarray, in_base: bool) -> np.ndarray:
        if not in_base or link_idx < 0:
            return half
        return np.abs(T_zero[link_idx][:3, :3].T) @ half

    S3 = _MIRROR[:3, :3]
    shapes: list[Shape] = []
    for k, entry in enumerate(data.get("shape", [])):
        w = f"{where} [[shape]] #{k + 1}"
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
            variants.append((mirrored_link(link), S3 @ p0, S3 @ p1, mirrored_link(sname)))
        for lk, a0, a1, nm in variants:
            li = link_index(lk, w)
            shapes.append(Shape(li, kind, tuple(to_link(li, a0, in_base)), tuple(to_link(li, a1, in_base)),
                                radius, tuple(half_to_link(li, half, in_base)), nm))

    masses = np.zeros(n + 1)
    coms = np.zeros((n + 1, 3))
    inertias: dict[int, np.ndarray] = {}
    for k, entry in enumerate(data.get("mass", [])):
        w = f"{where} [[mass]] #{k + 1}"
        link = _get(entry, "link", w, str)
        m = float(_get(entry, "mass_kg", w, (int, float)))
        if not m >= 0:
            raise ConfigError(f"{w}: mass_kg must be ≥ 0")
        in_base = bool(entry.get("in_base_at_zero", False))
        c = _vec(_get(entry, "com", w), 3, w + ".com") * scale
        inertia = _inertia(entry, w)
        items = [(link, c, inertia)]
        if entry.get("mirror", False):
            items.append((mirrored_link(link), S3 @ c, None if inertia is None else S3 @ inertia @ S3))
        for lk, cc, ii in items:
            li = link_index(lk, w)
            masses[li + 1] = m
            coms[li + 1] = to_link(li, cc, in_base)
            if ii is not None:
                R = T_zero[li][:3, :3] if in_base and li >= 0 else np.eye(3)
                inertias[li + 1] = R.T @ ii @ R
    if masses.sum() <= 0:
        raise ConfigError(f"{where}: total mass must be positive ([[mass]] entries)")

    home = np.radians(np.array(home_deg, dtype=float))
    poses: dict[str, np.ndarray] = {"home": home}
    jn_tuple = [j.name for j in joints]
    for pname, pdeg in data.get("poses", {}).items():
        w = f"{where} [poses].{pname}"
        if isinstance(pdeg, dict):  # {joint: deg}, others from home
            q = home.copy()
            for jname, v in pdeg.items():
                if jname not in jn_tuple:
                    raise ConfigError(f"{w}: unknown joint {jname!r}")
                q[jn_tuple.index(jname)] = math.radians(float(v))
        else:
            q = np.radians(_vec(pdeg, n, w))
        for i, j in enumerate(joints):
            if not j.lower - 1e-12 <= q[i] <= j.upper + 1e-12:
                raise ConfigError(f"{w}: {j.name} = {math.degrees(q[i]):.2f}° is outside its range")
        poses[pname] = q

    kind = robot.get("kind", "arm")
    if kind not in ("arm", "humanoid"):
        raise ConfigError(f"{source}: [robot] kind = {kind!r}; kinds are 'arm' and 'humanoid'")
    if kind == "humanoid" and not {"l_sole", "r_sole"} <= set(frames):
        raise ConfigError(f"{source}: a humanoid needs frames named l_sole and r_sole (its soles: walking and "
                          "balance use them)")
    meta: dict[str, object] = {k: v for k, v in robot.items() if k not in ("name",)}
    meta["scale_m_per_unit"] = scale
    if meta_dh is not None:
        meta["dh"] = meta_dh
    for key in ("workspace", "balance", "wire", "servo"):
        if key in data:
            meta[key] = data[key]
    model = RobotModel(name, joints, frames, tool_frame, base_frame, link_names, home, poses, shapes,
                       masses, coms, meta, None, source)
    if not inertias:
        return model
    full = model.inertias.copy()   # the box estimate where an entry gives none
    for row, tensor in inertias.items():
        full[row] = tensor
    return RobotModel(name, joints, frames, tool_frame, base_frame, link_names, home, poses, shapes,
                      masses, coms, meta, None, source, full)


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
