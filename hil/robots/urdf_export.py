"""A `RobotModel` written as URDF, for the tools robotics people already use (RViz, Foxglove,
Pinocchio, MuJoCo, Isaac): `hil urdf --robot R`.

Every link of the model is a URDF link whose frame is the model's (the joint's origin is the
model's placement, its axis the model's), every named frame a link on a fixed joint, so FK of the
file equals `model.fk_frames`, and masses, centres of mass and inertias are the model's, so its
dynamics equal `hil.dynamics`'; capsules are written as a cylinder and two spheres (URDF has no
capsule), boxes as boxes, for collision and visual alike.
"""

from __future__ import annotations

from xml.sax.saxutils import quoteattr

import numpy as np

from hil.kinematics.rotations import rpy_angles
from hil.robots.model import Follower, one_bound_each

EFFORT_NM = 10.0   # URDF's <limit> needs an effort; the model has none
# MuJoCo refuses a moving body without mass or inertia: a massless link (the PUMA's first, a
# paper's model) gets a microgram, a point mass a pinhead's inertia — nothing a dynamics sees
MIN_MASS_KG = 1e-9
MIN_INERTIA_KGM2 = 1e-12


def _limit_or_mimic(model, j) -> str:
    """A driven joint's <limit>; a follower's <mimic> of its leader, with the range the leader's
    range gives it (its own, narrowed to that when the model was read)."""
    if not isinstance(j, Follower):
        return (f'<limit lower="{_num(j.lower)}" upper="{_num(j.upper)}" velocity="{_num(j.velocity_limit)}" '
                f'effort="{_num(EFFORT_NM)}"/>')
    # (a differential's gear: both leaders, as hil's own joint2 and multiplier2 attributes)
    low = j.offset + sum(min(c * model.lower[k], c * model.upper[k]) for k, c in j.leaders())
    high = j.offset + sum(max(c * model.lower[k], c * model.upper[k]) for k, c in j.leaders())
    speed = sum(abs(c) * model.velocity_limit[k] for k, c in j.leaders())
    second = (f' joint2={quoteattr(model.joint_names[j.leader2])} multiplier2="{_num(j.multiplier2)}"'
              if j.leader2 >= 0 else "")
    return (f'<limit lower="{_num(low)}" upper="{_num(high)}" velocity="{_num(speed)}" '
            f'effort="{_num(EFFORT_NM)}"/><mimic joint={quoteattr(model.joint_names[j.leader])} '
            f'multiplier="{_num(j.multiplier)}" offset="{_num(j.offset)}"{second}/>')


def _num(v: float) -> str:
    return repr(float(v)) if v != 0 else "0"


def _origin(T: np.ndarray) -> str:
    xyz = " ".join(_num(v) for v in T[:3, 3])
    angles = " ".join(_num(v) for v in rpy_angles(T[:3, :3]))
    return f'<origin xyz="{xyz}" rpy="{angles}"/>'


def _point_origin(p) -> str:
    return f'<origin xyz="{" ".join(_num(v) for v in p)}" rpy="0 0 0"/>'


def _frame_along(p0: np.ndarray, p1: np.ndarray) -> np.ndarray:
    """A pose at the segment's middle with z along it (a URDF cylinder's axis)."""
    T = np.eye(4)
    T[:3, 3] = (p0 + p1) / 2
    d = p1 - p0
    n = float(np.linalg.norm(d))
    if n < 1e-12:
        return T
    z = d / n
    helper = np.array([1.0, 0.0, 0.0]) if abs(z[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    x = np.cross(helper, z)
    x /= np.linalg.norm(x)
    T[:3, :3] = np.column_stack([x, np.cross(z, x), z])
    return T


def _geometry(shape) -> list[str]:
    """URDF <geometry> elements with their origins for one shape (link frame)."""
    if shape.kind == "box":
        size = " ".join(_num(2 * h) for h in shape.half)
        T = np.eye(4)
        T[:3, :3], T[:3, 3] = shape.rotation(), shape.p0
        return [f'{_origin(T)}<geometry><box size="{size}"/></geometry>']
    p0, p1, r = np.asarray(shape.p0, float), np.asarray(shape.p1, float), float(shape.radius)
    out = [f'{_point_origin(p)}<geometry><sphere radius="{_num(r)}"/></geometry>' for p in (p0, p1)]
    length = float(np.linalg.norm(p1 - p0))
    if length > 1e-9:
        out.append(f'{_origin(_frame_along(p0, p1))}<geometry><cylinder radius="{_num(r)}" '
                   f'length="{_num(length)}"/></geometry>')
    return out


def _inertial(mass: float, com: np.ndarray, inertia: np.ndarray) -> str:
    """The link's mass, centre of mass and inertia about it (the model's own, link frame)."""
    I = inertia
    return (f'<inertial>{_point_origin(com)}<mass value="{_num(mass)}"/>'
            f'<inertia ixx="{_num(I[0, 0])}" ixy="{_num(I[0, 1])}" ixz="{_num(I[0, 2])}" iyy="{_num(I[1, 1])}" '
            f'iyz="{_num(I[1, 2])}" izz="{_num(I[2, 2])}"/></inertial>')


def to_urdf(model) -> str:
    """The URDF text of `model` (SI units, the model's joint and frame names)."""
    masses, coms = model.tables[1][:, 0], model.tables[1][:, 1:4]
    by_link: dict[int, list] = {}
    for s in one_bound_each(model.shapes):   # a mesh bounded both ways is written as its box
        by_link.setdefault(s.link, []).append(s)
    note = f"{model.name}, written by hil's urdf command from {model.spec}".replace("--", "- -")  # (XML comments)
    lines = ['<?xml version="1.0"?>', f"<!-- {note} -->",
             f"<robot name={quoteattr(model.name)}>"]

    def link(name: str, index: int | None) -> None:
        body = []
        if index is not None:   # a moving link: never without mass and inertia (MIN_MASS_KG)
            inertia = model.inertias[index + 1].copy()
            for k in range(3):
                inertia[k, k] = max(inertia[k, k], MIN_INERTIA_KGM2)
            body.append(_inertial(max(float(masses[index + 1]), MIN_MASS_KG), coms[index + 1], inertia))
            for s in by_link.get(index, []):
                for g in _geometry(s):
                    body += [f"<visual>{g}</visual>", f"<collision>{g}</collision>"]
        inner = "".join(f"\n    {b}" for b in body)
        lines.append(f"  <link name={quoteattr(name)}>{inner}{chr(10) + '  ' if body else ''}</link>")

    link(model.base_frame, -1)
    for i, j in enumerate(model.joints + model.followers):
        parent = model.base_frame if j.parent < 0 else model.link_names[j.parent]
        link(model.link_names[i], i)
        axis = " ".join(_num(v) for v in j.axis)
        lines.append(f'  <joint name={quoteattr(j.name)} type="revolute"><parent link={quoteattr(parent)}/>'
                     f"<child link={quoteattr(model.link_names[i])}/>{_origin(j.placement)}<axis xyz=\"{axis}\"/>"
                     + _limit_or_mimic(model, j) + "</joint>")
    taken = set(model.joint_names) | {f.name for f in model.followers}
    for f in range(model.n_links + 1, len(model.frame_names)):
        name = model.frame_names[f]
        li, offset = model.frame_offset(name)
        parent = model.base_frame if li < 0 else model.link_names[li]
        joint = name + "_fixed"
        while joint in taken:
            joint += "_"
        taken.add(joint)
        link(name, None)
        lines.append(f"  <joint name={quoteattr(joint)} type=\"fixed\"><parent link={quoteattr(parent)}/>"
                     f"<child link={quoteattr(name)}/>{_origin(offset)}</joint>")
    lines.append("</robot>")
    return "\n".join(lines) + "\n"
