"""The 3D scene: floor grid, axes, the robot's links (measured solid, commanded ghost, IK preview),
and per-robot extras. Pure geometry helpers plus a class that owns the DearPyGui items it creates.

DearPyGui's 3D layer has no depth buffer (painter's order) and its cull mode is inverted relative
to OpenGL: meshes here are wound counter-clockwise seen from outside and drawn with
`mvCullMode_Front` (verified in shared/research/lab.md §2). Primitives with any vertex outside the
clip volume are dropped whole, so long lines are split into short segments.
"""

from __future__ import annotations

import math

import dearpygui.dearpygui as dpg
import numpy as np

from hil.robots.model import Shape

GROUND = (70, 74, 82, 255)
BACKGROUND = (28, 30, 36)
MEASURED = (90, 160, 235, 255)
OWN_COLOURS = (225, 225, 230, 255)   # the legend's word for a robot drawn in its file's colours
NEAR_LIMIT = (235, 190, 60, 255)
AT_LIMIT = (235, 70, 60, 255)
GHOST = (120, 255, 140, 255)
PREVIEW = (255, 120, 230, 255)
SHADOW = (255, 170, 60, 255)     # the shadow twin's prediction (hil run --shadow)
LEADER = (235, 235, 235, 255)    # the leader arm's pose, within the follower's ranges (hil teleop)
COLLIDING = (190, 90, 255, 255)     # a link the safety checks find in collision
CHECK_SHAPES = (60, 225, 225, 255)  # the shapes the collision and workspace checks use (--shapes)
DIFFERS = (255, 110, 90)            # a joint whose measured angle is off its command (panel text)


def mat(T: np.ndarray):

    return dpg.mvMat4(*np.asarray(T, dtype=float).ravel().tolist())  # row-major in, column-major inside


def _perp(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    a = a / np.linalg.norm(a)
    h = np.array([1.0, 0, 0]) if abs(a[0]) < 0.9 else np.array([0, 1.0, 0])
    u = np.cross(a, h)
    u /= np.linalg.norm(u)
    v = np.cross(a, u)
    return u, v  # u × v = a


def capsule_mesh(p0, p1, r: float, sides: int = 8, domes: bool = True, flat0: bool = False) -> tuple[list, list]:
    """(triangles, edges) of a capsule: a cylinder p0–p1 of radius r with a dome at each end (one
    ring at 45° and the pole; `domes` False: a cone to the pole, for small joins; `flat0`: p0's
    end cut flat, a pedestal standing on the floor), triangles CCW from outside. A zero-length one
    is a ball."""
    p0, p1 = np.asarray(p0, float), np.asarray(p1, float)
    a = p1 - p0
    axis = a / np.linalg.norm(a) if np.linalg.norm(a) >= 1e-9 else np.array([0.0, 0, 1])
    u, v = _perp(axis)
    c45 = math.cos(math.pi / 4)
    ring0, ring1, mid0, mid1 = [], [], [], []
    for k in range(sides):
        t = 2 * math.pi * k / sides
        d = r * (math.cos(t) * u + math.sin(t) * v)
        ring0.append(p0 + d)
        ring1.append(p1 + d)
        mid0.append(p0 + c45 * (d - r * axis))
        mid1.append(p1 + c45 * (d + r * axis))
    pole0, pole1 = p0 - r * axis, p1 + r * axis
    if flat0:
        mid0, pole0 = ring0, p0
    tris, edges = [], []

    def band(lo, hi, k, k2):   # the quad between two rings, `hi` further along the axis
        tris.append((lo[k], lo[k2], hi[k2]))
        tris.append((lo[k], hi[k2], hi[k]))

    for k in range(sides):
        k2 = (k + 1) % sides
        if np.linalg.norm(a) >= 1e-9:
            band(ring0, ring1, k, k2)
        if domes:
            band(ring1, mid1, k, k2)
            if not flat0:
                band(mid0, ring0, k, k2)
        end1, end0 = (mid1, mid0) if domes else (ring1, ring0)
        tris.append((end1[k], end1[k2], pole1))
        tris.append((end0[k2], end0[k], pole0))
        edges.append((ring0[k], ring0[k2]))
        edges.append((ring1[k], ring1[k2]))
        if k % 2 == 0:
            edges += [(pole0, mid0[k]), (mid0[k], ring0[k]), (ring0[k], ring1[k]), (ring1[k], mid1[k]),
                      (mid1[k], pole1)] if domes else [(pole0, ring0[k]), (ring0[k], ring1[k]), (ring1[k], pole1)]
    return tris, edges


def box_mesh(c, half, axes=None) -> tuple[list, list]:
    """(triangles, edges) of a box (its axes: the columns of `axes`, default the frame's own),
    triangles CCW from outside."""
    c, h = np.asarray(c, float), np.asarray(half, float)
    R = np.eye(3) if axes is None else np.asarray(axes, float)
    P = [c + R @ (h * np.array([sx, sy, sz])) for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)]
    # index = 4*ix + 2*iy + iz
    faces = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    tris, edges = [], []
    for a, b, cc, d in faces:
        tris.append((P[a], P[b], P[cc]))
        tris.append((P[a], P[cc], P[d]))
    for i in range(8):
        for j in range(i + 1, 8):
            if bin(i ^ j).count("1") == 1:
                edges.append((P[i], P[j]))
    return tris, edges


def shape_mesh(shape, sides: int = 8, floor_z: float | None = None):
    """(triangles, edges) of a shape; `floor_z` (for the fixed base's shapes): a capsule whose
    end stands on the floor is drawn cut flat there, not with a dome through it."""
    if shape.kind == "capsule" and shape.name.endswith(" join"):
        return capsule_mesh(shape.p0, shape.p1, shape.radius, 6, domes=False)
    if shape.kind == "capsule":
        p0, p1 = np.asarray(shape.p0, float), np.asarray(shape.p1, float)
        if p1[2] < p0[2]:
            p0, p1 = p1, p0
        on_floor = floor_z is not None and p0[2] - shape.radius < floor_z + 1e-6 <= p1[2]
        if on_floor:
            p0 = np.array([p0[0], p0[1], max(p0[2], floor_z)])
        return capsule_mesh(p0, p1, shape.radius, sides, flat0=on_floor)
    return box_mesh(shape.p0, shape.half, shape.rotation())


def nearest_on_shape(shape, p: np.ndarray) -> np.ndarray:
    """The point of a shape's surface (or inside: the point itself) nearest to p, link frame."""
    if shape.kind == "capsule":
        a, b = np.asarray(shape.p0, float), np.asarray(shape.p1, float)
        ab = b - a
        t = float(np.clip((p - a) @ ab / max(ab @ ab, 1e-18), 0.0, 1.0))
        c = a + t * ab
        d = p - c
        n = float(np.linalg.norm(d))
        return p.copy() if n <= shape.radius else c + d * (shape.radius / n)
    c, h, R = np.asarray(shape.p0, float), np.asarray(shape.half, float), shape.rotation()
    return c + R @ np.clip(R.T @ (p - c), -h, h)


def _thickness(shape) -> float:
    return shape.radius if shape.kind == "capsule" else float(min(shape.half))


def connectors(model, min_gap: float = 0.002) -> list:
    """Visual-only capsules that join each joint to its parent's and its own link geometry where
    the collision shapes leave a gap (a neck under a head, struts from the hips to the torso),
    sized from the shapes they join: any robot's data gets a body that reads as one piece. Not
    part of the collision model."""
    by_link: dict[int, list] = {}
    for sh in model.shapes:
        by_link.setdefault(sh.link, []).append(sh)
    out = []
    for j, joint in enumerate(model.joints + model.followers):
        origin_in_parent = np.asarray(joint.placement, float)[:3, 3]
        for link, p in ((joint.parent, origin_in_parent), (j, np.zeros(3))):
            shapes = by_link.get(link)
            if not shapes:
                continue
            points = [nearest_on_shape(sh, p) for sh in shapes]
            k = int(np.argmin([np.linalg.norm(q - p) for q in points]))
            if np.linalg.norm(points[k] - p) < min_gap:
                continue
            r = 0.45 * min(_thickness(shapes[k]), *(_thickness(sh) for sh in by_link.get(j, shapes)))
            out.append(Shape(link, "capsule", tuple(p), tuple(points[k]), radius=max(r, 0.003),
                             name=f"{joint.name} join"))
    return out


def _lowest_z(shape) -> float:
    if shape.kind == "capsule":
        return min(shape.p0[2], shape.p1[2]) - shape.radius
    return float(shape.corners()[:, 2].min())


def pelvis(model, min_gap: float = 0.002) -> list:
    """A humanoid's visual-only pelvis: a box under the base link's geometry, as wide as the hips
    (the joints that hang below it, two or more) and as deep as their links are thick, down to the
    hips. Nothing for other robots, or where the base's shapes reach the hips already."""
    if not model.floating:
        return []
    base = [sh for sh in model.shapes if sh.link == -1]
    if not base:
        return []
    bottom = min(_lowest_z(sh) for sh in base)
    hips = [(j, np.asarray(joint.placement, float)[:3, 3]) for j, joint in enumerate(model.joints)
            if joint.parent == -1 and np.asarray(joint.placement, float)[2, 3] < bottom - min_gap]
    if len(hips) < 2:
        return []
    P = np.array([p for _, p in hips])
    r = max(_thickness(sh) for j, _ in hips for sh in model.shapes if sh.link == j)
    lo = np.array([P[:, 0].mean() - r, P[:, 1].min() - r, P[:, 2].min()])
    hi = np.array([P[:, 0].mean() + r, P[:, 1].max() + r, bottom])
    return [Shape(-1, "box", tuple((lo + hi) / 2), (0.0, 0.0, 0.0), half=tuple((hi - lo) / 2), name="pelvis join")]


def orbit_view(yaw: float, pitch: float, dist: float, target) -> tuple[np.ndarray, np.ndarray]:
    """Camera eye and target (z up) for an orbit camera."""
    t = np.asarray(target, float)
    eye = t + dist * np.array([math.cos(pitch) * math.cos(yaw), math.cos(pitch) * math.sin(yaw), math.sin(pitch)])
    return eye, t


def orthographic(half_w: float, half_h: float, near: float, far: float) -> np.ndarray:
    """An orthographic projection (OpenGL convention, row-major), centred on the view axis."""
    P = np.eye(4)
    P[0, 0], P[1, 1] = 1.0 / half_w, 1.0 / half_h
    P[2, 2] = -2.0 / (far - near)
    P[2, 3] = -(far + near) / (far - near)
    return P


def link_bounds(model, meshes: dict) -> dict[int, np.ndarray]:
    """Per link, points in its frame that bound what is drawn of it: its mesh's box corners, or its
    shapes' (a capsule's ends pushed out by its radius along each axis)."""
    out: dict[int, list] = {}
    for link, (v, _, _) in meshes.items():
        lo, hi = v.min(axis=0), v.max(axis=0)
        out.setdefault(link, []).extend(np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1])
                                                   for z in (lo[2], hi[2])]))
    for sh in model.shapes:
        if sh.link in meshes:
            continue
        if sh.kind == "capsule":
            ends = [np.asarray(sh.p0), np.asarray(sh.p1)]
            out.setdefault(sh.link, []).extend(e + sh.radius * s * axis for e in ends for s in (-1, 1)
                                               for axis in np.eye(3))
        else:
            out.setdefault(sh.link, []).extend(sh.corners())
    return {link: np.array(pts) for link, pts in out.items()}


def look_at(eye, target, up=(0, 0, 1.0)) -> np.ndarray:
    """View matrix (OpenGL convention, row-major) — the same as dpg.create_lookat_matrix."""
    eye, target, up = (np.asarray(x, float) for x in (eye, target, up))
    f = target - eye
    f /= np.linalg.norm(f)
    s = np.cross(f, up)
    s /= np.linalg.norm(s)
    u = np.cross(s, f)
    M = np.eye(4)
    M[0, :3], M[1, :3], M[2, :3] = s, u, -f
    M[:3, 3] = -M[:3, :3] @ eye
    return M


def perspective(fov_y: float, aspect: float, near: float, far: float) -> np.ndarray:
    f = 1.0 / math.tan(fov_y / 2)
    P = np.zeros((4, 4))
    P[0, 0] = f / aspect
    P[1, 1] = f
    P[2, 2] = (far + near) / (near - far)
    P[2, 3] = 2 * far * near / (near - far)
    P[3, 2] = -1.0
    return P


def project(P: np.ndarray, V: np.ndarray, p, width: float, height: float) -> tuple[float, float]:
    """Pixel (x right, y down) of world point p in a drawlist of width × height.

    DearPyGui's `set_clip_space` maps clip x to `width · x + width / 2` (and y likewise, flipped):
    the full width per unit, not half of it as OpenGL does, so only |x|, |y| ≤ 0.5 is on screen."""
    h = P @ V @ np.append(np.asarray(p, float), 1.0)
    ndc = h[:3] / h[3]
    return width * ndc[0] + width / 2, -height * ndc[1] + height / 2


LIGHT = np.array([0.35, -0.45, 0.82]) / np.linalg.norm([0.35, -0.45, 0.82])   # from above, front left
SHADE = (0.84, 1.12)        # a drawn shape's brightness, turned away from the light … facing it
MESH_SHADE = (0.5, 1.0)      # a mesh's: its own colours need the light's full range to read as a solid
MIN_LEVEL = 80              # a black part (a servo case) lifted this far off the dark background


def shaded(color, factor: float):
    return tuple(min(255, int(round(c * factor))) for c in color[:3]) + tuple(color[3:])


def own_colors(rgba: np.ndarray, fallback) -> list[tuple]:
    """Per triangle, the file's RGBA (0…1) as 0…255 with a floor under its levels (black on a dark
    background is no shape), or `fallback` where the file gives none (NaN)."""
    out = []
    for c in np.asarray(rgba, dtype=np.float64).reshape(-1, 4):
        if not np.isfinite(c).all():
            out.append(tuple(fallback))
            continue
        rgb = MIN_LEVEL + c[:3] * (255 - MIN_LEVEL)
        out.append(tuple(int(round(x)) for x in rgb) + (int(round(255 * c[3])),))
    return out


FLOOR_TOUCH_M = 0.01   # a link reaching this near the floor stands on it (a sole): floor marks go over it


def _corners(points: np.ndarray) -> np.ndarray:
    lo, hi = points.min(axis=0), points.max(axis=0)
    return np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])])


def _item_id(item) -> int:
    return item if isinstance(item, int) else dpg.get_alias_id(item)


class RobotDrawing:
    """One copy of the robot (solid or wireframe) as one draw node per link. Solid faces are
    shaded by how they face the light with the robot at home (painted on: the shade turns with
    the link, which keeps depth readable at no cost per frame); a robot's own meshes in their
    file's colours, its drawn shapes in the drawing's colour."""

    def __init__(self, model, parent, color, solid: bool, tag_prefix: str, meshes: dict | None = None,
                 floor_z: float | None = None, joins: bool = True, shapes: list | None = None) -> None:
        """`meshes`: per link (vertices, triangles, per-triangle RGBA) drawn in place of its shapes
        (solid only); `floor_z`: the floor a fixed base stands on (its shapes end there); `joins`:
        the pieces drawn only to make a body read as one (a neck, a pelvis), not the model's shapes;
        `shapes`: these in place of the model's."""

        self.model = model
        self.nodes: dict[int, int] = {}
        self.items: dict[int, list[int]] = {}
        self.shade: dict[int, list[float]] = {}
        self.own: dict[int, list[tuple]] = {}     # per item, its colour when nothing is flagged
        self.solid = solid
        self.color = color
        self.parent = parent
        self.box: dict[int, np.ndarray] = {}   # per link, the corners (8, 3) of what is drawn (its frame)
        self._order: list[int] = []
        meshes = meshes if solid and meshes else {}
        joins = [] if meshes or not joins else connectors(model) + pelvis(model)
        drawn = list(model.shapes if shapes is None else shapes) + joins
        links = sorted({s.link for s in drawn} | set(meshes))
        at_home = model.fk_frames(model.home)
        for link in links:
            node = dpg.add_draw_node(parent=parent, tag=f"{tag_prefix}_link{link}")
            self.nodes[link] = node
            self.items[link] = []
            self.shade[link] = []
            self.own[link] = []
            R = at_home[link + 1, :3, :3]
            if link in meshes:
                v, f, rgba = meshes[link]
                self.box[link] = _corners(v)
                self._triangles(link, node, R, [(v[a], v[b], v[c]) for a, b, c in f], own_colors(rgba, color),
                                MESH_SHADE)
                continue
            ends = []
            for sh in drawn:
                if sh.link != link:
                    continue
                tris, edges = shape_mesh(sh, 8 if solid else 6, floor_z if link < 0 else None)
                ends += [p for tri in tris for p in tri] or [p for e in edges for p in e]
                if solid:
                    self._triangles(link, node, R, tris, [color] * len(tris), SHADE)
                else:
                    for a, b in edges:
                        self.items[link].append(dpg.draw_line(list(a), list(b), color=color, thickness=1, parent=node))
                        self.own[link].append(color)
            if ends:
                self.box[link] = _corners(np.asarray(ends, dtype=np.float64))
        self.link_color: dict[int, tuple | None] = {link: None for link in links}

    def _triangles(self, link: int, node, R: np.ndarray, tris, colors: list, shade: tuple) -> None:
        """Filled triangles, each shaded by how it faces the light with the robot at home."""
        for (a, b, c), own in zip(tris, colors):
            n = np.cross(np.asarray(b) - a, np.asarray(c) - a)
            norm = float(np.linalg.norm(n))
            lit = max(0.0, float((R @ n) @ LIGHT) / norm) if norm > 0 else 0.5
            f = shade[0] + (shade[1] - shade[0]) * lit
            col = shaded(own, f)
            self.shade[link].append(f)
            self.own[link].append(own)
            self.items[link].append(dpg.draw_triangle(list(a), list(b), list(c), color=col, fill=col, thickness=0,
                                                      parent=node))

    def set_poses(self, F: np.ndarray, T_world_base: np.ndarray | None = None) -> None:
        """F: fk_frames output (base frame); row link + 1 is link `link`, row 0 the base."""

        for link, node in self.nodes.items():
            T = F[link + 1]
            if T_world_base is not None:
                T = T_world_base @ T
            dpg.apply_transform(node, mat(T))

    def order_by_depth(self, F: np.ndarray, T_world_base: np.ndarray | None, eye: np.ndarray,
                       forward: np.ndarray, floor_item=None, floor_z: float = 0.0) -> None:
        """Draw the links far to near as the camera at `eye` looking along `forward` sees them (the
        3D layer paints in order, with no depth buffer): a link in front is never painted over by
        one behind it. `floor_item` (marks on the floor: support, CoM, ZMP) is painted over the links
        that stand on the floor (the soles it outlines) and under all others. Only the order of
        these items among the parent's children changes."""
        depth, on_floor = {}, set()
        for link, box in self.box.items():
            T = F[link + 1] if T_world_base is None else T_world_base @ F[link + 1]
            pts = box @ T[:3, :3].T + T[:3, 3]
            depth[link] = float((pts.mean(axis=0) - eye) @ forward)
            if pts[:, 2].min() < floor_z + FLOOR_TOUCH_M:
                on_floor.add(link)
        order = sorted(self.nodes, key=lambda link: (link not in on_floor, -depth.get(link, 0.0)))
        items = [_item_id(self.nodes[link]) for link in order]
        if floor_item is not None:
            items.insert(sum(1 for link in order if link in on_floor), _item_id(floor_item))
        if items == self._order:
            return
        self._order = items
        children = dpg.get_item_children(self.parent, 2)
        mine = set(items)
        slots = iter(items)
        dpg.reorder_items(self.parent, 2, [next(slots) if c in mine else c for c in children])

    def set_link_color(self, link: int, color) -> None:
        """Flag a link in `color` (a limit, a collision), or None: its own colours again."""

        if link not in self.items or self.link_color.get(link) == color:
            return
        self.link_color[link] = color
        for k, item in enumerate(self.items[link]):
            base = self.own[link][k] if color is None else color
            if self.solid:
                col = shaded(base, self.shade[link][k])
                dpg.configure_item(item, color=col, fill=col)
            else:
                dpg.configure_item(item, color=base)

    def show(self, visible: bool) -> None:

        for node in self.nodes.values():
            dpg.configure_item(node, show=visible)


def add_grid(parent, half: float = 1.5, step: float = 0.25, z: float = 0.0, seg: float = 0.25) -> None:

    n = int(round(half / step))
    for i in range(-n, n + 1):
        c = i * step
        x = -half
        while x < half - 1e-9:  # short segments: a primitive with one vertex out of view is dropped
            dpg.draw_line([x, c, z], [x + seg, c, z], color=GROUND, thickness=1, parent=parent)
            dpg.draw_line([c, x, z], [c, x + seg, z], color=GROUND, thickness=1, parent=parent)
            x += seg


AXIS_COLORS = ((230, 60, 60, 255), (60, 210, 60, 255), (70, 110, 240, 255))   # x, y, z


def add_axes(parent, length: float = 0.2, z: float = 0.0, thickness: float = 3) -> None:

    for axis, color in enumerate(AXIS_COLORS):
        p = [0.0, 0.0, z]
        q = list(p)
        q[axis] += length
        dpg.draw_line(p, q, color=color, thickness=thickness, parent=parent)


def add_polyline(parent, points: np.ndarray, color, thickness: float = 2, max_seg: float = 0.05) -> list[int]:

    items = []
    for a, b in zip(points[:-1], points[1:]):
        n = max(1, int(np.linalg.norm(b - a) / max_seg))
        for k in range(n):
            p = a + (b - a) * k / n
            q = a + (b - a) * (k + 1) / n
            items.append(dpg.draw_line(list(p), list(q), color=color, thickness=thickness, parent=parent))
    return items


def add_ring(parent, centre, radius: float, normal=(0, 0, 1.0), color=(120, 120, 160, 120), n: int = 48) -> None:
    u, v = _perp(np.asarray(normal, float))
    pts = np.array([np.asarray(centre) + radius * (math.cos(t) * u + math.sin(t) * v)
                    for t in np.linspace(0, 2 * math.pi, n + 1)])
    add_polyline(parent, pts, color, 1, max_seg=1.0)


def grid_step(model) -> float:
    """A grid spacing for the robot's size: 5 cm for a small robot, 25 cm for a big arm."""
    p = model.fk_frames(model.home)[:, :3, 3]
    size = float(np.max(p.max(axis=0) - p.min(axis=0)))
    return 0.05 if size < 0.8 else 0.25
