"""`RobotModel`: one shape for every robot, built from a data file.

A model is a tree of revolute joints. Link i's pose in the base frame is
`T_base_link[i] = T_base_link[parent(i)] @ placement[i] @ Rot(axis[i], q[i])`,
so link i's frame sits on joint i's axis and turns with it. Named frames are a link
plus a fixed offset. All quantities are SI: metres, radians, seconds, kilograms.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from hil._jit import entry_point
from hil.errors import ConfigError, InputError, did_you_mean
from hil.kinematics import kernels as K
from hil.kinematics.ik import solve_ik
from hil.options import LOOP_RATE_RANGE_HZ

DEFAULT_RATE_HZ = 200.0   # a robot whose file names no loop rate runs at this one
SOLE_FRAMES = ("l_sole", "r_sole")   # the frames every robot with feet names its soles by (left, right)


# the numbers a robot file (ours, or a side file) may give besides its joints: (section, key) →
# (lowest, highest, unit); each is checked when the model is built, whichever loader built it
META_NUMBERS = {
    ("robot", "default_rate_hz"): (*LOOP_RATE_RANGE_HZ, "Hz"),
    ("robot", "floor_z_m"): (-10.0, 10.0, "m"),
    ("workspace", "reach_m"): (1e-3, 100.0, "m"),
    ("workspace", "lower_x_angle_deg"): (0.0, 180.0, "°"),
    ("balance", "margin_m"): (0.0, 0.1, "m"),
}


def check_meta_numbers(meta: Mapping[str, object], where: str) -> None:
    """Refuse a robot file's number that is not one, or outside what hil can use, naming its
    section, key and the range; and a key [workspace] or [balance] does not have (a typo there
    would be ignored, the check it meant silently left at its default)."""
    for section in ("workspace", "balance"):
        table = meta.get(section)
        if table is None:
            continue
        if not isinstance(table, Mapping):
            raise ConfigError(f"{where}: [{section}] must be a table")
        known = sorted(k for s, k in META_NUMBERS if s == section)
        for key in table:
            if (section, key) not in META_NUMBERS:
                raise ConfigError(f"{where}: [{section}] has no key {key!r}{did_you_mean(str(key), known)}; "
                                  f"its keys are {', '.join(known)}")
    for (section, key), (lo, hi, unit) in META_NUMBERS.items():
        table = meta if section == "robot" else (meta.get(section) or {})
        if key not in table:
            continue
        v = table[key]
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and lo <= float(v) <= hi   # NaN fails too
        if not ok:
            shown = str(v).lower() if isinstance(v, bool) else repr(v)   # as the TOML wrote it
            raise ConfigError(f"{where}: [{section}] {key} = {shown} must be a number from {lo:g} to {hi:g} {unit}")


def base_floats(kind: str) -> bool:
    """Whether a robot of this kind stands on its feet, its base free in the world (a humanoid),
    rather than fixed to the ground (an arm)."""
    return kind == "humanoid"


@dataclass(frozen=True)
class Shape:
    """Link geometry for drawing and collision, in the link frame (metres).

    `kind` is "capsule" (segment p0–p1 swept by `radius`) or "box" (centre `p0`,
    half extents `half` along its axes: `axes`, a rotation matrix row-major whose columns are
    the box's axes in the link frame, or empty for the link frame's own). Shapes of one link that
    share a `group` bound one part in more than one way (a mesh: by the box around it, and by the
    capsules around it): the part lies inside each bound, and the checks take the closest of them.
    """

    link: int
    kind: str
    p0: tuple[float, float, float]
    p1: tuple[float, float, float] = (0.0, 0.0, 0.0)
    radius: float = 0.0
    half: tuple[float, float, float] = (0.0, 0.0, 0.0)
    name: str = ""
    axes: tuple[float, ...] = ()
    group: str = ""

    def rotation(self) -> np.ndarray:
        """A box's axes (3, 3): its columns in the link frame."""
        return np.asarray(self.axes, dtype=np.float64).reshape(3, 3) if self.axes else np.eye(3)

    def corners(self) -> np.ndarray:
        """A box's eight corners (8, 3) in the link frame."""
        signs = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], dtype=np.float64)
        return (signs * np.asarray(self.half)) @ self.rotation().T + np.asarray(self.p0)


@dataclass(frozen=True)
class Joint:
    """One revolute joint: parent link (-1 = base), fixed placement (4, 4), unit axis, limits in SI."""

    name: str
    parent: int
    placement: np.ndarray
    axis: np.ndarray
    lower: float
    upper: float
    velocity_limit: float
    acceleration_limit: float


@dataclass(frozen=True)
class Follower:
    """A joint no servo drives: the mechanism turns it with a driven joint (a URDF `<mimic>`, an
    MJCF joint equality), θ = multiplier · q[leader] + offset, or with two (a differential's gear,
    turned by both outputs: + multiplier2 · q[leader2]). It moves its own link (after the driven
    joints' links, in `link_names`), never a coordinate of q: plans, checks and commands are the
    driven joints', the follower computed from them."""

    name: str
    parent: int          # link index (-1 = base): a driven joint's link, or an earlier follower's
    placement: np.ndarray
    axis: np.ndarray
    leader: int          # the driven joint's index in q
    multiplier: float
    offset: float
    leader2: int = -1    # a second driven joint (a differential), -1 for none
    multiplier2: float = 0.0

    def angle(self, q):
        """θ at the driven joints' q (the last axis of q)."""
        out = self.multiplier * q[..., self.leader] + self.offset
        return out + self.multiplier2 * q[..., self.leader2] if self.leader2 >= 0 else out

    def leaders(self) -> list[tuple[int, float]]:
        """(driven joint, multiplier) for each joint it follows."""
        return [(self.leader, self.multiplier)] + ([(self.leader2, self.multiplier2)] if self.leader2 >= 0 else [])


_NDARRAY = np.ndarray


def one_bound_each(shapes) -> list:
    """The shapes with each part bounded once: a mesh bounded both ways (a `group` with a box and
    capsules) keeps its box. What a simulator or another tool takes as the part's geometry (they
    would take the two bounds together as one larger part)."""
    boxed = {(sh.link, sh.group) for sh in shapes if sh.group and sh.kind == "box"}
    return [sh for sh in shapes if not (sh.group and sh.kind == "capsule" and (sh.link, sh.group) in boxed)]


def _shape_extent(shapes) -> tuple[np.ndarray, np.ndarray] | None:
    """The box (min, max corners, link frame) around a link's shapes."""
    pts = []
    for s in shapes:
        if s.kind == "box":
            pts += list(s.corners())
        else:
            for p in (s.p0, s.p1):
                pts += [np.asarray(p) - s.radius, np.asarray(p) + s.radius]
    if not pts:
        return None
    a = np.array(pts)
    return a.min(axis=0), a.max(axis=0)


def box_inertia(mass: float, shapes) -> np.ndarray:
    """The inertia (3, 3) about its centre of mass of a solid of `mass` filling the box around a
    link's shapes (a 1 cm cube where it has none): the estimate for a link whose data gives none."""
    ext = _shape_extent(shapes)
    x, y, z = np.maximum(ext[1] - ext[0], 1e-3) if ext is not None else np.full(3, 0.01)
    return np.diag([mass / 12.0 * (y * y + z * z), mass / 12.0 * (x * x + z * z), mass / 12.0 * (x * x + y * y)])


def inertia_rows(inertias: np.ndarray) -> np.ndarray:
    """(n + 1, 3, 3) tensors as the dynamics kernels' rows: Ixx, Iyy, Izz, Ixy, Ixz, Iyz."""
    I = np.asarray(inertias, dtype=np.float64)
    return np.ascontiguousarray(np.stack([I[:, 0, 0], I[:, 1, 1], I[:, 2, 2], I[:, 0, 1], I[:, 0, 2], I[:, 1, 2]],
                                         axis=1))
_F64 = np.dtype(np.float64)
_POSE_BLOCK = 32  # tool poses allocated together by `fk` (see `_poses_call`)
_empty = np.empty  # module-level binding: `np.empty` costs an extra ~140 ns attribute lookup on numpy 2


class _Entries:
    """Compiled kernel entries for the argument types the wrappers pass (built once per process)."""

    def __init__(self) -> None:
        q = np.zeros(4)[::2]  # layout "A": any 1-D float64 vector, strided or not (a 1-element view would type as "C")
        kin = np.zeros((3, K.K_WIDTH))
        kin[0, K.HDR_N] = 1
        kin[0, K.HDR_NQ] = 1
        kin[0, K.HDR_M] = 1
        mt = np.zeros((2, K.MT_WIDTH))
        m4 = np.zeros((4, 4))
        poses = np.zeros((1, 4, 4))
        self.fk_tool = entry_point(K.fk_tool_into, q, kin, m4)
        self.fk_frame = entry_point(K.fk_frame_into, q, kin, 0, m4)
        self.fk_all = entry_point(K.fk_all_into, q, kin, poses)
        self.jacobian = entry_point(K.jacobian_into, q, kin, 0, poses, np.zeros((6, 1)))
        self.com = entry_point(K.com_into, q, kin, mt, poses, np.zeros(3))


_ENTRIES: _Entries | None = None


def _entries() -> _Entries:
    global _ENTRIES
    if _ENTRIES is None:
        _ENTRIES = _Entries()
    return _ENTRIES


def _transform_rows(T: np.ndarray) -> np.ndarray:
    return np.asarray(T, dtype=np.float64)[:3, :4].reshape(12)


FK_DOC = """Pose (4, 4) of the tool frame in the base frame, metres; q in radians.

A new array each call, which shares memory with no other pose; it is a view of a block of 32
poses allocated together, so one kept for long keeps its block (4 KB) alive."""
FK_FRAMES_DOC = """Poses (n_frames, 4, 4) of every frame in `frame_names`, base frame."""
JACOBIAN_DOC = """Geometric Jacobian (6, n) of `frame` (default: tool): rows [v; ω] in the base frame,
v the velocity of the frame origin. Columns of joints not on the frame's chain are zero."""
COM_DOC = """Centre of mass (3,) of the whole robot in the base frame, metres."""


class ModelData:
    """What one user of a model's kinematics writes into, beside the model it reads (Pinocchio's
    Data beside its Model): the poses the Jacobian and COM kernels work in, and `fk`, `fk_frames`,
    `jacobian` and `com` over them. The model's own calls share one (its `fk`, …: safe between
    threads, as those kernels keep the GIL, see `hil._jit`); a thread that wants scratch of its own
    makes another with `model.create_data()`. The model is never written.

    The calls are functions closed over the model's tables, not methods: a closure reaches the
    kernel with no bound-method object and no attribute lookups, and checks q's dimension rather
    than its full shape (the kernel checks the length); the saving is measured in
    benchmarks/bench_kinematics.py. Each reaches its compiled kernel on its first call (loading
    the kernels takes most of a second in a new process, which one that only reads the model's
    tables, the supervisor or a command checking its arguments, never pays)."""

    def __init__(self, model: "RobotModel") -> None:
        self.frames = _empty((len(model.frame_names), 4, 4))
        self.fk = _poses_call(model, "fk_tool", (4, 4), in_blocks=True)
        self.fk_frames = _poses_call(model, "fk_all", self.frames.shape, in_blocks=False)
        self.jacobian = _jacobian_call(model, self.frames)
        self.com = _com_call(model, self.frames)
        for fn, doc in ((self.fk, FK_DOC), (self.fk_frames, FK_FRAMES_DOC), (self.jacobian, JACOBIAN_DOC),
                        (self.com, COM_DOC)):
            fn.__doc__ = doc


def _poses_call(model: "RobotModel", kernel: str, shape: tuple, in_blocks: bool):
    """q → a new array of `shape` filled by `entry(q, kin, out)` (the tool pose, all frames).

    `in_blocks` (the tool pose): each array is a view of a block of `_POSE_BLOCK` of them
    allocated together, because the next view of a block costs less than a fresh ndarray. Arrays
    never share memory with one another; one kept alive keeps its block (4 KB for poses) alive."""
    kin, as_q, q_error = model._kin, model._as_q, model._q_error
    ndarray, f64, empty = _NDARRAY, _F64, _empty
    block_shape = (_POSE_BLOCK, *shape)
    block = iter(())
    entry = None

    def call(q) -> np.ndarray:
        nonlocal block, entry
        if entry is None:
            entry = getattr(_entries(), kernel)
        if q.__class__ is not ndarray or q.dtype is not f64 or q.ndim != 1:
            q = as_q(q)
        if in_blocks:
            out = next(block, None)  # the builtin (a bound __next__ is slower), no StopIteration
            if out is None:
                block = iter(empty(block_shape))
                out = next(block)
        else:
            out = empty(shape)
        st = entry(q, kin, out)
        if st != -1:
            raise q_error(q, st)
        return out
    return call


def _jacobian_call(model: "RobotModel", scratch: np.ndarray):
    kin, as_q, q_error = model._kin, model._as_q, model._q_error
    ndarray, f64, empty = _NDARRAY, _F64, _empty
    n, tool = model.n, model._tool
    frame_index, row_of_name = model.frame_index, model._frame_index
    entry = None

    def jacobian(q, frame: str | int | None = None) -> np.ndarray:
        nonlocal entry
        if entry is None:
            entry = _entries().jacobian
        if q.__class__ is not ndarray or q.dtype is not f64 or q.ndim != 1:
            q = as_q(q)
        if frame is None:
            f = tool
        else:
            f = row_of_name.get(frame) if frame.__class__ is str else None
            if f is None:
                f = frame_index(frame)  # an index, or an unknown name (raises, naming it)
        J = empty((6, n))
        st = entry(q, kin, f, scratch, J)
        if st != -1:
            raise q_error(q, st)
        return J
    return jacobian


def _com_call(model: "RobotModel", scratch: np.ndarray):
    kin, mt, as_q, q_error = model._kin, model._mt, model._as_q, model._q_error
    ndarray, f64, empty = _NDARRAY, _F64, _empty
    entry = None

    def com(q) -> np.ndarray:
        nonlocal entry
        if entry is None:
            entry = _entries().com
        if q.__class__ is not ndarray or q.dtype is not f64 or q.ndim != 1:
            q = as_q(q)
        out = empty(3)
        st = entry(q, kin, mt, scratch, out)
        if st != -1:
            raise q_error(q, st)
        return out
    return com


def _kinematic_table(joints: Sequence[Joint], followers: Sequence[Follower], rows: list, tool: int) -> np.ndarray:
    """The kernels' kinematic table (`hil.kinematics.kernels`): a header, a row per joint (the driven
    ones, then the followers), a row per frame."""
    nq, n, m = len(joints), len(joints) + len(followers), len(rows)
    kin = np.zeros((1 + n + m, K.K_WIDTH))
    kin[0, K.HDR_N] = n
    kin[0, K.HDR_NQ] = nq
    kin[0, K.HDR_M] = m
    kin[0, K.HDR_TOOL] = tool
    # (a follower of one joint: its second leader is the same joint, times 0)
    moving = [(j, i, 1.0, 0.0, i, 0.0) for i, j in enumerate(joints)] + [
        (f, f.leader, f.multiplier, f.offset, f.leader2 if f.leader2 >= 0 else f.leader, f.multiplier2)
        for f in followers]
    for i, (j, leader, mul, off, leader2, mul2) in enumerate(moving):
        kin[1 + i, K.K_PARENT] = j.parent
        kin[1 + i, K.K_A:K.K_A + 12] = _transform_rows(j.placement)
        kin[1 + i, K.K_AXIS:K.K_AXIS + 3] = j.axis
        kin[1 + i, K.K_LEADER:K.K_OFF + 1] = (leader, mul, off)
        kin[1 + i, K.K_LEADER2:K.K_MUL2 + 1] = (leader2, mul2)
    for f, (link, off) in enumerate(rows):
        kin[1 + n + f, K.K_LINK] = link
        kin[1 + n + f, K.K_O:K.K_O + 12] = _transform_rows(off)
    return kin


def _mass_table(parents: Sequence[int], masses: np.ndarray, coms: np.ndarray) -> np.ndarray:
    """The kernels' mass table: each link's mass and centre of mass (row 0 the base), and the mass of
    each joint's subtree (the link it moves and everything beyond), for the COM Jacobian."""
    n = len(parents)
    mt = np.zeros((n + 1, K.MT_WIDTH))
    mt[:, K.MT_MASS] = masses
    mt[:, K.MT_COM:K.MT_COM + 3] = coms
    for i in range(n - 1, -1, -1):
        mt[1 + i, K.MT_SUBTREE] += mt[1 + i, K.MT_MASS]
        parent = parents[i]
        if parent >= 0:
            mt[1 + parent, K.MT_SUBTREE] += mt[1 + i, K.MT_SUBTREE]
    return mt


def _link_inertias(name: str, inertias: np.ndarray | None, masses: np.ndarray, shapes: Sequence[Shape],
                   n: int) -> np.ndarray:
    """Each link's inertia about its centre of mass, link frame (kg·m²), the base first: as given,
    else estimated from its shapes' boxes."""
    if inertias is None:
        by_link: dict[int, list] = {}
        for sh in shapes:
            by_link.setdefault(sh.link, []).append(sh)
        inertias = np.array([box_inertia(float(masses[i]), by_link.get(i - 1, [])) for i in range(n + 1)])
    inertias = np.asarray(inertias, dtype=np.float64)
    if inertias.shape != (n + 1, 3, 3) or not np.all(np.isfinite(inertias)):
        raise InputError(f"{name}: inertias must be {n + 1} finite (3, 3) tensors (the base, then each link)")
    return inertias.copy()


class RobotModel:
    """A robot as data plus fast kinematics.

    Public API (units SI, frames named in `frame_names`; `fk`, `fk_frames`, `jacobian` and `com`
    are functions of the model's `ModelData`, the rest methods; `create_data()` gives a thread its own):
    `fk(q) -> (4, 4)` base→tool pose; `fk_frames(q) -> (n_frames, 4, 4)`;
    `jacobian(q, frame) -> (6, n)` geometric, [linear; angular], base frame;
    `com(q) -> (3,)` and `com_jacobian(q) -> (3, n)` base frame;
    `fk_batch(Q) -> (N, 4, 4)` tool poses for many configurations.
    """

    def __init__(
        self,
        name: str,
        joints: Sequence[Joint],
        frames: Mapping[str, tuple[int, np.ndarray]],
        tool_frame: str,
        base_frame: str,
        link_names: Sequence[str],
        home: np.ndarray,
        poses: Mapping[str, np.ndarray],
        shapes: Sequence[Shape],
        masses: np.ndarray,
        coms: np.ndarray,
        meta: Mapping[str, object] | None = None,
        tool_offset: np.ndarray | None = None,
        source: str = "",
        inertias: np.ndarray | None = None,
        followers: Sequence[Follower] = (),
    ) -> None:
        self.name = name
        self.source = source
        self.spec = name    # what `hil.robots.load` takes to load this robot again (a name or a file path)
        self.joints: tuple[Joint, ...] = tuple(joints)
        self.n = len(self.joints)
        self.followers: tuple[Follower, ...] = tuple(followers)
        self.n_links = self.n + len(self.followers)   # the driven joints' links, then the followers'
        self.joint_names: tuple[str, ...] = tuple(j.name for j in self.joints)
        self.link_names: tuple[str, ...] = tuple(link_names)
        self.base_frame = base_frame
        self.lower = np.array([j.lower for j in self.joints])
        self.upper = np.array([j.upper for j in self.joints])
        self.velocity_limit = np.array([j.velocity_limit for j in self.joints])
        self.acceleration_limit = np.array([j.acceleration_limit for j in self.joints])
        self.home = np.asarray(home, dtype=np.float64).copy()
        self.poses: dict[str, np.ndarray] = {k: np.asarray(v, float).copy() for k, v in poses.items()}
        self.poses.setdefault("home", self.home.copy())
        self.shapes: tuple[Shape, ...] = tuple(shapes)
        self.meta: dict[str, object] = dict(meta or {})
        self.tool_offset = np.eye(4) if tool_offset is None else np.asarray(tool_offset, float).copy()
        check_meta_numbers(self.meta, source or name)

        self._check_tree()
        rows = self._set_frames(frames, tool_frame)
        self._kin = _kinematic_table(self.joints, self.followers, rows, self._tool)
        self.frame_link = np.array([link for link, _ in rows], dtype=np.int64)
        self._mt = _mass_table([j.parent for j in self.joints + self.followers], masses, coms)
        self.masses = self._mt[:, 0].copy()
        self.total_mass = float(self.masses.sum())
        self.inertias = _link_inertias(name, inertias, masses, self.shapes, self.n_links)
        self._it = inertia_rows(self.inertias)
        self._qshape = (self.n,)
        data = ModelData(self)   # the model's own calls' scratch (see ModelData)
        self.fk, self.fk_frames, self.jacobian, self.com = data.fk, data.fk_frames, data.jacobian, data.com

    def _check_tree(self) -> None:
        for i, j in enumerate(self.joints + self.followers):
            if not -1 <= j.parent < i:
                raise InputError(f"{self.name}: joint {j.name!r} has parent {j.parent}; parents must come first")
        for f in self.followers:
            if not 0 <= f.leader < self.n or not (math.isfinite(f.multiplier) and math.isfinite(f.offset)):
                raise InputError(f"{self.name}: follower {f.name!r} needs a driven leader and finite numbers")
        if len(self.link_names) != self.n_links:
            raise InputError(f"{self.name}: {len(self.link_names)} link names for {self.n_links} links")

    def follower_angles(self, q) -> np.ndarray:
        """Each follower's angle (rad) at q, in `followers`' order."""
        q = np.asarray(q, dtype=np.float64)
        out = np.empty(q.shape[:-1] + (len(self.followers),))
        for k, f in enumerate(self.followers):
            out[..., k] = f.angle(q)
        return out

    def _set_frames(self, frames: Mapping[str, tuple[int, np.ndarray]], tool_frame: str) -> list:
        """The frames' names and rows (link, offset): the base, one per link, then the named extra
        frames (the tool's offset applied to the tool frame)."""
        names = [self.base_frame] + list(self.link_names)
        rows = [(-1, np.eye(4))] + [(i, np.eye(4)) for i in range(self.n_links)]
        for fname, (link, offset) in frames.items():
            if fname in names:
                raise InputError(f"{self.name}: frame name {fname!r} is used twice")
            off = np.asarray(offset, float)
            if fname == tool_frame:
                off = off @ self.tool_offset
            names.append(fname)
            rows.append((link, off))
        self.frame_names: tuple[str, ...] = tuple(names)
        self._frame_index = {nm: i for i, nm in enumerate(names)}
        if tool_frame not in self._frame_index:
            raise InputError(f"{self.name}: tool frame {tool_frame!r} is not a frame ({', '.join(names)})")
        self.tool_frame = tool_frame
        self._tool = self._frame_index[tool_frame]
        self._offsets = [off for _, off in rows]
        return rows

    _CALLS = ("fk", "fk_frames", "jacobian", "com")

    def __getstate__(self) -> dict:
        # the calls are closures over this model (and, once called, over compiled kernels), and
        # meta's "_" keys are caches its users made (solvers, dynamics): a copy sent to another
        # process makes its own
        state = {k: v for k, v in self.__dict__.items() if k not in self._CALLS}
        state["meta"] = {k: v for k, v in self.meta.items() if not k.startswith("_")}
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        data = ModelData(self)
        self.fk, self.fk_frames, self.jacobian, self.com = data.fk, data.fk_frames, data.jacobian, data.com

    def create_data(self) -> ModelData:
        """Scratch of its own and `fk`, `fk_frames`, `jacobian`, `com` writing only there: for a
        thread that calls the kinematics beside others (the model's own calls share one)."""
        return ModelData(self)

    def load_kernels(self) -> None:
        """Load the compiled kernels behind `fk`, `fk_frames`, `jacobian` and `com` now, not at their
        first call: a real-time process calls this before its first cycle, which would otherwise
        stand still for the load (tens of ms: the first IMU reading's balance watch)."""
        _entries()

    # ------------------------------------------------------------------ inputs
    def frame_index(self, frame: str | int) -> int:
        """Row of `frame` (a name or an index) in `fk_frames` output."""
        if isinstance(frame, (int, np.integer)):
            if 0 <= frame < len(self.frame_names):
                return int(frame)
            raise InputError(f"{self.name}: frame index {frame} out of range 0..{len(self.frame_names) - 1}")
        try:
            return self._frame_index[frame]
        except KeyError:
            raise InputError(
                f"{self.name}: unknown frame {frame!r}; frames are: {', '.join(self.frame_names)}") from None

    def frame_offset(self, frame: str | int) -> tuple[int, np.ndarray]:
        """(link index, −1 for the base; the frame's constant pose (4, 4) in that link's frame)."""
        f = self.frame_index(frame)
        return int(self.frame_link[f]), self._offsets[f].copy()

    def joint_index(self, joint: str | int) -> int:
        """Index of a joint given by name or index."""
        if isinstance(joint, (int, np.integer)):
            if 0 <= joint < self.n:
                return int(joint)
            raise InputError(f"{self.name}: joint index {joint} out of range 0..{self.n - 1}")
        try:
            return self.joint_names.index(joint)
        except ValueError:
            raise InputError(
                f"{self.name}: unknown joint {joint!r}{did_you_mean(joint, self.joint_names)}; joints are: "
                f"{', '.join(self.joint_names)}") from None

    def _as_q(self, q) -> np.ndarray:
        try:
            arr = np.asarray(q, dtype=np.float64)
        except (TypeError, ValueError) as e:
            raise InputError(f"{self.name}: q must be {self.n} numbers (radians), got {q!r}") from e
        if arr.shape != self._qshape:
            raise InputError(
                f"{self.name}: q must have shape ({self.n},) (radians, joints {', '.join(self.joint_names)}), "
                f"got shape {arr.shape}")
        return arr

    def _q_error(self, q: np.ndarray, status: int) -> InputError:
        if status == -2:
            return InputError(f"{self.name}: q must have shape ({self.n},), got shape {q.shape}")
        return InputError(
            f"{self.name}: q[{status}] ({self.joint_names[status]}) is {float(q[status])!r}; "
            "joint values must be finite")

    # -------------------------------------------------------------- kinematics
    # Fast path: once q is known to be a contiguous float64 vector of the right length it goes
    # straight to the kernel's compiled entry (no Numba type dispatch, see `hil._jit.entry_point`);
    # the kernel checks finiteness and reports by status. Anything else goes through `_as_q`.
    def _fast_q(self, q) -> np.ndarray:
        if q.__class__ is not _NDARRAY or q.dtype is not _F64 or q.shape != self._qshape:
            return self._as_q(q)
        return q

    def fk_frame(self, q, frame: str | int) -> np.ndarray:
        """Pose (4, 4) of one named frame in the base frame."""
        q = self._fast_q(q)
        f = self.frame_index(frame)
        out = _empty((4, 4))
        st = (_ENTRIES or _entries()).fk_frame(q, self._kin, f, out)
        if st != -1:
            raise self._q_error(q, st)
        return out

    def com_jacobian(self, q) -> np.ndarray:
        """Jacobian (3, n) of the centre of mass in the base frame."""
        q = self._fast_q(q)
        com = _empty(3)
        Jc = _empty((3, self.n))
        st = K.com_jacobian_into(q, self._kin, self._mt, K.empty_poses(len(self.frame_names)), com, Jc)
        if st != -1:
            raise self._q_error(q, st)
        return Jc

    def fk_batch(self, Q, frame: str | int | None = None) -> np.ndarray:
        """Tool poses (N, 4, 4) for configurations Q (N, n), radians (on one core: see fk_batch_into)."""
        try:
            Q = np.ascontiguousarray(Q, dtype=np.float64)
        except (TypeError, ValueError) as e:
            raise InputError(f"{self.name}: Q must be an (N, {self.n}) array of radians") from e
        if Q.ndim != 2 or Q.shape[1] != self.n:
            raise InputError(f"{self.name}: Q must have shape (N, {self.n}), got {Q.shape}")
        finite = np.isfinite(Q)
        if not finite.all():
            k, i = np.argwhere(~finite)[0]
            raise InputError(
                f"{self.name}: Q[{k}, {i}] ({self.joint_names[i]}) is {float(Q[k, i])!r}; joint values must be finite")
        f = self._tool if frame is None else self.frame_index(frame)
        out = np.empty((Q.shape[0], 4, 4))
        K.fk_batch_into(Q, self._kin, f, out)
        return out

    def ik(self, T, q_near=None, branch: str | None = None):
        """Joint angles (radians) for the tool pose T (4, 4), as an `IKResult`.

        The PUMA 560 uses the closed form and picks the in-limit branch nearest `q_near` (default
        home), or the named `branch` ("right-up-noflip", ...); other robots use the prioritised LM
        IK from `q_near`. Unreachable targets: `success` False, `reason` says why, `q` is the
        nearest pose found."""

        return solve_ik(self, T, q_near, branch)

    # ------------------------------------------------------------------ limits
    def within_limits(self, q, tol: float = 1e-12) -> bool:
        """True when every joint is inside its position range."""
        q = self._as_q(q)
        return bool(np.all(q >= self.lower - tol) and np.all(q <= self.upper + tol))

    def limit_violations(self, q, tol: float = 1e-12) -> list[str]:
        """Human-readable list of joints outside their ranges (degrees), empty when none."""
        q = self._as_q(q)
        out = []
        for i in range(self.n):
            if not self.lower[i] - tol <= q[i] <= self.upper[i] + tol:
                out.append(
                    f"{self.joint_names[i]} = {math.degrees(q[i]):.3f}° outside "
                    f"[{math.degrees(self.lower[i]):.1f}, {math.degrees(self.upper[i]):.1f}]°")
        return out

    def with_tool(self, tool_offset: np.ndarray) -> "RobotModel":
        """A copy of this model whose tool frame carries `tool_offset` (4, 4), metres."""
        T = np.asarray(tool_offset, float)
        if T.shape != (4, 4) or not np.all(np.isfinite(T)):
            raise InputError(f"{self.name}: tool offset must be a finite (4, 4) transform")
        return self._copy(self._extra_frames(), T)

    def with_frames(self, frames: Mapping[str, tuple[str, np.ndarray]]) -> "RobotModel":
        """A copy of this model with more named frames: name → (an existing frame, offset (4, 4)
        from it), e.g. the corners of a sole for a task on one of them."""
        extra = self._extra_frames()
        for fname, (on, offset) in frames.items():
            f = self.frame_index(on)
            extra[fname] = (int(self.frame_link[f]), self._offsets[f] @ np.asarray(offset, float))
        return self._copy(extra, self.tool_offset)

    def _extra_frames(self) -> dict[str, tuple[int, np.ndarray]]:
        """The named frames beyond the base and links as the constructor takes them (tool offset out)."""
        frames = {}
        for f in range(self.n_links + 1, len(self.frame_names)):
            off = self._offsets[f]
            if self.frame_names[f] == self.tool_frame:
                off = off @ np.linalg.inv(self.tool_offset)
            frames[self.frame_names[f]] = (int(self.frame_link[f]), off)
        return frames

    def _copy(self, frames: dict, tool_offset: np.ndarray) -> "RobotModel":
        # solvers cached in meta (keys starting with "_") belong to this model's frames: not copied
        meta = {k: v for k, v in self.meta.items() if not k.startswith("_")}
        out = RobotModel(
            self.name, self.joints, frames, self.tool_frame, self.base_frame, self.link_names, self.home,
            self.poses, self.shapes, self._mt[:, K.MT_MASS], self._mt[:, K.MT_COM:K.MT_COM + 3], meta, tool_offset,
            self.source, self.inertias, self.followers)
        out.spec = self.spec
        return out

    def __repr__(self) -> str:
        return f"RobotModel({self.name!r}, {self.n} joints, {len(self.frame_names)} frames)"

    @property
    def kind(self) -> str:
        """What the robot is, as its data file says: "arm" or "humanoid" (a humanoid has l_sole
        and r_sole frames: walking, balance and ZMP checks apply)."""
        return str(self.meta.get("kind", "arm"))

    @property
    def default_rate_hz(self) -> float:
        """The loop rate its runs take unless told (Hz): its data file's, else DEFAULT_RATE_HZ."""
        return float(self.meta.get("default_rate_hz", DEFAULT_RATE_HZ))

    @property
    def floating(self) -> bool:
        """Whether its base is free in the world (it stands on its feet and can fall) rather than
        fixed to the ground: a humanoid's is."""
        return base_floats(self.kind)

    @property
    def sole_half(self) -> tuple[float, float]:
        """A humanoid's sole, half length and half width (m): measured from a URDF robot's feet, else
        the two largest half extents of its `l_foot` box (default 45 × 20 mm): the support polygon
        of the balance checks, the walk planner and the twin."""
        if "sole_half_m" in self.meta:
            hl, hw = self.meta["sole_half_m"]
            return float(hl), float(hw)
        foot = next((s for s in self.shapes if s.name == "l_foot" and s.kind == "box"), None)
        if foot is None:
            return 0.045, 0.02
        hl, hw = sorted(foot.half, reverse=True)[:2]
        return float(hl), float(hw)

    @property
    def board(self) -> str | None:
        """The board kind its data file names (the emulator for --dry-run), or None."""
        b = self.meta.get("board")
        return str(b) if b is not None else None

    # the kernels' view of the model, for other kernels (IK, safety) that take the same tables
    @property
    def tables(self) -> tuple[np.ndarray, np.ndarray]:
        """(kinematic table, mass table) as used by `hil.kinematics.kernels` (read-only)."""
        return self._kin, self._mt
