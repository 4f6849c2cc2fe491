"""Robots from URDF files: `urdf_xml` reads the XML, this module checks it and turns it into the
same `RobotModel` data the built-in robots compile to (so the same Numba kernels run on it).

The tree becomes our joint table: each revolute or continuous joint is a link of the model (its
child link's name), fixed joints fold into constant offsets, and every URDF link stays reachable
as a named frame. Prismatic, floating and planar joints, and mimic joints, are held at zero
("locked": hil drives revolute servos) and listed in `model.meta["locked_joints"]`. Link inertials
give the masses and centres of mass; collision geometry (visual where a link has none) gives the
shapes that the twin draws and the safety checks use: boxes as boxes (turned as the file turns
them), spheres and cylinders as the capsules that hold them, meshes both as the box around them and
as the few capsules around them (`bounding_shapes`: the checks take the closer), computed once per
load.

A side file (a robot TOML with `[robot] urdf = "…"`, see docs/robots.md) adds what a URDF cannot
say: the robot's kind and soles, its tool frame, poses, missing limits, the workspace.
"""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import io
import json
import math
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hil.errors import ConfigError, InputError, did_you_mean
from hil.inputs import read_bytes
from hil.kinematics.rotations import axis_angle_matrix, rpy_matrix
from hil.robots import urdf_xml
from hil.robots.model import DEFAULT_RATE_HZ, Follower, Joint, RobotModel, Shape

MOVING = ("revolute", "continuous")
MAX_MIMIC_MULTIPLIER = 1e3     # a gear train's ratio, generously: beyond it a follower's angle is no mechanism's
MAX_MIMIC_OFFSET_RAD = 100.0
LOCKED = ("prismatic", "floating", "planar")
TYPES = MOVING + LOCKED + ("fixed",)
MAX_BYTES = 64 << 20
MAX_RANGE_DEG = 3600.0       # ten turns: a joint range beyond is a unit mistake or a placeholder (1e300)
MAX_SPEED_DEG_S = 360_000.0  # 1000 turns a second: likewise
CONTINUOUS_RANGE_DEG = 360.0      # a continuous joint turns ±one turn: a position servo's range
ACCEL_PER_VELOCITY = 5.0          # default acceleration limit: full speed in 0.2 s (URDF has none)
SIDE_JOINT_KEYS = {"lower_deg", "upper_deg", "velocity_deg_s", "acceleration_deg_s2"}


def _fail(path: str, where: str, what: str) -> ConfigError:
    return ConfigError(f"{path}: {where}: {what}")


# --------------------------------------------------------------------------- reading
def parse(path: str):
    """The `urdf_xml.Robot` of a URDF file; ConfigError naming the element that is wrong."""
    try:
        data = read_bytes(path, "robot file", MAX_BYTES)
    except InputError as e:
        raise ConfigError(str(e)) from None
    root, problem = _xml_problem(data)
    if problem:
        raise ConfigError(f"{path}: {problem}")
    try:
        return urdf_xml.read(root)
    except urdf_xml.UrdfError as e:
        raise ConfigError(f"{path}: {e}") from None


def _xml_problem(data: bytes):
    """(the root element, what makes the file unreadable as URDF — naming the element — or None)."""
    from lxml import etree  # lazy: needed for URDF robots only

    try:
        root = etree.fromstring(data, etree.XMLParser(resolve_entities=False, no_network=True))
    except (etree.XMLSyntaxError, OSError, ValueError) as e:
        return None, f"not well-formed XML ({e})"
    if root.getroottree().docinfo.internalDTD is not None or b"<!ENTITY" in data:
        return root, "it declares a DOCTYPE or entities, which a URDF has no use for (they could pull in other files)"
    return root, _element_problem(root)


def _element_problem(root) -> str | None:
    if root.tag != "robot":
        return f"the root element is <{root.tag}>, a URDF's is <robot>"
    for el in [*root.findall("link"), *root.findall("joint")]:
        if not el.get("name"):
            return f"a <{el.tag}> (line {el.sourceline}) has no name attribute"
    for el in root.findall("joint"):
        where = f"joint {el.get('name')!r} (line {el.sourceline})"
        for tag in ("parent", "child"):
            sub = el.find(tag)
            if sub is None or not sub.get("link"):
                return f"{where} has no <{tag} link=\"…\"/>"
        for sub in el.iter("origin", "axis", "limit"):
            for attr, value in sub.attrib.items():
                if attr in ("xyz", "rpy") or sub.tag == "limit":
                    bad = _bad_numbers(value, 3 if attr in ("xyz", "rpy") else 1, MAX_LENGTH_M if attr == "xyz" else None)
                    if bad:
                        return f"{where}: <{sub.tag} {attr}=\"{value}\"> {bad}"
    for el in root.findall("link"):
        for geometry in el.iter("geometry"):
            if len(geometry) == 0:
                return f"link {el.get('name')!r} (line {geometry.sourceline}): an empty <geometry>"
        for sub in el.iter("origin", "mass", "box", "cylinder", "sphere", "mesh"):
            for attr in ("xyz", "rpy", "value", "size", "radius", "length", "scale"):
                if attr in sub.attrib:
                    n = 3 if attr in ("xyz", "rpy", "size", "scale") else 1
                    bad = _bad_numbers(sub.get(attr), n, None if attr in ("rpy", "value") else MAX_LENGTH_M)
                    if bad:
                        return f"link {el.get('name')!r} (line {sub.sourceline}): <{sub.tag} {attr}=\"{sub.get(attr)}\"> {bad}"
    return None


MAX_LENGTH_M = 1e4   # a length, a size or a scale past this (10 km) in a robot's file is a unit mistake


def checked_lengths(a: np.ndarray, where: str) -> np.ndarray:
    """Lengths (m) within MAX_LENGTH_M, else ConfigError: one past it is a unit mistake."""
    if np.any(np.abs(a) > MAX_LENGTH_M):
        raise ConfigError(f"{where}: {np.abs(a).max():g} m is past {MAX_LENGTH_M:g} m: a unit mistake? "
                          "lengths are in metres (SI)")
    return a


def _bad_numbers(text: str, n: int, bound: float | None = None) -> str | None:
    parts = text.split()
    try:
        vals = [float(p) for p in parts]
    except ValueError:
        return "is not a number" if n == 1 else f"is not {n} numbers"
    if len(vals) != n:
        return f"has {len(vals)} numbers, {n} expected"
    if not all(math.isfinite(v) for v in vals):
        return "is not finite"
    if bound is not None and any(abs(v) > bound for v in vals):
        return f"is past {bound:g} (metres, or a scale): a unit mistake?"
    return None


# --------------------------------------------------------------------------- meshes
def package_roots(urdf_path: str) -> list[Path]:
    """The declared package roots, where `package://NAME/…` is looked for as ROS tools do:
    ROS_PACKAGE_PATH, the share/ folders of AMENT_PREFIX_PATH and CMAKE_PREFIX_PATH, and the
    share/ folders of packages installed from PyPI as cmeel wheels (example-robot-data)."""
    roots: list[Path] = []
    for var, sub in (("ROS_PACKAGE_PATH", ""), ("AMENT_PREFIX_PATH", "share"), ("CMAKE_PREFIX_PATH", "share")):
        for part in os.environ.get(var, "").split(os.pathsep):
            if part:
                roots.append(Path(part) / sub)
    roots += [Path(p) / "cmeel.prefix" / "share" for p in sys.path if p]
    return roots


class OutsideError(ValueError):
    """A file a URDF names lies outside the folders it may be read from."""


def _packages(pkg: str, urdf_path: str) -> list[Path]:
    """The folders `package://pkg/` can mean, most likely first: the URDF's own folder for an empty
    name (`package:///mesh.stl`), a folder named `pkg` (or whose package.xml names it) under a
    declared root, the URDF's own ancestor named `pkg`, and a ROS package named `pkg` (a folder with
    a package.xml) beside one of its ancestors."""
    here = Path(urdf_path).resolve().parent
    if not pkg:
        return [here]
    out: list[Path] = []
    for root in package_roots(urdf_path):
        xml = root / "package.xml"
        if root.name == pkg or (xml.is_file() and f"<name>{pkg}</name>" in xml.read_text(errors="replace")):
            out.append(root)
        if (root / pkg).is_dir():
            out.append(root / pkg)
    for anc in [here, *here.parents]:
        if anc.name == pkg:
            out.append(anc)
        elif (anc / pkg / "package.xml").is_file():
            out.append(anc / pkg)
    return out


def _own_tree(urdf_path: str) -> Path:
    """The folder a URDF's plain and file:// paths may point into: its ROS package (the nearest
    folder above it with a package.xml), else the folder above its own (urdf/ beside meshes/)."""
    here = Path(urdf_path).resolve().parent
    for anc in [here, *here.parents]:
        if (anc / "package.xml").is_file():
            return anc
    return here.parent if here.parent != here else here


def _inside(folder: Path, target: Path, filename: str, what: str) -> Path:
    """`target` (resolved, symlinks followed), refused unless it lies inside `folder`."""
    real = target.resolve()
    if not real.is_relative_to(folder.resolve()):
        raise OutsideError(f"{filename!r} points to {real}, outside {what} ({folder.resolve()}); hil reads a "
                           "robot's meshes only inside its package, its own folder tree or a declared package "
                           "root (ROS_PACKAGE_PATH)")
    if not real.is_file():
        raise OutsideError(f"{filename!r} is {real}, not a regular file")
    return real


def resolve_file(filename: str, urdf_path: str) -> Path:
    """A file a URDF names: `package://P/rest` (P looked for as `_packages` says), `file://` or a
    path (relative to the URDF's folder). FileNotFoundError naming what is missing — the package,
    or the file in the package found; OutsideError for a path that leaves the folder it is read
    from (`..`, an absolute path, a symlink pointing away)."""
    if filename.startswith("package://"):
        pkg, _, rest = filename[10:].partition("/")
        if pkg in (".", "..") or not all(c.isalnum() or c in "_-." for c in pkg):
            raise OutsideError(f"{filename!r}: {pkg!r} is not a package name")
        folders = _packages(pkg, urdf_path)
        if not folders:
            raise FileNotFoundError(f"package {pkg!r} not found (set ROS_PACKAGE_PATH to the folder holding it)")
        for folder in folders:
            if (folder / rest).exists():
                return _inside(folder, folder / rest, filename, f"package {pkg!r}")
        raise FileNotFoundError(f"{rest!r} is not in package {pkg!r} ({folders[0]}): the package was found, "
                                "the file is missing from it")
    name = filename[7:] if filename.startswith("file://") else filename
    p = Path(name)
    p = p if p.is_absolute() else Path(urdf_path).resolve().parent / p
    tree = _own_tree(urdf_path)
    if not p.exists():
        raise FileNotFoundError(f"{p} does not exist")
    return _inside(tree, p, filename, "the URDF's folder tree")


MAX_MESH_BYTES = 256 * 2**20   # one mesh file (the largest kit meshes are a few MB)


def mesh_bounds(file: Path, scale: np.ndarray, origin: np.ndarray) -> tuple:
    """(capsules [(p0, p1, radius)], box_lo, box_hi): the capsules that bound a mesh's vertices
    placed by `origin` (`bounding_capsules`), and their box, in the link frame."""
    import trimesh  # lazy: trimesh takes 0.5 s; only meshes need it

    data = read_bytes(str(file), "mesh file", MAX_MESH_BYTES)
    kind = file.suffix.lower().lstrip(".")
    try:
        mesh = trimesh.load(io.BytesIO(data), file_type=kind, force="mesh", process=False)
    except Exception as e:   # noqa: BLE001 - a third-party reader: whatever it raises, the file is the cause
        raise ValueError(f"not a mesh trimesh can read as {kind or 'its kind'} ({type(e).__name__}: {e})") from None
    v = np.asarray(mesh.vertices, dtype=float) * scale
    # a trimesh mesh and its cache refer to each other: freed only by a collection, each mesh's
    # arrays would pile up until the next one (a command's process collects rarely:
    # hil.process_life), so its young objects are collected now, before the next mesh is read
    del mesh
    gc.collect(1)
    if v.ndim != 2 or v.shape[0] == 0 or not np.all(np.isfinite(v)):
        raise ValueError("no finite vertices")
    # an STL lists each triangle's corners: a vertex shared by six triangles six times. The shapes
    # are fitted to the part's points, each once (a sixth as many to fit)
    v = _unique_points(v) @ origin[:3, :3].T + origin[:3, 3]
    if not np.all(np.abs(v) < MAX_LENGTH_M):   # (also NaN) an SVD of such points may never converge
        raise ValueError(f"its vertices, placed, reach past {MAX_LENGTH_M:g} m: a unit mistake?")
    return bounding_shapes(v), v.min(axis=0), v.max(axis=0)


def _unique_points(v: np.ndarray) -> np.ndarray:
    """The rows of v (k, 3), each once, sorted by x, y, z (a lexsort: np.unique's rows sort slower)."""
    s = v[np.lexsort(v.T[::-1])]
    new = np.ones(len(s), dtype=bool)
    new[1:] = np.any(s[1:] != s[:-1], axis=1)
    return s[new]


def bounding_shapes(v: np.ndarray) -> list[tuple]:
    """What bounds a mesh's points v (k, 3) for the checks, two ways: the box around them
    (`bounding_box`: ("box", centre, axes, half)) and the capsules around them
    (`bounding_capsules`: ("capsule", p0, p1, radius) each). The part lies inside both, and the
    checks take the closer: capsules around a flat bracket reach past its faces by half its width,
    a box around a rounded casting reaches past its curves with its corners."""
    centre, axes, half = bounding_box(v)
    return [("box", centre, axes, half)] + [("capsule", *c) for c in bounding_capsules(v)]


BOX_TURN_STEP_DEG = 1.0   # the turns about each candidate axis tried when fitting a box
BOX_FIT_POINTS = 2000     # points the orientation is chosen on (the extents hold every point)


def _turned_area(x: np.ndarray, y: np.ndarray, turns: np.ndarray) -> np.ndarray:
    """For each turn (rad) of the plane, the area of the rectangle along the turned axes that holds
    the points (x, y)."""
    cs, sn = np.cos(turns)[:, None], np.sin(turns)[:, None]
    return np.ptp(cs * x + sn * y, axis=1) * np.ptp(cs * y - sn * x, axis=1)


def bounding_box(v: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(centre, axes (3, 3): columns, right-handed; half extents) of a close box around every point
    of v (k, 3): about each of the link's axes and the points' principal directions, the turn of
    the other two that encloses the points in the least area (every `BOX_TURN_STEP_DEG`, then
    refined between the neighbouring steps); of those, the box of least volume."""
    c = v.mean(axis=0)
    d = v - c
    sample = d if len(d) <= BOX_FIT_POINTS else d[np.random.default_rng(0).choice(len(d), BOX_FIT_POINTS, False)]
    principal = np.linalg.svd(d, full_matrices=False)[2] if len(v) > 2 else np.eye(3)
    turns = np.radians(np.arange(0.0, 90.0, BOX_TURN_STEP_DEG))
    best = None
    for a in [*np.eye(3), *principal]:
        u = np.cross(a, [1.0, 0.0, 0.0] if abs(a[0]) < 0.9 else [0.0, 1.0, 0.0])
        u /= np.linalg.norm(u)
        w = np.cross(a, u)
        x, y = sample @ u, sample @ w
        th = float(turns[int(np.argmin(_turned_area(x, y, turns)))])
        lo_th, hi_th = th - math.radians(BOX_TURN_STEP_DEG), th + math.radians(BOX_TURN_STEP_DEG)
        for _ in range(40):   # the least area between the neighbouring steps (golden section)
            m1, m2 = lo_th + 0.382 * (hi_th - lo_th), hi_th - 0.382 * (hi_th - lo_th)
            area1, area2 = _turned_area(x, y, np.array([m1, m2]))
            if area1 < area2:
                hi_th = m2
            else:
                lo_th = m1
        th = 0.5 * (lo_th + hi_th)
        R = np.column_stack([a, math.cos(th) * u + math.sin(th) * w, math.cos(th) * w - math.sin(th) * u])
        local = d @ R
        lo, hi = local.min(axis=0), local.max(axis=0)
        volume = float(np.prod(hi - lo))
        if best is None or volume < best[0]:
            best = (volume, R, lo, hi)
    _, R, lo, hi = best
    if np.linalg.det(R) < 0:
        R[:, 2] = -R[:, 2]
        lo[2], hi[2] = -hi[2], -lo[2]
    return c + R @ ((lo + hi) / 2), R, (hi - lo) / 2


def bounding_capsule(v: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """A capsule holding every point of v (k, 3): axis the principal direction, radius the largest
    distance from it, end points pulled in as far as every point stays inside."""
    c = v.mean(axis=0)
    d = v - c
    axis = np.linalg.svd(d, full_matrices=False)[2][0] if len(v) > 1 else np.array([0.0, 0.0, 1.0])
    t = d @ axis
    perp = np.linalg.norm(d - np.outer(t, axis), axis=1)
    r = float(perp.max())
    s = np.sqrt(np.maximum(r * r - perp * perp, 0.0))
    a, b = float(np.max(t - s)), float(np.min(t + s))   # segment [b, a]: each point within r of it
    if b > a:
        a = b = 0.5 * (a + b)
        r = float(np.linalg.norm(d - a * axis, axis=1).max())
    return c + b * axis, c + a * axis, r


def _capsule_volume(p0: np.ndarray, p1: np.ndarray, r: float) -> float:
    return math.pi * r * r * (float(np.linalg.norm(p1 - p0)) + 4.0 * r / 3.0)


SPLIT_GAIN = 0.8   # a mesh's capsule is split in two where the two hold its points in under 80 % of its volume


def bounding_capsules(v: np.ndarray, most: int = 4) -> list[tuple[np.ndarray, np.ndarray, float]]:
    """Capsules that together hold every point of v (k, 3), fitted to the mesh more closely than
    one: a capsule is split at its points' median across whichever principal direction gains most
    (each half bounded again) where the halves take markedly less volume, up to `most` capsules. An L-shaped bracket or a gripper
    then stops being one fat capsule that meets its neighbours where the parts themselves are
    centimetres apart."""
    parts = [v]
    fitted = [bounding_capsule(v)]
    while len(fitted) < most:
        best = None
        for k, (pts, cap) in enumerate(zip(parts, fitted)):
            if len(pts) < 8:
                continue
            c = pts.mean(axis=0)
            for axis in np.linalg.svd(pts - c, full_matrices=False)[2]:   # across each principal direction
                t = (pts - c) @ axis
                cut = float(np.median(t))
                halves = [pts[t <= cut], pts[t >= cut]]
                if min(len(h) for h in halves) < 4:
                    continue
                caps = [bounding_capsule(h) for h in halves]
                gain = sum(_capsule_volume(*x) for x in caps) / max(_capsule_volume(*cap), 1e-18)
                if gain < SPLIT_GAIN and (best is None or gain < best[0]):
                    best = (gain, k, halves, caps)
        if best is None:
            break
        _, k, halves, caps = best
        parts[k:k + 1] = halves
        fitted[k:k + 1] = caps
    return fitted


# --------------------------------------------------------------------------- building
@dataclass
class _Tree:
    root: str
    children: dict[str, list]          # link name -> joints whose parent it is (file order)
    order: list                        # joints, parents first (depth-first from the root)


def _tree(robot, path: str) -> _Tree:
    links = [lk.name for lk in robot.links]
    if not links:
        raise ConfigError(f"{path}: the robot has no <link>")
    seen: set[str] = set()
    for name in links:
        if name in seen:
            raise _fail(path, f"link {name!r}", "is defined twice")
        seen.add(name)
    names: set[str] = set()
    parent_of: dict[str, str] = {}
    children: dict[str, list] = {name: [] for name in links}
    for j in robot.joints:
        if j.name in names:
            raise _fail(path, f"joint {j.name!r}", "is defined twice")
        names.add(j.name)
        if j.type not in TYPES:
            raise _fail(path, f"joint {j.name!r}", f"type {j.type!r} is not a URDF joint type ({', '.join(TYPES)})")
        for role, link in (("parent", j.parent), ("child", j.child)):
            if link not in children:
                raise _fail(path, f"joint {j.name!r}", f"its {role} link {link!r} is not a <link> of the robot")
        if j.child in parent_of:
            raise _fail(path, f"joint {j.name!r}", f"link {j.child!r} already has a parent ({parent_of[j.child]!r}); "
                        "a URDF is a tree")
        parent_of[j.child] = j.parent
        children[j.parent].append(j)
    roots = [name for name in links if name not in parent_of]
    if not roots:
        raise ConfigError(f"{path}: the joints form a cycle (every link has a parent); a URDF is a tree")
    if len(roots) > 1:
        raise ConfigError(f"{path}: links {', '.join(map(repr, roots[:4]))} have no parent; a URDF has one root "
                          "(join them with fixed joints)")
    # depth-first, siblings in file order: parents come before their children
    order, stack = [], list(reversed(children[roots[0]]))
    while stack:
        j = stack.pop()
        order.append(j)
        stack.extend(reversed(children[j.child]))
    if len(order) != len(robot.joints):
        stuck = sorted(set(parent_of) - {j.child for j in order})
        raise ConfigError(f"{path}: links {', '.join(map(repr, stuck[:4]))} are in a cycle, not reachable from "
                          f"the root {roots[0]!r}")
    return _Tree(roots[0], children, order)


def _limits(j, over: dict, path: str, side_path: str) -> tuple[float, float, float, float]:
    """(lower, upper, velocity, acceleration) in SI: the side file's values first, then the URDF's."""
    where = f"joint {j.name!r}"
    how = (f"set them in the URDF's <limit>, or in a side file: [joints.{j.name}] lower_deg, upper_deg, "
           "velocity_deg_s (docs/robots.md, \"Your own robot\")")
    unknown = set(over) - SIDE_JOINT_KEYS
    if unknown:
        raise ConfigError(f"{side_path}: [joints.{j.name}] unknown key {sorted(unknown)[0]!r}; keys are "
                          f"{', '.join(sorted(SIDE_JOINT_KEYS))}")
    for key, value in over.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ConfigError(f"{side_path}: [joints.{j.name}] {key} = {value!r} is not a finite number")
    lim = j.limit
    lo = lim.lower if lim is not None else None
    hi = lim.upper if lim is not None else None
    vel = lim.velocity if lim is not None else None
    if j.type == "continuous":
        lo = hi = None    # URDF ignores a continuous joint's position limits
        lo_d, hi_d = -CONTINUOUS_RANGE_DEG, CONTINUOUS_RANGE_DEG
    else:
        lo_d = math.degrees(lo) if lo is not None else None
        hi_d = math.degrees(hi) if hi is not None else None
        if lo is not None and hi is not None and lo == hi == 0.0:
            lo_d = hi_d = None   # the URDF default for absent limits: none given
    lo_d = float(over.get("lower_deg", lo_d)) if over.get("lower_deg", lo_d) is not None else None
    hi_d = float(over.get("upper_deg", hi_d)) if over.get("upper_deg", hi_d) is not None else None
    if lo_d is None or hi_d is None:
        raise _fail(path, where, f"has no position limits; the loop needs them: {how}")
    if not lo_d < hi_d:
        raise _fail(path, where, f"lower limit {lo_d:g}° is not below upper limit {hi_d:g}°: {how}")
    if max(abs(lo_d), abs(hi_d)) > MAX_RANGE_DEG:
        raise _fail(path, where, f"its range {lo_d:g}° … {hi_d:g}° goes past ±{MAX_RANGE_DEG:g}° (ten turns), which no "
                                 f"joint hil drives turns: a unit mistake or a placeholder? {how}")
    vel_d = over.get("velocity_deg_s", math.degrees(vel) if vel else None)
    if vel_d is None or not vel_d > 0:
        raise _fail(path, where, f"has no velocity limit (or 0); the loop needs one: {how}")
    if vel_d > MAX_SPEED_DEG_S:
        raise _fail(path, where, f"its velocity limit {vel_d:g}°/s is past {MAX_SPEED_DEG_S:g}°/s: a unit mistake or a "
                                 f"placeholder? {how}")
    acc_d = float(over.get("acceleration_deg_s2", ACCEL_PER_VELOCITY * vel_d))
    if not acc_d > 0 or acc_d > MAX_SPEED_DEG_S * ACCEL_PER_VELOCITY * 10:
        raise ConfigError(f"{side_path}: [joints.{j.name}] acceleration_deg_s2 must be positive and of a joint's size")
    return math.radians(lo_d), math.radians(hi_d), math.radians(vel_d), math.radians(acc_d)


def _axis(j, path: str) -> np.ndarray:
    axis = np.asarray(j.axis if j.axis is not None else (1.0, 0.0, 0.0), dtype=float)
    norm = float(np.linalg.norm(axis)) if axis.shape == (3,) else 0.0
    if not norm > 1e-9 or not math.isfinite(norm):
        raise _fail(path, f"joint {j.name!r}", f"axis {axis.tolist()} is not a direction")
    return axis / norm


def _origin(T, path: str, where: str) -> np.ndarray:
    T = np.eye(4) if T is None else np.asarray(T, dtype=float)
    if T.shape != (4, 4) or not np.all(np.isfinite(T)):
        raise _fail(path, where, "its <origin> is not finite")
    return T


@dataclass
class _Parts:
    """The URDF as model parts: where each link sits (moving link index, offset) and the joints."""

    base: str
    placed: dict[str, tuple[int, np.ndarray]]
    joints: list[Joint]
    link_names: list[str]
    locked: list[str]
    order: list[str]                  # URDF links in depth-first order
    floating: bool = False            # the file floats its base (a floating joint from a massless world link)
    narrowed: list[str] = field(default_factory=list)   # leaders' ranges narrowed for their mimic followers
    followers: list[Follower] = field(default_factory=list)   # mimic joints turned with their leaders
    swapped: list[str] = field(default_factory=list)   # gear trains whose driven joint is planned (said)
    inputs: dict[str, str] = field(default_factory=dict)   # those trains' servo joint → the output planned

    def moving(self) -> list:
        """Every moving joint of the model in link order: the driven ones, then the followers."""
        return self.joints + self.followers

    def angles(self, q: np.ndarray) -> np.ndarray:
        """θ of every link's joint at the driven joints' q (the followers' from their leaders)."""
        return np.concatenate([q, [f.angle(q) for f in self.followers]])


def _parts(robot, path: str, side_path: str, overrides: dict) -> _Parts:
    tree = _tree(robot, path)
    links = {lk.name: lk for lk in robot.links}
    base, order = tree.root, tree.order
    first = tree.children[base]
    root = links[base]
    floating = (len(first) == 1 and first[0].type == "floating" and not root.collisions and not root.visuals
                and (root.inertial is None or not root.inertial.mass))
    if floating:
        base, order = first[0].child, order[1:]   # a massless "world" link above a floating base: the base is its child
    placed: dict[str, tuple[int, np.ndarray]] = {base: (-1, np.eye(4))}
    order, swapped, inputs = _gear_trains_turned_round(tree, order)
    parts = _Parts(base, placed, [], [], [], [base] + [j.child for j in order], floating, swapped=swapped,
                   inputs=inputs)
    beyond = _follower_subtrees(tree, order)
    for j in order:   # the driven joints' links first, then the followers' (the kernels' order)
        if j.name not in beyond:
            _place(parts, j, path, side_path, overrides, None)
    if not parts.joints:
        raise ConfigError(f"{path}: no revolute or continuous joint: nothing for hil to drive")
    index = {jt.name: k for k, jt in enumerate(parts.joints)}
    for j in order:
        if j.name in beyond:
            _place(parts, j, path, side_path, overrides, index)
    parts.narrowed = _narrowed_by_followers(order, parts.joints, path) + _slowed_by_followers(order, parts.joints)
    unknown = set(overrides) - set(index)
    if unknown:
        raise ConfigError(f"{side_path}: [joints.{sorted(unknown)[0]}] is not a driven joint of {path}")
    return parts


def _gear_trains_turned_round(tree, order) -> tuple[list, list[str], dict[str, str]]:
    """A mimic joint that carries driven joints (a limb hangs from it) cannot follow — followers
    come after every driven joint — and was held at 0, the limb below it never turned. Where its
    leader carries nothing driven, it is the input of a transmission its servo turns: a gear train
    (ToddlerBot's hip, shoulder and elbow yaws) or a linkage (its knees, turned by rods from a
    servo's plate). The transmission is turned round: the output is planned as the driven joint and
    the input follows it (multiplier 1/m, offset −o/m), as do the input's other followers (the
    rods). Its servo still turns the input: a board config maps the servo to the output joint with
    the ratio in its ticks_per_rad (said by `hil robots`). Returns the joints, a note per train and
    each train's servo joint → its output."""
    by_name = {j.name: j for j in order}

    def below(j):
        stack = list(tree.children.get(j.child, []))
        while stack:
            k = stack.pop()
            yield k
            stack.extend(tree.children.get(k.child, []))

    def driven(k) -> bool:
        return k.type in MOVING and k.mimic is None

    turned, notes, outputs = {}, [], {}
    for j in order:
        lead = by_name.get(j.mimic.joint) if j.mimic is not None and not j.mimic.joint2 else None
        m = j.mimic.multiplier if j.mimic is not None else 0.0
        if (lead is None or j.type not in MOVING or lead.type not in MOVING or lead.mimic is not None or m == 0.0
                or lead.name in turned or any(driven(k) for k in below(lead))
                or not any(driven(k) or k is lead for k in below(j))):
            continue
        turned[j.name] = dataclasses.replace(j, mimic=None)
        outputs[j.name] = lead.name
        turned[lead.name] = dataclasses.replace(lead, mimic=urdf_xml.Mimic(j.name, 1.0 / m, -j.mimic.offset / m))
        for k in order:   # the input's other followers now follow the output
            if k.mimic is not None and k.mimic.joint == lead.name and not k.mimic.joint2 and k.name != j.name:
                mk, ok = k.mimic.multiplier, k.mimic.offset
                turned[k.name] = dataclasses.replace(k, mimic=urdf_xml.Mimic(j.name, mk / m, ok - mk * j.mimic.offset / m))
        notes.append(f"{j.name}: planned as the driven joint of a transmission (gears or a linkage) its servo "
                     f"turns through {lead.name} "
                     f"({lead.name} = {1.0 / m:.4g} · {j.name}); a board config's [[joint]] names {lead.name} for "
                     "that servo (a generated one does), and the bus turns it through the ratio")
    return [turned.get(j.name, j) for j in order], notes, {v: k for k, v in outputs.items()}


def _follower_subtrees(tree, order) -> set[str]:
    """The joints at or beyond a revolute mimic joint that nothing beyond it drives: those links
    follow (placed after every driven link). A mimic with a driven joint beyond it, or of a joint
    that is not driven, is held at 0 instead."""
    driven = {j.name for j in order if j.type in MOVING and j.mimic is None}
    out: set[str] = set()
    for j in order:
        if (j.name in out or j.mimic is None or j.type not in MOVING or j.mimic.joint not in driven
                or (j.mimic.joint2 and j.mimic.joint2 not in driven)):
            continue
        below, stack = [j], list(tree.children.get(j.child, []))
        while stack:
            k = stack.pop()
            below.append(k)
            stack.extend(tree.children.get(k.child, []))
        if not any(k.name in driven for k in below):
            out.update(k.name for k in below)
    return out


def _place(parts: _Parts, j, path: str, side_path: str, overrides: dict, leaders: dict | None) -> None:
    """Joint j's child link placed: a new link for a driven joint (or, with `leaders`, a follower
    of one), else fixed to its parent's link (a fixed joint, or one held at 0)."""
    parent, offset = parts.placed[j.parent]
    origin = offset @ _origin(j.origin, path, f"joint {j.name!r}")
    if j.type in MOVING and j.mimic is None:
        lo, hi, vel, acc = _limits(j, overrides.get(j.name, {}), path, side_path)
        parts.joints.append(Joint(j.name, parent, origin, _axis(j, path), lo, hi, vel, acc))
    elif (leaders is not None and j.type in MOVING and j.mimic is not None and j.mimic.joint in leaders
          and (not j.mimic.joint2 or j.mimic.joint2 in leaders)):
        if not (abs(j.mimic.multiplier) <= MAX_MIMIC_MULTIPLIER and abs(j.mimic.offset) <= MAX_MIMIC_OFFSET_RAD
                and abs(j.mimic.multiplier2) <= MAX_MIMIC_MULTIPLIER):
            second = f" multiplier2=\"{j.mimic.multiplier2:g}\"" if j.mimic.joint2 else ""
            raise _fail(path, f"joint {j.name!r}", f"<mimic multiplier=\"{j.mimic.multiplier:g}\" offset=\""
                        f"{j.mimic.offset:g}\"{second}> is out of bounds (|multiplier| ≤ {MAX_MIMIC_MULTIPLIER:g}, "
                        f"|offset| ≤ {MAX_MIMIC_OFFSET_RAD:g} rad): fix the file's coupling")
        second = (leaders[j.mimic.joint2], j.mimic.multiplier2) if j.mimic.joint2 else (-1, 0.0)
        parts.followers.append(Follower(j.name, parent, origin, _axis(j, path), leaders[j.mimic.joint],
                                        j.mimic.multiplier, j.mimic.offset, *second))
    else:
        if j.type != "fixed":
            parts.locked.append(f"{j.name} ({'mimic' if j.mimic is not None else j.type}, held at 0)")
        parts.placed[j.child] = (parent, origin)
        return
    parts.link_names.append(j.child)
    parts.placed[j.child] = (len(parts.link_names) - 1, np.eye(4))


def _narrowed_by_followers(urdf_joints, joints: list[Joint], path: str) -> list[str]:
    """A mimic joint follows its leader (follower = multiplier · leader + offset) where the robot's
    mechanism moves it, whatever hil computes: the leader's range is narrowed in `joints` to what
    keeps each follower within its own <limit>, so that no plan, jog or bound moves a follower past
    its range. Returns a note per narrowing (`hil robots` shows them)."""
    index = {jt.name: k for k, jt in enumerate(joints)}
    notes = []
    for j in urdf_joints:
        lim = j.limit
        if j.mimic is None or j.mimic.joint not in index or j.type == "continuous" or lim is None \
                or lim.lower is None or lim.upper is None or lim.lower == lim.upper == 0.0:
            continue
        if j.mimic.joint2:   # (one of a joint not driven is held at 0, as a mimic of one is)
            if j.mimic.joint2 in index:
                _check_differential(j, joints, index, path)
            continue
        k = index[j.mimic.joint]
        leader, m, o = joints[k], j.mimic.multiplier, j.mimic.offset
        where = f"joint {j.name!r} (mimic of {leader.name!r}: {m:g} · {leader.name} + {o:g})"
        shown = _follower_units(j.type)
        if m == 0.0:
            if not lim.lower <= o <= lim.upper:
                raise _fail(path, where, f"stands at {shown(o)}, outside its own <limit> {shown(lim.lower)} … "
                                         f"{shown(lim.upper)}")
            continue
        a, b = sorted(((lim.lower - o) / m, (lim.upper - o) / m))
        lo, hi = max(leader.lower, a), min(leader.upper, b)
        if not lo < hi:
            raise _fail(path, where, f"leaves its own <limit> {shown(lim.lower)} … {shown(lim.upper)} wherever "
                                     f"{leader.name!r} stands in its range {math.degrees(leader.lower):.1f}° … "
                                     f"{math.degrees(leader.upper):.1f}°: fix one of the two ranges")
        if (lo, hi) != (leader.lower, leader.upper):
            joints[k] = dataclasses.replace(leader, lower=lo, upper=hi)
            notes.append(f"{leader.name}: range narrowed to {math.degrees(lo):.1f}° … {math.degrees(hi):.1f}° "
                         f"to keep its follower {j.name} within {shown(lim.lower)} … {shown(lim.upper)}")
    return notes


def _check_differential(j, joints: list[Joint], index: dict, path: str) -> None:
    """A gear two joints turn (θ = m₁ · a + m₂ · b + o) stays within its own <limit> over both
    ranges, or the file is refused: no one narrowing of the two ranges is the right one."""
    mim, lim = j.mimic, j.limit
    a, b = joints[index[mim.joint]], joints[index[mim.joint2]]
    ends = [mim.multiplier * x + mim.multiplier2 * y + mim.offset for x in (a.lower, a.upper) for y in (b.lower, b.upper)]
    if min(ends) < lim.lower - 1e-9 or max(ends) > lim.upper + 1e-9:
        raise _fail(path, f"joint {j.name!r} (turned by {a.name!r} and {b.name!r})",
                    f"reaches {math.degrees(min(ends)):.1f}° … {math.degrees(max(ends)):.1f}° over their ranges, past "
                    f"its own <limit> {math.degrees(lim.lower):.1f}° … {math.degrees(lim.upper):.1f}°: narrow "
                    f"[joints.{a.name}] or [joints.{b.name}] in a side file")


def _differential_slowed(j, joints: list[Joint], index: dict, v: float) -> list[str]:
    """A gear two joints turn goes as fast as |m₁| · v_a + |m₂| · v_b: both leaders' speeds (and
    accelerations) are lowered alike to keep it within its own `v`. A note per leader slowed."""
    mim = j.mimic
    ka, kb = index[mim.joint], index[mim.joint2]
    fastest = abs(mim.multiplier) * joints[ka].velocity_limit + abs(mim.multiplier2) * joints[kb].velocity_limit
    share = v / fastest if fastest > 0 else 1.0
    if share >= 1.0 - SPEED_NOTE_SHARE:
        return []
    notes = []
    for k in (ka, kb):
        lead = joints[k]
        joints[k] = dataclasses.replace(lead, velocity_limit=lead.velocity_limit * share,
                                        acceleration_limit=lead.acceleration_limit * share)
        notes.append(f"{lead.name}: speed lowered to {math.degrees(lead.velocity_limit * share):.0f}°/s to keep "
                     f"{j.name} (turned by {joints[ka].name} and {joints[kb].name}) within {math.degrees(v):.0f}°/s")
    return notes


SPEED_NOTE_SHARE = 0.005   # a follower that would slow its leader by less (a linkage's rods at 1.001×) leaves it be


def _slowed_by_followers(urdf_joints, joints: list[Joint]) -> list[str]:
    """A mimic follower turns |multiplier| times as fast as its leader: the leader's speed (and its
    acceleration, in proportion) is lowered in `joints` to what keeps the follower within its own
    <limit velocity>. Returns a note per change."""
    index = {jt.name: k for k, jt in enumerate(joints)}
    notes = []
    for j in urdf_joints:
        v = None if j.limit is None else j.limit.velocity
        if j.mimic is None or j.mimic.joint not in index or not v:
            continue
        if j.mimic.joint2:   # a differential's gear: both its leaders slowed alike (one not driven: held)
            if j.mimic.joint2 in index:
                notes += _differential_slowed(j, joints, index, v)
            continue
        if j.mimic.multiplier == 0.0:
            continue
        k = index[j.mimic.joint]
        leader = joints[k]
        most = v / abs(j.mimic.multiplier)
        if most < (1.0 - SPEED_NOTE_SHARE) * leader.velocity_limit:
            joints[k] = dataclasses.replace(leader, velocity_limit=most,
                                            acceleration_limit=leader.acceleration_limit * most / leader.velocity_limit)
            notes.append(f"{leader.name}: speed lowered to {math.degrees(most):.0f}°/s to keep its follower {j.name} "
                         f"within {_follower_units(j.type)(v)}/s")
    return notes


def _follower_units(joint_type: str):
    """How a follower's position is shown: degrees for a revolute joint, millimetres for a prismatic."""
    if joint_type == "prismatic":
        return lambda x: f"{x * 1000:.1f} mm"
    return lambda x: f"{math.degrees(x):.1f}°"


def _placed_shapes(robot, parts: _Parts, path: str) -> tuple[list[Shape], list[tuple[np.ndarray, np.ndarray]], list[str]]:
    """Shapes in their moving link's frame, the box around each (for finding soles), and the
    names of those that bound a mesh (the collision message says they can reach past
    the part itself)."""
    shapes: list[Shape] = []
    boxes: list[tuple[np.ndarray, np.ndarray]] = []
    around_meshes: list[str] = []
    for link in robot.links:
        if link.name not in parts.placed:
            continue   # the dropped world link
        idx, offset = parts.placed[link.name]
        elements = link.collisions or link.visuals
        for k, el in enumerate(elements):
            where = f"link {link.name!r}"
            name = link.name if len(elements) == 1 else f"{link.name}#{k + 1}"
            T = offset @ _origin(el.origin, path, where)
            got = _shape(el.geometry, T, idx, name, path, where)
            if got is not None:
                made = got[0] if isinstance(got[0], list) else [got[0]]
                shapes += made
                boxes += [got[1]] * len(made)
                if el.geometry.mesh is not None:
                    around_meshes += [sh.name for sh in made]
    return shapes, boxes, around_meshes


def _visual_meshes(robot, parts: _Parts, path: str) -> list[list]:
    """The links' visual meshes for the twin: [link index, file, scale xyz, placement in the link's
    frame (16 numbers, row-major), RGBA or None]; files that cannot be found are left out (the
    twin draws the link's shapes instead)."""
    out = []
    named = {m.name: m.color.rgba for m in robot.materials or ()
             if m.name and m.color is not None and m.color.rgba is not None}   # <material name> at the top
    for link in robot.links:
        if link.name not in parts.placed:
            continue
        idx, offset = parts.placed[link.name]
        for el in link.visuals:
            g = el.geometry
            if g is None or g.mesh is None:
                continue
            try:
                file = resolve_file(g.mesh.filename, path)
            except (OSError, ValueError):
                continue
            scale = [1.0, 1.0, 1.0] if g.mesh.scale is None else \
                [float(v) for v in np.broadcast_to(np.asarray(g.mesh.scale, float), (3,))]
            T = offset @ _origin(el.origin, path, f"link {link.name!r}")
            color = None
            if el.material is not None:
                rgba = el.material.color.rgba if el.material.color is not None else None
                rgba = rgba if rgba is not None else named.get(el.material.name)
                if rgba is not None and len(rgba) in (3, 4) and np.isfinite(np.asarray(rgba, float)).all():
                    color = [float(v) for v in rgba]
            out.append([int(idx), str(file), scale, [float(v) for v in T.ravel()], color])
    return out


def _shape(g, T: np.ndarray, idx: int, name: str, path: str, where: str):
    """(Shape — or, for a mesh, a list of them —, (box lo, box hi)) of one URDF geometry placed by T
    in link `idx`'s frame, or None."""
    c, R = T[:3, 3], T[:3, :3]
    if g is None:
        return None
    if g.box is not None:
        half = np.asarray(g.box.size, float) / 2
        absR = np.abs(R)
        ext = absR @ half
        if np.allclose(absR, np.round(absR), atol=1e-9):   # box axes along the link's: its extents along them
            return Shape(idx, "box", tuple(c), half=tuple(ext), name=name), (c - ext, c + ext)
        return (Shape(idx, "box", tuple(c), half=tuple(half), name=name, axes=tuple(map(float, R.ravel()))),
                (c - ext, c + ext))
    if g.sphere is not None:
        r = float(g.sphere.radius)
        return Shape(idx, "capsule", tuple(c), tuple(c), r, name=name), (c - r, c + r)
    if g.cylinder is not None:
        r, h = float(g.cylinder.radius), float(g.cylinder.length) / 2 * R[:, 2]
        ext = np.abs(h) + r * np.sqrt(np.maximum(1.0 - R[:, 2] ** 2, 0.0))
        return Shape(idx, "capsule", tuple(c - h), tuple(c + h), r, name=name), (c - ext, c + ext)
    if g.mesh is not None:
        scale = np.ones(3) if g.mesh.scale is None else np.broadcast_to(np.asarray(g.mesh.scale, float), (3,))
        try:
            bounds, lo, hi = mesh_bounds(resolve_file(g.mesh.filename, path), scale, T)
        except (OSError, ValueError, ImportError, IndexError, KeyError, AttributeError, InputError) as e:
            raise _fail(path, where, f"mesh {g.mesh.filename!r} cannot be read ({e}); its shape is needed for "
                        "the twin and the collision checks") from None
        return [_bound_shape(idx, b, name if k == 0 else f"{name}.{k}", name) for k, b in enumerate(bounds)], (lo, hi)
    return None


def _bound_shape(idx: int, bound: tuple, name: str, group: str) -> Shape:
    """A `bounding_shapes` entry as the model's Shape of link idx (one of the part `group`'s bounds)."""
    if bound[0] == "box":
        _, c, R, half = bound
        return Shape(idx, "box", tuple(map(float, c)), half=tuple(map(float, half)), name=name,
                     axes=tuple(map(float, np.asarray(R).ravel())), group=group)
    _, p0, p1, r = bound
    return Shape(idx, "capsule", tuple(map(float, p0)), tuple(map(float, p1)), float(r), name=name, group=group)


def _masses(robot, parts: _Parts) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per model link (the base first): mass, centre of mass and inertia about it (link frame),
    the URDF links fixed to it added together (parallel axis theorem)."""
    n = len(parts.link_names)
    pieces: list[list[tuple[float, np.ndarray, np.ndarray]]] = [[] for _ in range(n + 1)]
    for link in robot.links:
        if link.name not in parts.placed or link.inertial is None or not link.inertial.mass:
            continue
        m = float(link.inertial.mass)
        if not (math.isfinite(m) and m >= 0):
            raise ConfigError(f"link {link.name!r}: mass {m!r} must be finite and not negative")
        idx, offset = parts.placed[link.name]
        T = offset @ (np.eye(4) if link.inertial.origin is None else link.inertial.origin)
        I = np.zeros((3, 3)) if link.inertial.inertia is None else np.asarray(link.inertial.inertia, float)
        if I.shape != (3, 3) or not np.all(np.isfinite(I)):
            raise ConfigError(f"link {link.name!r}: its <inertia> is not six finite numbers")
        pieces[idx + 1].append((m, T[:3, 3], T[:3, :3] @ I @ T[:3, :3].T))
    mass, coms, inertias = np.zeros(n + 1), np.zeros((n + 1, 3)), np.zeros((n + 1, 3, 3))
    for row, parts_of in enumerate(pieces):
        total = sum(m for m, _, _ in parts_of)
        if total <= 0:
            continue
        c = sum(m * p for m, p, _ in parts_of) / total
        mass[row], coms[row] = total, c
        for m, p, I in parts_of:
            d = p - c
            inertias[row] += I + m * (float(d @ d) * np.eye(3) - np.outer(d, d))
    return mass, coms, inertias


SIDE_ROBOT_KEYS = {"name", "urdf", "mjcf", "kind", "board", "description", "tool_frame", "default_rate_hz", "floor_z_m"}
KEYFRAME_TAG = "_from"   # in a pose from an MJCF's keyframe: where it comes from, for its errors
SIDE_SECTIONS = {"robot", "joints", "poses", "soles", "workspace", "balance", "frame", "servo", "path", "collision",
                 "walk"}


def path_section(table, where: str) -> dict:
    """A robot's [path] section, checked: hil path's defaults for it — `place_mm` (the workpiece
    frame: x, y, z mm, roll, pitch, yaw °), `tool_mm` (the tool tip in the tool frame, mm) and
    `tool_shapes` (the shapes that carry the tool, which a workpiece may touch)."""
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: [path] must be a table (place_mm, tool_mm, tool_shapes)")
    unknown = set(table) - {"place_mm", "tool_mm", "tool_shapes"}
    if unknown:
        raise ConfigError(f"{where}: [path] unknown key {sorted(unknown)[0]!r}; keys are place_mm, tool_mm, tool_shapes")
    for key, n in (("place_mm", 6), ("tool_mm", 3)):
        v = table.get(key)
        if v is not None and not (isinstance(v, list) and len(v) == n and all(
                isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and abs(x) < 1e6
                for x in v)):
            raise ConfigError(f"{where}: [path] {key} must be {n} numbers, got {v!r}")
    shapes = table.get("tool_shapes", [])
    if not (isinstance(shapes, list) and all(isinstance(x, str) for x in shapes)):
        raise ConfigError(f"{where}: [path] tool_shapes must be a list of shape names")
    return dict(table)


CACHE_VERSION = 27   # bump when what `_model_args` makes from a file changes


def build(path: str, side: dict | None = None, side_path: str = "", legs_by_tree: bool = True) -> RobotModel:
    """The `RobotModel` of a URDF file, with what a side file (already parsed TOML) adds.
    `legs_by_tree`: a file without a floating base whose tree stands on two legs is a humanoid's
    (URDF's convention; an MJCF's body without a free joint is welded to the world: False).

    The result is kept in the user's cache, keyed by the files' contents and the meshes' sizes and
    times: the loop, the twin and each command load the robot, and reading the meshes (trimesh
    takes half a second to import) and bounding them are needed once."""
    # the side file's place too: the model names it (`source`), and a copy elsewhere is another file
    key = _cache_key(path, {"side": side or {}, "side_path": str(Path(side_path).resolve()) if side_path else "",
                            "legs_by_tree": legs_by_tree})
    cached = _cache_read(key)
    if cached is not None:
        return RobotModel(**cached)
    args = _model_args(path, side, side_path, legs_by_tree)
    _cache_write(key, args)
    return RobotModel(**args)


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "hil" / "robots"


def _cache_key(path: str, side: dict | None) -> str | None:
    """A digest of everything the model is made from, or None (then it is built, not cached)."""

    from lxml import etree  # lazy: needed for URDF robots only

    try:
        data = read_bytes(path, "robot file", MAX_BYTES)
        root = etree.fromstring(data, etree.XMLParser(resolve_entities=False, no_network=True))
        h = hashlib.sha256(f"{CACHE_VERSION}|{Path(path).resolve()}|".encode() + data)
        h.update(json.dumps(side or {}, sort_keys=True, default=str).encode())
        for mesh in root.iter("mesh"):
            st = resolve_file(mesh.get("filename", ""), path).stat()
            h.update(f"|{mesh.get('filename')}|{st.st_size}|{st.st_mtime_ns}".encode())
    except (OSError, ValueError, etree.XMLSyntaxError):
        return None   # (InputError is a ValueError: the file is refused again, with its reason, by `parse`)
    return h.hexdigest()[:32]


def _cache_read(key: str | None) -> dict | None:
    if key is None:
        return None
    try:
        raw = json.loads((cache_dir() / f"{key}.json").read_text())
        return _from_json(raw)
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None   # absent or unreadable: built again


def _cache_write(key: str | None, args: dict) -> None:
    if key is None:
        return
    try:
        folder = cache_dir()
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f"{key}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(_to_json(args)))
        os.replace(tmp, folder / f"{key}.json")
    except OSError:
        pass   # a read-only home: built again next time


def _to_json(a: dict) -> dict:
    out = dict(a)
    out["joints"] = [[j.name, j.parent, j.placement.tolist(), j.axis.tolist(), j.lower, j.upper, j.velocity_limit,
                      j.acceleration_limit] for j in a["joints"]]
    out["followers"] = [[f.name, f.parent, f.placement.tolist(), f.axis.tolist(), f.leader, f.multiplier, f.offset,
                         f.leader2, f.multiplier2] for f in a["followers"]]
    out["frames"] = {k: [link, off.tolist()] for k, (link, off) in a["frames"].items()}
    out["shapes"] = [[s.link, s.kind, list(s.p0), list(s.p1), s.radius, list(s.half), s.name, list(s.axes), s.group]
                     for s in a["shapes"]]
    for key in ("home", "masses", "coms", "inertias"):
        out[key] = np.asarray(a[key]).tolist()
    out["poses"] = {k: v.tolist() for k, v in a["poses"].items()}
    return out


def _from_json(d: dict) -> dict:
    out = dict(d)
    out["joints"] = [Joint(n, int(p), np.array(pl), np.array(ax), lo, hi, v, acc) for n, p, pl, ax, lo, hi, v, acc
                     in d["joints"]]
    out["followers"] = [Follower(n, int(p), np.array(pl), np.array(ax), int(k), float(m), float(o), int(k2), float(m2))
                        for n, p, pl, ax, k, m, o, k2, m2 in d["followers"]]
    out["frames"] = {k: (int(link), np.array(off)) for k, (link, off) in d["frames"].items()}
    out["shapes"] = [Shape(int(li), kind, tuple(p0), tuple(p1), float(r), tuple(half), name, tuple(axes), group)
                     for li, kind, p0, p1, r, half, name, axes, group in d["shapes"]]
    for key in ("home", "masses", "coms", "inertias"):
        out[key] = np.array(d[key], dtype=float)
    out["poses"] = {k: np.array(v, dtype=float) for k, v in d["poses"].items()}
    return out


def _model_args(path: str, side: dict | None, side_path: str, legs_by_tree: bool = True) -> dict:
    side = side or {}
    side_path = side_path or path
    cfg = _side_robot(side, side_path)
    overrides = _table(side, "joints", side_path)
    robot = parse(path)
    parts = _parts(robot, path, side_path, overrides)
    shapes, boxes, around_meshes = _placed_shapes(robot, parts, path)
    masses, coms, inertias = _masses(robot, parts)
    zero = _link_poses_at_zero(parts.moving())
    frames: dict[str, tuple[int, np.ndarray]] = {
        name: parts.placed[name] for name in parts.order if name != parts.base and name not in parts.link_names}
    # a floating base, or a tree that stands on two legs, is a humanoid's unless the side file says
    # otherwise (the tree is not asked where it does)
    humanoid = "kind" not in cfg and (parts.floating or (legs_by_tree and _biped(parts, shapes, boxes, zero, masses)))
    meta = _meta(path, robot, parts, cfg, overrides, humanoid)
    if "path" in side:
        meta["path"] = path_section(side["path"], side_path)
    meta["visual_meshes"] = _visual_meshes(robot, parts, path)
    if around_meshes:
        meta["mesh_shapes"] = around_meshes
    for item in side.get("frame", []):
        name, link, offset = _side_frame(item, parts, side_path)
        frames[name] = (parts.placed[link][0], parts.placed[link][1] @ offset)
    pose_table = _table(side, "poses", side_path)
    home, poses = _poses(pose_table, parts.joints, side_path)
    if meta["kind"] == "humanoid":
        if masses.sum() <= 0:
            raise ConfigError(f"{path}: no link has a mass; a humanoid's balance needs its <inertial> masses")
        home = _feet_stood_flat(_table(side, "soles", side_path), parts, shapes, boxes, zero, home, meta,
                                mine=isinstance(pose_table.get("home"), (dict, list))
                                and not (isinstance(pose_table["home"], dict) and KEYFRAME_TAG in pose_table["home"]))
        poses["home"] = home
        _add_soles(_table(side, "soles", side_path), parts, shapes, boxes, zero, _link_poses(parts.moving(), parts.angles(home)),
                   frames, meta, side_path)
    elif meta["kind"] != "arm":
        raise ConfigError(f"{side_path}: [robot] kind = {meta['kind']!r}; kinds are 'arm' and 'humanoid'")
    tool = _tool_frame(cfg, meta, parts, frames, path, side_path)
    allowed = _allowed_collisions(_table(side, "collision", side_path), parts, path, side_path)
    if allowed:
        meta["allowed_collisions"] = allowed
    ws = _table(side, "workspace", side_path)
    meta["workspace"] = {"reach_m": max(_reach(parts.moving(), frames[tool], zero), 1e-3), **ws}
    for section in ("balance", "servo", "walk"):   # (a walk's numbers are checked by the walk: hil.motion.rocking)
        if section in side:
            meta[section] = _table(side, section, side_path)
    if "walk" in side:
        meta["walk_source"] = side_path
    name = cfg.get("name", robot.name or Path(path).stem)
    return dict(name=str(name), joints=parts.joints, frames=frames, tool_frame=tool, base_frame=parts.base,
                link_names=parts.link_names, home=home, poses=poses, shapes=shapes, masses=masses, coms=coms,
                meta=meta, source=side_path, inertias=inertias, followers=parts.followers)


def _side_robot(side: dict, side_path: str) -> dict:
    """The side file's [robot] table, its sections and keys checked."""
    unknown = set(side) - SIDE_SECTIONS
    if unknown:
        raise ConfigError(f"{side_path}: unknown section [{sorted(unknown)[0]}]; sections are "
                          f"{', '.join(sorted(SIDE_SECTIONS))}")
    cfg = _table(side, "robot", side_path)
    bad = set(cfg) - SIDE_ROBOT_KEYS
    if bad:
        raise ConfigError(f"{side_path}: [robot] unknown key {sorted(bad)[0]!r}; keys are {', '.join(sorted(SIDE_ROBOT_KEYS))}")
    return cfg


def _meta(path: str, robot, parts, cfg: dict, overrides: dict, humanoid: bool) -> dict[str, Any]:
    """What the model says of itself beside its tables: its file, the joints held or narrowed, its
    rate, description, kind and board, and the notes `hil robots` prints."""
    continuous = {j.name for j in robot.joints if j.type == "continuous"}
    notes = [f"{j.name}: the file gives no range (continuous): ±{CONTINUOUS_RANGE_DEG:g}° assumed; set its "
             f"[joints.{j.name}] lower_deg and upper_deg in a side file to your robot's stops"
             for j in parts.joints if j.name in continuous and j.name not in overrides]   # (a follower's is its leader's)
    meta: dict[str, Any] = {"urdf": str(Path(path).resolve()), "locked_joints": parts.locked,
                            "narrowed_by_followers": parts.swapped + parts.narrowed,
                            "transmission_inputs": dict(parts.inputs),
                            "default_rate_hz": cfg.get("default_rate_hz", DEFAULT_RATE_HZ),
                            "description": cfg.get("description", f"from {Path(path).name}"),
                            "kind": cfg.get("kind", "humanoid" if humanoid else "arm"),
                            "board": cfg.get("board", "servos")}
    if meta["kind"] == "humanoid" and not parts.floating and "kind" not in cfg:
        notes.append("a humanoid: its tree stands on two legs (URDF files leave the base unattached to the "
                     "world); a side file's [robot] kind = \"arm\" says otherwise")
    if notes:
        meta["notes"] = notes
    if "floor_z_m" in cfg:
        meta["floor_z_m"] = cfg["floor_z_m"]   # checked with the model's other numbers
    return meta


def _tool_frame(cfg: dict, meta: dict, parts, frames: dict, path: str, side_path: str) -> str:
    """The frame `fk`, IK and the Cartesian tab use: the side file's, else a humanoid's left sole or
    the end of an arm's longest chain; a link's own frame becomes an extra frame named "tool"."""
    link_frames = set(parts.link_names) | {parts.base}
    default_tool = "l_sole" if meta["kind"] == "humanoid" else _deepest(parts, frames)
    tool = cfg.get("tool_frame", default_tool)
    if tool not in frames and tool not in link_frames:
        raise ConfigError(f"{side_path}: tool_frame = {tool!r} is not a link or frame of {path}")
    if tool in link_frames:   # a link's own frame as the tool: an extra frame on it, named "tool"
        frames["tool"] = (parts.link_names.index(tool) if tool != parts.base else -1, np.eye(4))
        tool = "tool"
    return tool


def _table(side: dict, key: str, side_path: str) -> dict:
    t = side.get(key, {})
    if not isinstance(t, dict):
        raise ConfigError(f"{side_path}: [{key}] must be a table")
    return t


def _link_poses_at_zero(joints: list[Joint]) -> list[np.ndarray]:
    out: list[np.ndarray] = []
    for j in joints:
        out.append((np.eye(4) if j.parent < 0 else out[j.parent]) @ j.placement)
    return out


def _link_poses(joints: list[Joint], q: np.ndarray) -> list[np.ndarray]:
    """Each link's pose in the base frame with the joints at `q` (revolute joints about their axes)."""
    out: list[np.ndarray] = []
    for j, angle in zip(joints, q):
        turn = np.eye(4)
        turn[:3, :3] = axis_angle_matrix(np.asarray(j.axis, dtype=float) * float(angle))
        out.append((np.eye(4) if j.parent < 0 else out[j.parent]) @ j.placement @ turn)
    return out


def _deepest(parts: _Parts, frames: dict) -> str:
    """The default tool: the link frame with the most driven joints above it (the end of the longest chain)."""
    depth = {-1: 0}
    for i, j in enumerate(parts.joints):
        depth[i] = depth[j.parent] + 1
    best = max(range(len(parts.joints)), key=lambda i: depth[i])
    leaves = [name for name, (idx, _) in frames.items() if idx == best]
    return leaves[-1] if leaves else parts.link_names[best]


def _reach(joints: list[Joint], tool: tuple[int, np.ndarray], zero) -> float:
    """How far the tool can be from the base: the lengths along its chain added up."""
    idx, offset = tool
    total = float(np.linalg.norm(offset[:3, 3]))
    while idx >= 0:
        total += float(np.linalg.norm(joints[idx].placement[:3, 3]))
        idx = joints[idx].parent
    return total


def _side_frame(item, parts: _Parts, side_path: str) -> tuple[str, str, np.ndarray]:

    if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not isinstance(item.get("link"), str):
        raise ConfigError(f"{side_path}: a [[frame]] needs name and link (a URDF link), got {item!r}")
    if item["link"] not in parts.placed:
        raise ConfigError(f"{side_path}: [[frame]] {item['name']!r}: link {item['link']!r} is not a link of the URDF")
    T = np.eye(4)
    for key, n in (("translation", 3), ("rpy_deg", 3)):
        v = item.get(key, [0.0, 0.0, 0.0])
        if not (isinstance(v, list) and len(v) == n and all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                                             and math.isfinite(x) for x in v)):
            raise ConfigError(f"{side_path}: [[frame]] {item['name']!r}: {key} must be {n} finite numbers")
        if key == "translation":
            T[:3, 3] = checked_lengths(np.array(v, dtype=float), f"{side_path}: [[frame]] {item['name']!r}: translation")
        elif any(abs(x) > 360 for x in v):
            raise ConfigError(f"{side_path}: [[frame]] {item['name']!r}: rpy_deg {v} must be angles within ±360°")
        else:
            T[:3, :3] = rpy_matrix(*np.radians(np.array(v, dtype=float)))
    return item["name"], item["link"], T


def _allowed_collisions(table: dict, parts: _Parts, path: str, side_path: str) -> list[list[int]]:
    """`[collision] allowed`: pairs of links meant to touch (a head on its neck bracket, a horn in
    its servo), which the self-collision check leaves alone (MoveIt's disabled collisions), as
    pairs of the moving links they belong to."""
    unknown = set(table) - {"allowed"}
    if unknown:
        raise ConfigError(f"{side_path}: [collision] unknown key {sorted(unknown)[0]!r}; the key is 'allowed'")
    entries = table.get("allowed", [])
    if not isinstance(entries, list):
        raise ConfigError(f"{side_path}: [collision] allowed must be a list of link pairs, [[\"a\", \"b\"], …]")
    out = []
    for pair in entries:
        if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(name, str) for name in pair)):
            raise ConfigError(f"{side_path}: [collision] allowed: each entry is two link names, [\"a\", \"b\"]; "
                              f"got {pair!r}")
        for name in pair:
            if name not in parts.placed:
                raise ConfigError(f"{side_path}: [collision] allowed: {name!r} is not a link of {Path(path).name}"
                                  + did_you_mean(name, list(parts.placed)))
        out.append(sorted(int(parts.placed[name][0]) for name in pair))
    return out


def _poses(table: dict, joints: list[Joint], side_path: str) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    lo, hi = np.array([j.lower for j in joints]), np.array([j.upper for j in joints])
    zero = np.where((lo <= 0) & (hi >= 0), 0.0, 0.5 * (lo + hi))   # zero, or mid-range where 0 is outside
    names = [j.name for j in joints]
    poses = {"zero": zero}
    for pname, value in table.items():
        q = zero.copy()
        where = f"{side_path}: [poses] {pname}"
        origin = value.get(KEYFRAME_TAG) if isinstance(value, dict) else None
        if isinstance(origin, str):   # an MJCF's keyframe: it also sets joints hil does not drive
            where = f"{side_path}: {origin}"
            value = {k: v for k, v in value.items() if k in names}
        if isinstance(value, dict):
            for jname, deg in value.items():
                if jname not in names:
                    raise ConfigError(f"{where}: {jname!r} is not a driven joint ({', '.join(names)})")
                q[names.index(jname)] = _deg(deg, f"{where}.{jname}")
        elif isinstance(value, list) and len(value) == len(names):
            q = np.array([_deg(v, where) for v in value])
        else:
            raise ConfigError(f"{where}: a table of joint = degrees, or {len(names)} numbers in joint order")
        outside = [f"{names[i]} = {math.degrees(q[i]):.1f}°" for i in range(len(q)) if not lo[i] <= q[i] <= hi[i]]
        if outside:
            fix = (f"; give [poses] {pname} in a side file (docs/robots.md)" if isinstance(origin, str) else "")
            raise ConfigError(f"{where}: outside the joint range: {', '.join(outside)}{fix}")
        poses[pname] = q
    return poses.get("home", zero), poses


def _deg(v, where: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ConfigError(f"{where}: {v!r} is not a finite number of degrees")
    return math.radians(float(v))


def _add_soles(table: dict, parts: _Parts, shapes: list[Shape], boxes: list, zero, stand, frames: dict, meta: dict,
               side_path: str) -> None:
    """l_sole / r_sole frames under the links the side file names (else the feet found at zero): at
    the bottom centre of each foot's collision geometry as the robot stands at home (`stand`: the
    links' poses there), axes those of the base (the soles flat at home: a file whose zero pose is
    not its standing one has its feet tilted at zero)."""
    unknown = set(table) - {"left", "right"}
    if unknown:
        raise ConfigError(f"{side_path}: [soles] unknown key {sorted(unknown)[0]!r}; keys are left and right")
    halves = []
    if not table:
        table = _found_feet(parts, shapes, boxes, zero, meta)
    if not table:   # a floating base (a free joint, or a side file's kind) on no two feet found by the tree
        raise ConfigError(f"{side_path}: a humanoid (its base floats) with no two feet hil can find (the lowest "
                          "links at zero, one on each side): name them in a side file's [soles] left and right, or "
                          "give [robot] kind = \"arm\" to drive it fixed at its base "
                          f"(links: {', '.join(parts.order[:12])}…; docs/robots.md)")
    for side, frame in (("left", "l_sole"), ("right", "r_sole")):
        link = table.get(side)
        if not isinstance(link, str) or link not in parts.placed:
            raise ConfigError(f"{side_path}: a humanoid needs [soles] {side} = \"<its {side} foot link>\" "
                              f"(got {link!r}; links: {', '.join(parts.order[:12])}…)")
        idx = parts.placed[link][0]
        on_foot = [b for s, b in zip(shapes, boxes) if s.link == idx]
        if not on_foot or idx < 0:
            raise ConfigError(f"{side_path}: [soles] {side} = {link!r} has no collision shape below a joint to "
                              "find its sole from")
        T = stand[idx]
        corners = []
        for lo, hi in on_foot:
            for sx in (lo[0], hi[0]):
                for sy in (lo[1], hi[1]):
                    for sz in (lo[2], hi[2]):
                        corners.append(T[:3, :3] @ np.array([sx, sy, sz]) + T[:3, 3])
        pts = np.array(corners)
        lo, hi = pts.min(axis=0), pts.max(axis=0)
        centre = np.array([(lo[0] + hi[0]) / 2, (lo[1] + hi[1]) / 2, lo[2]])
        sole = np.eye(4)
        sole[:3, :3] = T[:3, :3].T
        sole[:3, 3] = T[:3, :3].T @ (centre - T[:3, 3])
        frames[frame] = (idx, sole)
        halves.append(((hi[0] - lo[0]) / 2, (hi[1] - lo[1]) / 2))
    meta["sole_half_m"] = [float(min(h[0] for h in halves)), float(min(h[1] for h in halves))]


SOLE_FLAT_DEG = 1.0   # a foot tilted more than this under an upright base at home is stood flat (or said)
MAX_ANKLE_STEP_RAD = 0.1   # one Gauss–Newton step of the ankle standing a sole flat, at most


def _feet_stood_flat(soles: dict, parts: _Parts, shapes: list[Shape], boxes: list, zero, home: np.ndarray,
                     meta: dict, mine: bool) -> np.ndarray:
    """Home with each foot's sole flat under the upright base, turned by the leg's last two joints
    (its ankle): hil's walks and balance checks stand the soles flat, and an MJCF's keyframe made for
    a learned policy often tilts them (MuJoCo Playground's Wolfgang by 13°). A sole is its foot's
    largest box (a mesh's fitted one) face down. A home a side file gives is the user's: its tilt is
    said, not changed. Notes say what changed."""
    feet = soles if soles else _found_feet(parts, shapes, boxes, zero, {})
    moving = parts.moving()
    q = home.copy()
    for side in ("left", "right"):
        name = feet.get(side) if isinstance(feet, dict) else None
        if not isinstance(name, str) or name not in parts.placed or parts.placed[name][0] < 0:
            continue   # (`_add_soles` says what is wrong with it)
        link = parts.placed[name][0]
        on_foot = [s for s in shapes if s.link == link and s.kind == "box"]
        chain, j = [], link
        while j >= 0:
            if j < len(parts.joints):
                chain.append(j)
            j = moving[j].parent
        if not on_foot or not chain:
            continue
        box = max(on_foot, key=lambda s: s.half[0] * s.half[1] * s.half[2])
        before = _sole_tilt(moving, parts, q, link, box)
        if math.degrees(float(np.linalg.norm(before))) <= SOLE_FLAT_DEG:
            continue
        if mine:
            meta.setdefault("notes", []).append(
                f"{name}: its sole tilts {math.degrees(float(np.linalg.norm(before))):.1f}° at home under an upright "
                "body; hil's walks and balance checks take it as flat (turn its ankle in [poses] home to stand it so)")
            continue
        ankle = _ankle(moving, parts, q, chain)
        flat = _stood_flat(moving, parts, q, link, box, ankle)
        after = math.degrees(float(np.linalg.norm(_sole_tilt(moving, parts, flat, link, box))))
        if after >= math.degrees(float(np.linalg.norm(before))) - 0.1:
            continue   # (an ankle that cannot turn it: the walk's own checks say what that means)
        q = flat
        turned = ", ".join(f"{parts.joints[k].name} {math.degrees(q[k] - home[k]):+.1f}°" for k in ankle
                           if abs(q[k] - home[k]) > 1e-9)
        meta.setdefault("notes", []).append(
            f"home: {turned} to stand {name}'s sole flat (the file's pose tilts it "
            f"{math.degrees(float(np.linalg.norm(before))):.1f}° under an upright body"
            + (f"; {after:.1f}° remain: its ankle cannot turn it further)" if after > SOLE_FLAT_DEG else ")"))
    return q


def _ankle(moving, parts: _Parts, q: np.ndarray, chain: list[int]) -> list[int]:
    """A foot's ankle: the leg's last joint, and the one above it where it turns about another axis
    (pitch and roll; a knee above a pitch-only ankle is no part of it)."""
    poses = _link_poses(moving, parts.angles(q))
    axes = [poses[k][:3, :3] @ np.asarray(parts.joints[k].axis, dtype=float) for k in chain[:2]]
    if len(chain) > 1 and np.linalg.norm(np.cross(axes[0], axes[1])) > 0.5:   # more than 30° apart
        return chain[:2]
    return chain[:1]


def _sole_tilt(moving, parts: _Parts, q: np.ndarray, link: int, box: Shape) -> np.ndarray:
    """How far a foot's sole leans at q, the base upright: the x and y of its face-down normal."""
    T = _link_poses(moving, parts.angles(q))[link]
    axes = T[:3, :3] @ box.rotation()
    k = int(np.argmax(np.abs(axes[2])))
    n = axes[:, k] * (-1.0 if axes[2, k] > 0 else 1.0)   # pointing down
    return n[:2].copy()


def _stood_flat(moving, parts: _Parts, q: np.ndarray, link: int, box: Shape, ankle: list[int]) -> np.ndarray:
    """q with the `ankle` joints turned (Gauss–Newton, within their ranges) until the sole lies flat."""
    q = q.copy()
    lo = np.array([parts.joints[k].lower for k in ankle])
    hi = np.array([parts.joints[k].upper for k in ankle])
    for _ in range(20):
        r = _sole_tilt(moving, parts, q, link, box)
        if np.linalg.norm(r) < 1e-9:
            break
        J = np.zeros((2, len(ankle)))
        for c, k in enumerate(ankle):
            dq = q.copy()
            dq[k] += 1e-6
            J[:, c] = (_sole_tilt(moving, parts, dq, link, box) - r) / 1e-6
        step = np.linalg.lstsq(J, -r, rcond=None)[0]
        step *= min(1.0, MAX_ANKLE_STEP_RAD / max(float(np.max(np.abs(step))), 1e-12))
        q[ankle] = np.clip(q[ankle] + step, lo, hi)
    return q


FOOT_LEVEL_M = 0.01   # links whose bottoms are this close to the lowest one stand on the floor at zero
LEG_JOINTS = 3        # a leg has a hip, a knee and an ankle at least
LEGS_UNDER_M = 0.05   # the link the two legs hang from stands at least this far above the feet


def _biped(parts: _Parts, shapes: list[Shape], boxes: list, zero, masses) -> bool:
    """Whether a file without a floating base is a humanoid's: with every joint at zero, its lowest
    links (the feet `_found_feet` finds, one left and one right) each end a chain of LEG_JOINTS
    joints or more below the link both hang from, which stands LEGS_UNDER_M or more above them, and
    its links have masses. A two-finger gripper's fingers hang from the hand one joint each."""
    if masses.sum() <= 0:
        return False
    feet = _found_feet(parts, shapes, boxes, zero, {})
    if not feet:
        return False

    def chain(j: int) -> list[int]:   # the joints from this one up to the base
        out = []
        while j >= 0:
            out.append(j)
            j = moving[j].parent
        return out
    moving = parts.moving()
    left, right = (chain(parts.placed[feet[side]][0]) for side in ("left", "right"))
    common = set(left) & set(right)
    legs = [[j for j in c if j not in common] for c in (left, right)]
    if min(len(leg) for leg in legs) < LEG_JOINTS:
        return False
    hip = next((j for j in left if j in common), -1)
    hip_z = float(zero[hip][2, 3]) if hip >= 0 else 0.0
    return all(hip_z - float(zero[leg[0]][2, 3]) >= LEGS_UNDER_M for leg in legs)


def _leaf_below(parts: _Parts, j: int) -> int:
    """The last link of the chain below link `j`, while it does not branch (in one pass over the
    joints: a file's joints come parents first)."""
    children: dict[int, list[int]] = {}
    for i, jt in enumerate(parts.joints):
        children.setdefault(jt.parent, []).append(i)
    while len(children.get(j, ())) == 1:
        j = children[j][0]
    return j


def _found_feet(parts: _Parts, shapes: list[Shape], boxes: list, zero, meta: dict) -> dict:
    """The feet, when no side file names them: with every joint at zero, the links lowest down, the
    leftmost of them (+y) the left foot and the rightmost the right one."""
    bottoms: dict[int, tuple[float, float]] = {}
    for s, (lo, hi) in zip(shapes, boxes):
        if s.link < 0:
            continue
        T = zero[s.link]
        corners = np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])])
        world = corners @ T[:3, :3].T + T[:3, 3]
        z, y = float(world[:, 2].min()), float(world[:, 1].mean())
        if s.link not in bottoms or z < bottoms[s.link][0]:
            bottoms[s.link] = (z, y)
    if not bottoms:
        return {}
    floor = min(z for z, _ in bottoms.values())
    low = {k: y for k, (z, y) in bottoms.items() if z < floor + FOOT_LEVEL_M}
    left, right = max(low, key=low.get), min(low, key=low.get)
    if left == right or not low[left] > 0 > low[right]:
        return {}
    # a leg folded at zero (the Open Duck Mini's URDF: its shins hang below its feet) has its
    # lowest link above the foot in the tree: the foot is the leg's last link
    left, right = _leaf_below(parts, left), _leaf_below(parts, right)
    names = {"left": parts.link_names[left], "right": parts.link_names[right]}
    meta.setdefault("notes", []).append(f"feet found by the tree: {names['left']} (left), {names['right']} (right); "
                                        "a side file's [soles] names others")
    return names

