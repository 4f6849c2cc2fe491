"""A URDF file's elements as plain data: links (inertial, visuals, collisions), joints (origin,
axis, limit, mimic), materials — what `hil.robots.urdf` turns into a model.

hil reads the XML itself (lxml, with entities and the network off) rather than through a URDF
library: the one we used pulled in a mesh-processing stack (SciPy, Shapely, a ray tracer) that
doubled a fresh install's time, for a tree of a few element kinds. Numbers are checked where
they are read: a bad one is a `UrdfError` naming the element, its line and the attribute.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hil.kinematics.rotations import rpy_matrix


class UrdfError(ValueError):
    """What is wrong in the file, with the element's line."""


@dataclass
class Color:
    rgba: np.ndarray | None = None


@dataclass
class Material:
    name: str | None = None
    color: Color | None = None


@dataclass
class Box:
    size: np.ndarray


@dataclass
class Cylinder:
    radius: float
    length: float


@dataclass
class Sphere:
    radius: float


@dataclass
class Mesh:
    filename: str
    scale: np.ndarray | None = None


@dataclass
class Geometry:
    box: Box | None = None
    cylinder: Cylinder | None = None
    sphere: Sphere | None = None
    mesh: Mesh | None = None


@dataclass
class Element:
    """A link's <visual> or <collision>."""
    name: str | None
    origin: np.ndarray | None
    geometry: Geometry | None
    material: Material | None = None


@dataclass
class Inertial:
    mass: float | None
    inertia: np.ndarray | None
    origin: np.ndarray | None


@dataclass
class UrdfLink:
    name: str
    inertial: Inertial | None = None
    visuals: list[Element] = field(default_factory=list)
    collisions: list[Element] = field(default_factory=list)


@dataclass
class Limit:
    lower: float | None = None
    upper: float | None = None
    effort: float | None = None
    velocity: float | None = None


@dataclass
class Mimic:
    joint: str
    multiplier: float = 1.0
    offset: float = 0.0
    joint2: str = ""           # hil's own attributes: a differential's gear follows two joints
    multiplier2: float = 0.0   # (joint = multiplier · joint + multiplier2 · joint2 + offset)


@dataclass
class UrdfJoint:
    name: str
    type: str
    parent: str
    child: str
    origin: np.ndarray | None = None
    axis: np.ndarray | None = None
    limit: Limit | None = None
    mimic: Mimic | None = None


@dataclass
class Robot:
    name: str
    links: list[UrdfLink]
    joints: list[UrdfJoint]
    materials: list[Material]


def read(root) -> Robot:
    """The robot of a parsed <robot> element (lxml)."""
    return Robot(root.get("name") or "robot", [_link(el) for el in root.findall("link")],
                 [_joint(el) for el in root.findall("joint")], [_material(el) for el in root.findall("material")])


def _floats(el, attr: str, n: int, default=None):
    text = el.get(attr)
    if text is None:
        return default
    try:
        vals = np.array([float(p) for p in text.split()], dtype=np.float64)
    except ValueError:
        vals = np.zeros(0)
    if len(vals) != n or not np.isfinite(vals).all():
        raise UrdfError(f"<{el.tag} {attr}=\"{text}\"> (line {el.sourceline}): {n} finite number{'s' * (n > 1)} "
                        "expected")
    return vals


def _float(el, attr: str, default=None):
    vals = _floats(el, attr, 1)
    return default if vals is None else float(vals[0])


def _origin(el) -> np.ndarray | None:
    o = el.find("origin")
    if o is None:
        return None
    T = np.eye(4)
    T[:3, :3] = rpy_matrix(*_floats(o, "rpy", 3, np.zeros(3)))
    T[:3, 3] = _floats(o, "xyz", 3, np.zeros(3))
    return T


def _material(el) -> Material:
    c = el.find("color")
    return Material(el.get("name"), None if c is None else Color(_rgba(c)))


def _rgba(el) -> np.ndarray | None:
    text = el.get("rgba")
    n = len(text.split()) if text else 0
    return _floats(el, "rgba", n) if n in (3, 4) else None


def _geometry(el) -> Geometry | None:
    g = el.find("geometry")
    if g is None:
        return None
    out = Geometry()
    for sub in g:
        if sub.tag == "box":
            out.box = Box(_floats(sub, "size", 3, np.zeros(3)))
        elif sub.tag == "cylinder":
            out.cylinder = Cylinder(_float(sub, "radius", 0.0), _float(sub, "length", 0.0))
        elif sub.tag == "sphere":
            out.sphere = Sphere(_float(sub, "radius", 0.0))
        elif sub.tag == "mesh":
            scale = sub.get("scale")
            out.mesh = Mesh(sub.get("filename") or "",
                            None if scale is None else _floats(sub, "scale", len(scale.split()) or 3))
    return out


def _element(el, with_material: bool) -> Element:
    m = el.find("material") if with_material else None
    return Element(el.get("name"), _origin(el), _geometry(el), None if m is None else _material(m))


def _inertial(el) -> Inertial | None:
    i = el.find("inertial")
    if i is None:
        return None
    mass = i.find("mass")
    inertia = i.find("inertia")
    I = None
    if inertia is not None:
        ixx, ixy, ixz, iyy, iyz, izz = (_float(inertia, k, 0.0) for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz"))
        I = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
    return Inertial(None if mass is None else _float(mass, "value", 0.0), I, _origin(i))


def _link(el) -> UrdfLink:
    return UrdfLink(el.get("name"), _inertial(el), [_element(v, True) for v in el.findall("visual")],
                [_element(c, False) for c in el.findall("collision")])


def _joint(el) -> UrdfJoint:
    axis = el.find("axis")
    limit = el.find("limit")
    mimic = el.find("mimic")
    return UrdfJoint(el.get("name"), el.get("type") or "", el.find("parent").get("link"), el.find("child").get("link"),
                 _origin(el), None if axis is None else _floats(axis, "xyz", 3, np.array([1.0, 0.0, 0.0])),
                 None if limit is None else Limit(*(_float(limit, k) for k in ("lower", "upper", "effort", "velocity"))),
                 None if mimic is None else Mimic(mimic.get("joint") or "", _float(mimic, "multiplier", 1.0),
                                                  _float(mimic, "offset", 0.0), mimic.get("joint2") or "",
                                                  _float(mimic, "multiplier2", 0.0)))
