"""Inverse kinematics: PUMA closed form (all 8 branches) and results types.

Units: metres and radians; target poses are `T_base_tool` (4, 4) in the model's base frame.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hil._jit import entry_point
from hil.errors import InputError
from hil.kinematics import _lm as P_LM
from hil.kinematics import _puma_ik as P

_empty = np.empty
_zeros = np.zeros
_NDARRAY = np.ndarray
_F64 = np.dtype(np.float64)
_SHAPE44 = (4, 4)
_SHAPE3 = (3,)

BRANCH_LABELS: tuple[str, ...] = tuple(
    f"{sh}-{el}-{wr}" for sh in ("right", "left") for el in ("up", "down") for wr in ("noflip", "flip"))
"""Names of the 8 PUMA branches, in the order of `IKSolutions.q` rows for every target: row
`BRANCH_LABELS.index("left-down-flip")` is always that branch (valid or not)."""


class IKResult:
    """Outcome of an IK request. `q` is always finite (radians); `success` tells whether the
    priority-1 targets were met within tolerance; `residual` is the norm of their remaining error
    (metres and radians mixed, weighted); `residuals` the same per priority level; `reason` says
    what failed, in words; `branch` names the PUMA branch when the closed form was used.
    (A slotted plain class: it is built once per solve, on the control loop's path.)"""

    __slots__ = ("q", "success", "residual", "iterations", "reason", "branch", "residuals")

    def __init__(self, q: np.ndarray, success: bool, residual: float, iterations: int, reason: str = "",
                 branch: str | None = None, residuals: tuple[float, ...] = ()) -> None:
        self.q = q
        self.success = success
        self.residual = residual
        self.iterations = iterations
        self.reason = reason
        self.branch = branch
        self.residuals = residuals

    def __bool__(self) -> bool:
        return self.success

    def __repr__(self) -> str:
        return (f"IKResult(q_deg={np.round(np.degrees(self.q), 4).tolist()}, success={self.success}, "
                f"residual={self.residual:.3g}, iterations={self.iterations}"
                + (f", branch={self.branch!r}" if self.branch else "") + (f", reason={self.reason!r}" if self.reason else "")
                + ")")


class IKSolutions:
    """All closed-form branches for one target: `q` (8, 6) radians, `valid` (8,) reachable,
    `in_limits` (8,) valid and inside the joint ranges (angles wrapped by 2π where that fits),
    `labels` (8,) = `BRANCH_LABELS` (rows in that fixed order, whatever the target: "right-up-noflip"
    first), and `reason` when no branch is valid (or none fits the ranges). Rows that are not valid
    hold no meaningful angles. A plain slotted class: building it is on the hot path of path planning."""

    __slots__ = ("q", "_status", "reason")

    def __init__(self, q: np.ndarray, status: int, reason: str = "") -> None:
        self.q = q
        self._status = status  # the kernel's word: masks of up (bits 8-15), valid (16-23), in limits (24-31)
        self.reason = reason

    @property
    def valid(self) -> np.ndarray:
        """(8,) bool, read-only: the branch reaches the target."""
        return _MASK_BITS[(self._status >> 16) & 0xFF]

    @property
    def in_limits(self) -> np.ndarray:
        """(8,) bool, read-only: valid and inside the joint ranges."""
        return _MASK_BITS[(self._status >> 24) & 0xFF]

    @property
    def labels(self) -> tuple[str, ...]:
        return BRANCH_LABELS

    def index(self, branch: str) -> int:
        """Row of the named branch (e.g. "right-up-noflip")."""
        try:
            return BRANCH_LABELS.index(branch)
        except ValueError:
            raise InputError(f"unknown branch {branch!r}; branches: {', '.join(BRANCH_LABELS)}") from None

    def nearest(self, q_near: np.ndarray, branch: str | None = None) -> int | None:
        """Index of the in-limit branch nearest q_near (Euclidean, radians), or of `branch`."""
        in_mask = (self._status >> 24) & 0xFF
        if branch is not None:
            i = self.index(branch)
            return i if in_mask >> i & 1 else None
        if not in_mask:
            return None
        idx = _MASK_INDICES[in_mask]
        d = np.linalg.norm(self.q[idx] - q_near, axis=1)
        return int(idx[np.argmin(d)])

    def __repr__(self) -> str:
        rows = [f"  {lab:<18} valid={bool(v)!s:<5} in_limits={bool(i)!s:<5} q_deg={np.round(np.degrees(q), 3).tolist()}"
                for lab, v, i, q in zip(self.labels, self.valid, self.in_limits, self.q)]
        return "IKSolutions(\n" + "\n".join(rows) + (f"\n  reason: {self.reason}" if self.reason else "") + ")"


def check_pose(T, what: str = "target") -> np.ndarray:
    """Validate a homogeneous transform: shape (4, 4), finite, proper orthonormal rotation.
    Returns it as a float64 array; raises `InputError` naming what is wrong."""
    if T.__class__ is not np.ndarray or T.dtype != np.float64:
        try:
            T = np.asarray(T, dtype=np.float64)
        except (TypeError, ValueError) as e:
            raise InputError(f"{what} must be a (4, 4) homogeneous transform") from e
    if T.shape != (4, 4):
        raise InputError(f"{what} must have shape (4, 4), got {T.shape}")
    if not T.flags.c_contiguous:
        T = np.ascontiguousarray(T)
    status = P_LM.rigid_status(T)
    if status == 0:
        return T
    if status == 1:
        r, c = np.argwhere(~np.isfinite(T))[0]
        raise InputError(f"{what}[{r}, {c}] is {float(T[r, c])!r}; the pose must be finite")
    if status == 2:
        raise InputError(f"{what}: last row must be [0, 0, 0, 1], got {T[3].tolist()}")
    R = T[:3, :3]
    if status == 3:
        err = float(np.abs(R @ R.T - np.eye(3)).max())
        raise InputError(f"{what}: rotation is not orthonormal (max |R Rᵀ − I| = {err:.3g}); not a rigid transform")
    raise InputError(f"{what}: rotation has det −1 (a reflection); not a rigid transform")


def _puma_geometry(model) -> np.ndarray:
    dh = model.meta.get("dh")
    if dh is None:
        raise InputError(f"{model.name}: closed-form IK needs a DH model of the PUMA 560 structure")
    a, d, alpha = (np.asarray(dh[k]) for k in ("a", "d", "alpha"))
    expect_alpha = np.radians([-90, 0, 90, -90, 90, 0])
    if (a.shape != (6,) or not np.allclose(alpha, expect_alpha) or a[0] != 0 or a[3:].any()
            or d[0] != 0 or d[2] != 0 or d[4:].any()):
        raise InputError(f"{model.name}: closed-form IK supports the PUMA 560 DH structure (Zhao et al. 2007) only")
    return np.array([a[1], a[2], d[1], d[3]])


def puma_closed_form(model) -> bool:
    """Whether the model has the PUMA 560's structure, which `ik_puma` solves in closed form."""
    try:
        _puma_geometry(model)
    except InputError:
        return False
    return True


class _PumaSolver:
    """Per-model constants for the closed form, built once and kept on the model."""

    def __init__(self, model) -> None:
        geom = _puma_geometry(model)
        floor_z = float(model.meta.get("floor_z_m", -1e300))
        self.params = np.concatenate([geom, [floor_z], model.lower, model.upper])
        self.geom = geom
        self.floor_z = floor_z
        T_tool = model.tool_offset
        self.tool_inv = None if np.array_equal(T_tool, np.eye(4)) else np.linalg.inv(T_tool)
        # T and q_near typed for any layout ("A"): a transposed or sliced pose must not be misread
        self.entry = entry_point(P.puma_ik_kernel, np.zeros((4, 8))[:, ::2], self.params, np.zeros(4)[::2],
                                 np.zeros((8, 6)))


# row m: the 8 bits of m as bools (read-only, shared: `IKSolutions.valid` hands out its rows)
_MASK_BITS = ((np.arange(256)[:, None] >> np.arange(8)) & 1).astype(bool)
_MASK_BITS.flags.writeable = False
_MASK_INDICES = [np.flatnonzero(row) for row in _MASK_BITS]


def ik_puma(model, T, q_near=None) -> IKSolutions:
    """All 8 closed-form branches of the PUMA 560 for the tool pose `T` (4, 4) in the base frame.

    Angles are wrapped by multiples of 2π into the joint ranges where one fits, choosing the
    equivalent nearest `q_near` (default: the home pose). Singular cases give finite angles: at
    θ5 = 0 only θ4 + θ6 is defined and θ4 is kept from `q_near`. Unreachable targets give
    `valid` all false and a `reason` (too far, too close, below the floor).
    """
    solver = model.meta.get("_puma_solver")
    if solver is None:
        solver = model.meta["_puma_solver"] = _PumaSolver(model)
    if T.__class__ is not _NDARRAY or T.dtype is not _F64 or T.shape != _SHAPE44:
        T = check_pose(T)
    if q_near is None:
        q_near = model.home
    else:
        q_near = model._fast_q(q_near)
        if not np.isfinite(q_near).all():
            raise InputError(f"{model.name}: q_near must be finite, got {q_near.tolist()}")
    if solver.tool_inv is not None:
        T = T @ solver.tool_inv
    Q = _empty((8, 6))
    status = solver.entry(T, solver.params, q_near, Q)
    reasons = status & 0xFF
    if reasons & (P.NOT_RIGID | P.NOT_FINITE):
        check_pose(T)  # raises with the details
    reason = ""
    if reasons:
        reason = _puma_reason(reasons, T, solver.geom, solver.floor_z)
    elif not status >> 24:
        reason = "reachable, but no branch fits inside the joint ranges"
    return IKSolutions(Q, status, reason)


def _puma_reason(status: int, T: np.ndarray, geom: np.ndarray, floor_z: float) -> str:
    a2, a3, d2, d4 = geom
    x, y, z = T[:3, 3]
    if status & P.NOT_FINITE:
        return "target is not finite"
    if status & P.BELOW_FLOOR:
        return f"target z = {z * 1e3:.1f} mm is below the floor (z = {floor_z * 1e3:.1f} mm)"
    if status & P.TOO_CLOSE:
        return (f"too close: the wrist centre is {math.hypot(x, y) * 1e3:.1f} mm from the shoulder axis, "
                f"inside the {d2 * 1e3:.1f} mm shoulder offset")
    reach = a2 + math.hypot(a3, d4)
    dist = math.sqrt(max(x * x + y * y - d2 * d2, 0.0) + z * z)
    if status & P.TOO_FAR:
        return f"too far: the wrist centre is {dist * 1e3:.1f} mm from the shoulder, reach is {reach * 1e3:.1f} mm"
    return (f"too close: the wrist centre is {dist * 1e3:.1f} mm from the shoulder, inside the arm's "
            f"inner reach {abs(a2 - math.hypot(a3, d4)) * 1e3:.1f} mm")


# ----------------------------------------------------------------------------- LM IK
_MASKS = {"pose": (1, 1, 1, 1, 1, 1), "position": (1, 1, 1, 0, 0, 0), "orientation": (0, 0, 0, 1, 1, 1)}
_COMPONENTS = ("x", "y", "z", "rx", "ry", "rz")


def _parse_mask(mask) -> tuple[float, ...] | np.ndarray:
    """The six 0/1 flags (x y z rx ry rz) of a task mask given by name, tokens or six numbers."""
    if isinstance(mask, str):
        if mask in _MASKS:
            return _MASKS[mask]
        out = np.zeros(6)
        for tok in mask.replace(",", " ").split():
            if tok not in _COMPONENTS:
                raise InputError(f"task mask {mask!r}: unknown component {tok!r}; use pose, position, "
                                 f"orientation or some of {' '.join(_COMPONENTS)}")
            out[_COMPONENTS.index(tok)] = 1.0
        if not out.any():
            raise InputError(f"task mask {mask!r} selects nothing")
        return out
    arr = np.asarray(mask, dtype=np.float64).reshape(-1)
    if arr.shape != (6,):
        raise InputError(f"task mask must be a name or 6 flags (x y z rx ry rz), got {mask!r}")
    return (arr != 0).astype(np.float64)


@dataclass(frozen=True)
class Task:
    """One IK objective: bring `frame` (a frame name or index, or "com" for the centre of mass)
    to `target` — a (4, 4) pose or a (3,) point in the `ref` frame (default: the base).

    `mask` picks the components, in the ref frame: "pose", "position", "orientation", or tokens
    from x y z rx ry rz (e.g. "x y"). `weight` is one number or six. `priority` 1 is the highest;
    lower priorities move only in what higher ones leave free. `max_error_step` (ε, metres or
    radians) caps the error a task may ask for in one iteration, so a task added mid-motion pulls
    the robot in gradually (Tanaka & Sugihara 2014, eqs. 2–3) instead of jerking it.
    """

    frame: str | int
    target: object
    mask: object = "pose"
    weight: object = 1.0
    priority: int = 1
    ref: str | int | None = None
    max_error_step: float = 0.0


def _as_target(target, where: str) -> np.ndarray:
    """A task target (anything but a float64 array) as one, or `InputError` naming the task."""
    try:
        return np.asarray(target, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise InputError(f"{where}: target must be a pose (4, 4) or a point (3,) of numbers, got {target!r}") from e


def _pack_tasks(model, tasks):
    tasks = list(tasks)
    if not tasks:
        raise InputError("ik_lm needs at least one task")
    prios = sorted({int(t.priority) for t in tasks})
    level_of = {p: i for i, p in enumerate(prios)}
    table = np.zeros((len(tasks), P_LM.TASK_W))
    targets = np.zeros((len(tasks), 4, 4))
    for i, t in enumerate(tasks):
        if not isinstance(t, Task):
            raise InputError(f"task {i} must be a hil.kinematics.Task, got {type(t).__name__}")
        if t.frame == "com":
            f = -1
        else:
            f = model.frame_index(t.frame)
        rf = 0 if t.ref is None else model.frame_index(t.ref)
        mask = _parse_mask(t.mask)
        orientation = mask[3] or mask[4] or mask[5]
        if f < 0 and orientation:
            raise InputError("task on 'com' can only constrain position components (x y z)")
        weight = t.weight
        if isinstance(weight, (int, float)):  # the usual case, without NumPy's per-call overheads
            if not (math.isfinite(weight) and weight >= 0):
                raise InputError(f"task {i} ({t.frame}): weight must be one or six non-negative numbers")
            table[i, P_LM.T_WEIGHT:P_LM.T_WEIGHT + 6] = weight
        else:
            w = np.broadcast_to(np.asarray(weight, dtype=np.float64), (6,)) if np.ndim(weight) == 0 \
                else np.asarray(weight, dtype=np.float64).reshape(-1)
            if w.shape != (6,) or not np.all(np.isfinite(w)) or np.any(w < 0):
                raise InputError(f"task {i} ({t.frame}): weight must be one or six non-negative numbers")
            table[i, P_LM.T_WEIGHT:P_LM.T_WEIGHT + 6] = w
        tgt = t.target
        if tgt.__class__ is not _NDARRAY or tgt.dtype is not _F64:
            tgt = _as_target(tgt, f"task {i} ({t.frame})")
        if tgt.shape == _SHAPE3:
            if _target_entries()[1](targets, i, tgt):
                raise InputError(f"task {i} ({t.frame}): target {tgt.tolist()} is not finite")
            if orientation:
                raise InputError(f"task {i} ({t.frame}): a (3,) target cannot constrain orientation; give a (4, 4) pose")
            targets[i, 0, 0] = targets[i, 1, 1] = targets[i, 2, 2] = targets[i, 3, 3] = 1.0
        else:
            targets[i] = check_pose(tgt, f"task {i} ({t.frame}) target")
        eps = float(t.max_error_step)
        if not eps >= 0:
            raise InputError(f"task {i}: max_error_step must be ≥ 0")
        table[i, P_LM.T_FRAME] = f
        table[i, P_LM.T_REF] = rf
        table[i, P_LM.T_LEVEL] = level_of[int(t.priority)]
        table[i, P_LM.T_EPS] = eps
        table[i, P_LM.T_MASK:P_LM.T_MASK + 6] = mask
    if len(prios) == 1:  # one level: already in order
        return table, targets, 1, tasks, np.arange(len(tasks))
    order = np.argsort(table[:, P_LM.T_LEVEL], kind="stable")
    position = np.empty(len(tasks), dtype=np.int64)
    position[order] = np.arange(len(tasks))
    return table[order], targets[order], len(prios), [tasks[k] for k in order], position


def _typical_length(model) -> float:
    F = model.fk_frames(model.home)
    d = np.linalg.norm(F[:, :3, 3] - F[0, :3, 3], axis=1)
    return max(float(d.max()) / 2.0, 1e-3)


_LM_ENTRY = None


def _lm_entry(solver) -> object:
    """The compiled LM kernel entry, looked up once per process (the argument types never change)."""
    global _LM_ENTRY
    if _LM_ENTRY is None:
        _LM_ENTRY = entry_point(P_LM.lm_solve, np.zeros(4)[::2], solver._kin, solver._mt, solver._setup,
                                solver.targets, np.zeros(solver.model.n), np.zeros(2 + solver.nlev))
    return _LM_ENTRY


_TARGET_ENTRIES: tuple = ()


def _target_entries() -> tuple:
    """Compiled entries that check and store a new pose / point target, looked up once per process."""
    global _TARGET_ENTRIES
    if not _TARGET_ENTRIES:
        any_pose = np.zeros((4, 8))[:, ::2]  # layout "A": any (4, 4) array, strided or not
        targets = np.zeros((1, 4, 4))
        _TARGET_ENTRIES = (entry_point(P_LM.set_pose_target, targets, 0, any_pose),
                           entry_point(P_LM.set_point_target, targets, 0, np.zeros(6)[::2]))
    return _TARGET_ENTRIES


SOLVE_DOC = """Solve from q0 (radians); `max_iter` overrides the solver's limit for this call.
Not for concurrent calls on one solver (it keeps its targets and a status buffer)."""
SET_TARGET_DOC = """Replace the target of task i (index in the order the tasks were given): a pose (4, 4),
or a point (3,) for position-only tasks, in the task's reference frame. A target that is refused
(not rigid, not finite, wrong shape) leaves the old one in place."""


def _solve_call(solver: "LMSolver"):
    """`LMSolver.solve`: a function closed over the solver's arrays (no attribute lookups, one
    status buffer reused) because it runs once per control cycle; see benchmarks/bench_ik.py."""
    model = solver.model
    entry, kin, mt = solver._entry, solver._kin, solver._mt
    setup, targets, nlev = solver._setup, solver.targets, solver.nlev
    qshape, as_q, n = model._qshape, model._as_q, model.n
    info = _zeros(2 + nlev)
    limit = solver.tol * 10
    ndarray, f64, empty = _NDARRAY, _F64, _empty

    def solve(q0, max_iter: int | None = None) -> IKResult:
        if q0.__class__ is not ndarray or q0.dtype is not f64 or q0.shape != qshape:
            q0 = as_q(q0)
        prm = setup
        if max_iter is not None:
            prm = setup.copy()
            prm[P_LM.SETUP_MAX_ITER] = max_iter
        q = empty(n)
        status = entry(q0, kin, mt, prm, targets, q, info)
        vals = info.tolist()
        if status == 0 and nlev == 1:  # the common case, without the reasons' bookkeeping
            return IKResult(q, vals[2] <= limit, vals[2], int(vals[1]), "", None, (vals[2],))
        return solver._finish(q0, q, status, vals, limit)
    solve.__doc__ = SOLVE_DOC
    return solve


def _set_target_call(solver: "LMSolver"):
    """`LMSolver.set_target`, closed over the solver's arrays; anything unusual (a list as target,
    a bad index, a refused pose) takes the checked method, which names what is wrong."""
    targets = solver.targets
    ndarray, f64 = _NDARRAY, _F64
    set_pose, set_point, checked = solver._set_pose, solver._set_point, solver._set_target_checked
    slot = dict(enumerate(solver._position))

    def set_target(i: int, target) -> None:
        # the kernels check the shape too; only the number of dimensions must be right before
        # the call (a compiled entry reads any array as having the dimensions it was built for)
        if i.__class__ is int and target.__class__ is ndarray and target.dtype is f64:
            k = slot.get(i)
            if k is not None:
                ndim = target.ndim
                if ndim == 2:
                    if not set_pose(targets, k, target):
                        return
                elif ndim == 1:
                    if not set_point(targets, k, target):
                        return
        checked(i, target)  # the slow path names what is wrong

    set_target.__doc__ = SET_TARGET_DOC
    return set_target


class LMSolver:
    """A prioritised LM IK problem packed once, solved many times (e.g. once per control cycle).

    `solve(q0)` runs the kernel; `set_target(i, target)` replaces task i's target (both are
    functions set per solver, see `_solve_call`). See `ik_lm`.
    """

    def __init__(self, model, tasks, max_iter: int = 100, tol: float = 1e-10, wbar: float | None = None,
                 locked: dict[str, float] | None = None,
                 bounds: dict[str, tuple[float, float]] | None = None) -> None:
        """`locked`: joints held at the given angle (radians) by this solver (e.g. arms while walking);
        `bounds`: narrower ranges (radians) for some joints, inside the model's."""
        self.model = model
        self.lower = model.lower.copy()
        self.upper = model.upper.copy()
        for name, (lo, hi) in (bounds or {}).items():
            i = model.joint_index(name)
            self.lower[i] = max(self.lower[i], lo)
            self.upper[i] = min(self.upper[i], hi)
        for name, v in (locked or {}).items():
            i = model.joint_index(name)
            self.lower[i] = self.upper[i] = float(np.clip(v, model.lower[i], model.upper[i]))
        table, self.targets, self.nlev, self.tasks, position = _pack_tasks(model, tasks)
        self._position = tuple(int(k) for k in position)
        self._set_pose, self._set_point = _target_entries()
        if wbar is None:
            wbar = model.meta.get("_lm_wbar")
            if wbar is None:
                wbar = model.meta["_lm_wbar"] = 1e-3 * _typical_length(model) ** 2
        if not (max_iter >= 1 and tol > 0 and wbar > 0):
            raise InputError("ik_lm: max_iter must be ≥ 1, tol and wbar > 0")
        self.tol = float(tol)
        # one setup vector for the kernel (see `_lm.SETUP_*`); the bounds and the task table are views of it
        n, head = model.n, P_LM.SETUP_HEAD
        self._setup = setup = np.concatenate([np.zeros(head), self.lower, self.upper, table.ravel()])
        setup[P_LM.SETUP_MAX_ITER] = max_iter
        setup[P_LM.SETUP_TOL] = self.tol
        setup[P_LM.SETUP_WBAR] = wbar
        setup[P_LM.SETUP_LAMBDA] = 1e-9
        setup[P_LM.SETUP_NLEV] = self.nlev
        setup[P_LM.SETUP_NTASK] = len(table)
        self.lower = self._setup[head:head + n]
        self.upper = self._setup[head + n:head + 2 * n]
        self.table = self._setup[head + 2 * n:].reshape(table.shape)
        self._kin, self._mt = model.tables
        self._entry = _lm_entry(self)
        self.solve = _solve_call(self)
        self.set_target = _set_target_call(self)

    def _set_target_checked(self, i: int, target) -> None:
        position = self._position
        if not (isinstance(i, (int, np.integer)) and 0 <= i < len(position)):
            raise InputError(f"task index {i!r} out of range 0..{len(position) - 1}")
        k = position[i]
        if target.__class__ is not _NDARRAY or target.dtype is not _F64:
            target = _as_target(target, f"task {i}")
        shape = target.shape
        if shape == _SHAPE44:
            if self._set_pose(self.targets, k, target):
                check_pose(target, f"task {i} target")  # raises with the details
        elif shape == _SHAPE3:
            if self._set_point(self.targets, k, target):
                raise InputError(f"task {i}: target {target.tolist()} is not finite")
        else:
            raise InputError(f"task {i}: target must be a pose (4, 4) or a point (3,), got shape {shape}")

    def _finish(self, q0: np.ndarray, q: np.ndarray, status: int, vals: list, limit: float) -> IKResult:
        """The result of a solve that did not simply converge: success judged, reason in words."""
        model = self.model
        residuals = tuple(vals[2:])
        success = residuals[0] <= limit
        reason = ""
        if status == P_LM.NOT_FINITE:
            bad = np.flatnonzero(~np.isfinite(q0))
            if bad.size:
                i = int(bad[0])
                raise InputError(f"{model.name}: q0[{i}] ({model.joint_names[i]}) is {float(q0[i])!r}; must be finite")
            reason = "the iteration produced a non-finite value; kept the start pose"
            q = np.clip(q0, self.lower, self.upper)
            success = False
            residuals = (math.inf,) * self.nlev  # the kernel stopped before measuring them
        elif not success:
            top = int(self.tasks[0].priority)
            frames = ", ".join(str(t.frame) for t in self.tasks if int(t.priority) == top)
            why = "iteration limit reached" if status == P_LM.MAX_ITER else "no further progress"
            reason = (f"priority-1 target not met ({frames}): {why}, residual {residuals[0]:.3g}; the target is "
                      "out of reach, singular or blocked by joint limits — q is the nearest pose found")
        elif len(residuals) > 1 and max(residuals[1:]) > limit:
            reason = ("priority-1 met; lower priorities met as well as they can be: residuals "
                      + ", ".join(f"{r:.3g}" for r in residuals))
        return IKResult(q, success, residuals[0], int(vals[1]), reason, None, residuals)


def ik_lm(model, tasks, q0, max_iter: int = 100, tol: float = 1e-10, wbar: float | None = None,
          restarts: int = 0, seed: int = 0) -> IKResult:
    """Prioritised Levenberg–Marquardt IK with Sugihara's damping W_N = E·I + W̄_N.

    `tasks`: `Task`s (see there). `q0`: start (radians), clamped into the joint ranges. Joint
    limits always hold. Returns `IKResult`: `success` when every priority-1 task is met within
    `tol`; otherwise `q` is the nearest pose found (finite), `reason` says which task is not met.
    `wbar` defaults to 1e-3 · l², l half the model's largest frame distance from the base at home.
    `restarts`: when the solve from q0 fails, up to this many more from random poses inside the
    joint ranges (drawn from `seed`: the same call gives the same answer); the first success, or
    the attempt with the smallest priority-1 residual. LM stops where a joint limit blocks the way
    to the target; another start often goes round it.
    For repeated solves of the same tasks use `LMSolver`, which packs the tasks once.
    """
    solver = LMSolver(model, tasks, max_iter, tol, wbar)
    best = solver.solve(q0)
    if best.success or restarts <= 0:
        return best
    rng = np.random.default_rng(seed)
    for _ in range(int(restarts)):
        res = solver.solve(rng.uniform(model.lower, model.upper))
        if res.success:
            return res
        if res.residual < best.residual:
            best = res
    return best


def solve_ik(model, T, q_near=None, branch: str | None = None) -> IKResult:
    """`model.ik`: the tool pose T (4, 4) → joint angles. Closed form with branch choice for the
    PUMA 560 structure, prioritised LM otherwise; unreachable targets give the nearest pose."""
    T = check_pose(T)
    q_ref = model.home if q_near is None else model._as_q(q_near)
    if puma_closed_form(model):
        sols = ik_puma(model, T, q_ref)
        idx = sols.nearest(q_ref, branch)
        if idx is not None:
            q = sols.q[idx]
            err = np.abs(model.fk(q) - T).max()
            return IKResult(q.copy(), True, float(err), 0, "", sols.labels[idx])
        if branch is not None and not sols.reason:
            reason = f"branch {branch!r} is outside the joint ranges" if sols.valid[sols.index(branch)] \
                else f"branch {branch!r} does not reach the target"
        else:
            reason = sols.reason
        res = ik_lm(model, [Task(model.tool_frame, T)], q_ref)
        return IKResult(res.q, False, res.residual, res.iterations, reason + "; q is the nearest pose found", None,
                        res.residuals)
    if branch is not None:
        raise InputError(f"{model.name}: named branches exist only for the closed-form PUMA IK")
    return ik_lm(model, [Task(model.tool_frame, T)], q_ref)
