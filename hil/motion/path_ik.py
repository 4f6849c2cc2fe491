"""The IK a G-code path is solved with, point after point: one interface, two ways.

- `ClosedFormPath`: the PUMA 560's closed form (Zhao et al. 2007), all eight branches; one branch
  is kept along the whole path (the solution nearest the previous one).
- `PrioritisedPath`: any other arm, by prioritised Levenberg–Marquardt (seed 002's method) seeded
  from the previous point's solution: the tool's position first (strict), its axis normal to the
  workpiece next, and its roll about that axis last — held constant on an arm of six joints or
  more, left free on one of five (an SO-101 keeps its gripper square to the work and turns its
  wrist as it must). A solution that misses the point or the axis by more than the tolerances, or
  jumps from the previous one (a flip of the arm's configuration), is refused, naming why.

Frames: points are in the workpiece frame (mm); `T_place` puts the workpiece in the base frame;
the tool's z axis points into the face (tool z = −workpiece z). Units inside: metres, radians.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod

import numpy as np

from hil.errors import InputError
from hil.kinematics.ik import LMSolver, Task, ik_puma, puma_closed_form

POSITION_TOL_M = 1e-6            # a path point is reached to a micrometre …
AXIS_TOL_RAD = math.radians(0.005)  # … its axis within 0.005° of the workpiece normal (the roll too, where held)
STEP_RAD = 0.5                   # the most any joint turns between two path points (2 mm apart): more is a flip
NEAR_RAD = 0.2                   # a time sample's solution lies this close to its path points' interpolation
R_INTO_FACE = np.diag([1.0, -1.0, -1.0])   # the tool's orientation in the workpiece frame: z into the face


class PathIK(ABC):
    """Joint angles for the tool at workpiece points, continuing from the previous solution."""

    label: str          # what the plan's summary says of the solutions (a branch, or how they were found)

    @abstractmethod
    def starts(self, p_mm: np.ndarray, q_near: np.ndarray) -> tuple[list[tuple[np.ndarray, str]], str]:
        """Solutions at the path's first point, best first (nearest `q_near`), each with its label;
        or none and why."""

    @abstractmethod
    def follow(self, p_mm: np.ndarray, q_prev: np.ndarray) -> tuple[np.ndarray | None, str]:
        """The solution at the next point that continues from `q_prev`; or None and why."""

    @abstractmethod
    def exact(self, p_mm: np.ndarray, q_near: np.ndarray) -> np.ndarray | None:
        """The solution at a point between path points, near `q_near` (their interpolation); None
        when it is lost there."""


def path_ik(model, tool: np.ndarray, T_place: np.ndarray, orientation: str | None = None) -> PathIK:
    """The PUMA 560's closed form where the model has its structure, else prioritised LM;
    `orientation`: "full" (axis and roll held) or "axis" (roll free), default by the arm's joints."""
    if puma_closed_form(model):
        if orientation == "axis":
            raise InputError(f"{model.name}: its closed-form IK holds the tool's whole orientation; leave out "
                             "--orientation axis")
        return ClosedFormPath(model.with_tool(tool), T_place)
    return PrioritisedPath(model, tool, T_place, orientation)


def _pose(T_place: np.ndarray, p_mm: np.ndarray, R: np.ndarray) -> np.ndarray:
    T = np.eye(4)
    T[:3, :3] = T_place[:3, :3] @ R
    T[:3, 3] = T_place[:3, :3] @ (p_mm * 1e-3) + T_place[:3, 3]
    return T


class ClosedFormPath(PathIK):
    """The PUMA 560: all eight branches at each point; the branch kept is the one that continues."""

    def __init__(self, mt, T_place: np.ndarray) -> None:
        self.mt, self.T_place = mt, T_place
        self.label = ""

    def _solutions(self, p_mm: np.ndarray, q_near: np.ndarray):
        return ik_puma(self.mt, _pose(self.T_place, p_mm, R_INTO_FACE), q_near)

    def starts(self, p_mm, q_near):
        first = self._solutions(p_mm, q_near)
        if not first.valid.any():
            return [], first.reason
        order = [int(i) for i in np.argsort(np.linalg.norm(first.q - q_near, axis=1)) if first.in_limits[i]]
        if not order:
            return [], "no IK branch fits the joint ranges"
        return [(first.q[i].copy(), first.labels[i]) for i in order], ""

    def follow(self, p_mm, q_prev):
        sol = self._solutions(p_mm, q_prev)
        if sol.valid.any():
            d = np.linalg.norm(sol.q - q_prev, axis=1)
            d[~sol.valid] = np.inf
            i = int(np.argmin(d))
            if sol.in_limits[i] and d[i] < STEP_RAD:
                return sol.q[i].copy(), ""
        return None, sol.reason or ("the branch would leave the joint ranges" if sol.valid.any() else "unreachable")

    def exact(self, p_mm, q_near):
        sol = self._solutions(p_mm, q_near)
        d = np.linalg.norm(sol.q - q_near, axis=1)
        d[~sol.valid] = np.inf
        i = int(np.argmin(d))
        return sol.q[i].copy() if np.isfinite(d[i]) and d[i] <= NEAR_RAD else None


class PrioritisedPath(PathIK):
    """Any arm: prioritised LM on the joints between its base and its tool (the others held where
    they start), tasks in the workpiece's frame: position (1), axis (2), roll (3, held on an arm of
    six joints or more)."""

    def __init__(self, model, tool: np.ndarray, T_place: np.ndarray, orientation: str | None = None) -> None:
        mt = model.with_tool(tool).with_frames({"workpiece": (model.base_frame, T_place)})
        self.mt, self.T_place = mt, T_place
        J = mt.jacobian(mt.home)
        self.arm = np.flatnonzero(np.abs(J).sum(axis=0) > 1e-9)
        dof = len(self.arm)
        if orientation is None:
            orientation = "full" if dof >= 6 else "axis"
        if orientation not in ("full", "axis"):
            raise InputError(f"--orientation {orientation!r}: full (the tool's axis and roll held) or axis (roll free)")
        if orientation == "full" and dof < 6:
            raise InputError(f"{model.name}'s arm has {dof} joints between its base and its tool "
                             f"({', '.join(model.joint_names[i] for i in self.arm)}): it can hold the tool's position "
                             "and its axis normal to the workpiece, not its roll too; use --orientation axis (its "
                             "default)")
        if dof < 5:
            raise InputError(f"{model.name}'s arm has {dof} joints between its base and its tool: a contour needs five "
                             "or more (three for the point, two for the tool's axis)")
        self.full = orientation == "full"
        self.label = (f"prioritised IK on {dof} joints: position, then the tool's axis"
                      + (", then its roll" if self.full else "; roll free"))
        # the roll is a task on either arm, last: held at the start's on a full arm; on a 5-joint
        # arm aimed at where it stands (the seed's), so that the solution stays on the family of
        # rolls that reach the point with the axis held, where it was, instead of drifting along it
        tasks = [Task(mt.tool_frame, np.zeros(3), mask="x y z", priority=1, ref="workpiece"),
                 Task(mt.tool_frame, np.eye(4), mask="rx ry", priority=2, ref="workpiece"),
                 Task(mt.tool_frame, np.eye(4), mask="rz", priority=3, ref="workpiece")]
        self._held = [i for i in range(model.n) if i not in set(self.arm)]
        self.solver: LMSolver | None = None
        self._tasks = tasks
        self.model = model
        self._R_roll = R_INTO_FACE

    def _solver(self, q_near: np.ndarray) -> LMSolver:
        """The solver, its other joints (not on the tool's chain) held where the path starts."""
        if self.solver is None:
            names = self.model.joint_names
            self.solver = LMSolver(self.mt, self._tasks, max_iter=200, tol=1e-14,
                                   locked={names[i]: float(q_near[i]) for i in self._held})
        return self.solver

    def _target_rotation(self, q: np.ndarray) -> np.ndarray:
        """The tool's orientation to aim for (workpiece frame): z into the face; x the start's own
        roll where the roll is held, else the roll at q (so that only the axis is asked for)."""
        if self.full:
            return self._R_roll
        R = self.T_place[:3, :3].T @ self.mt.fk(q)[:3, :3]
        z = R_INTO_FACE[:, 2]
        x = R[:, 0] - (R[:, 0] @ z) * z
        n = np.linalg.norm(x)
        if n < 1e-6:   # the tool's x along the normal: any roll will do
            x = R_INTO_FACE[:, 0]
        else:
            x /= n
        return np.column_stack([x, np.cross(z, x), z])

    def _solve(self, p_mm: np.ndarray, q_seed: np.ndarray) -> tuple[np.ndarray, float, float, float]:
        """(q, position error m, axis error rad, roll error rad) of a solve from `q_seed`."""
        solver = self._solver(q_seed)
        T = np.eye(4)
        T[:3, :3] = self._target_rotation(q_seed)
        T[:3, 3] = p_mm * 1e-3
        solver.set_target(0, T[:3, 3].copy())
        solver.set_target(1, T)
        solver.set_target(2, T)
        q = solver.solve(q_seed).q
        return (q, *self._errors(q, p_mm, T[:3, :3]))

    def _errors(self, q: np.ndarray, p_mm: np.ndarray, R_target: np.ndarray) -> tuple[float, float, float]:
        T_base = self.mt.fk(q)
        Rw = self.T_place[:3, :3]
        p = Rw.T @ (T_base[:3, 3] - self.T_place[:3, 3])
        R = Rw.T @ T_base[:3, :3]
        pos = float(np.linalg.norm(p - p_mm * 1e-3))
        axis = math.acos(max(-1.0, min(1.0, float(R[:, 2] @ R_INTO_FACE[:, 2]))))
        roll = 0.0
        if self.full:
            roll = math.acos(max(-1.0, min(1.0, float(R[:, 0] @ R_target[:, 0]))))
        return pos, axis, roll

    def _why(self, pos: float, axis: float, roll: float) -> str:
        if pos > POSITION_TOL_M:
            return (f"the tool cannot reach the point (it stops {pos * 1e3:.2f} mm from it: out of the arm's reach, "
                    "or its joints' ranges)")
        if axis > AXIS_TOL_RAD:
            return (f"the tool's axis cannot be held normal to the workpiece there (it is {math.degrees(axis):.2f}° "
                    "off): the arm's dexterity ends there")
        return f"the tool's roll cannot be held there (it turns {math.degrees(roll):.2f}°)"

    def _ok(self, pos: float, axis: float, roll: float) -> bool:
        return pos <= POSITION_TOL_M and axis <= AXIS_TOL_RAD and roll <= AXIS_TOL_RAD

    def starts(self, p_mm, q_near):
        rng = np.random.default_rng(0)
        lo, hi = self.model.lower, self.model.upper
        seeds = [q_near] + [np.where(np.isin(np.arange(self.model.n), self.arm), rng.uniform(lo, hi), q_near)
                            for _ in range(40)]
        found, best = [], None
        for seed in seeds:
            q, pos, axis, roll = self._solve(p_mm, np.asarray(seed, float))
            if self._ok(pos, axis, roll):
                found.append(q)
            elif best is None or (pos, axis) < best[:2]:
                best = (pos, axis, roll)
            if len(found) >= 6:
                break
        if not found:
            return [], self._why(*best)
        found.sort(key=lambda q: float(np.linalg.norm(q - q_near)))
        return [(q, self.label) for q in found], ""

    def follow(self, p_mm, q_prev):
        q, pos, axis, roll = self._solve(p_mm, q_prev)
        if not self._ok(pos, axis, roll):
            return None, self._why(pos, axis, roll)
        jump = float(np.abs(q - q_prev).max())
        if jump >= STEP_RAD:
            return None, (f"the solution jumps {math.degrees(jump):.0f}° from the previous point's (the arm would "
                          "flip its configuration there)")
        return q, ""

    def exact(self, p_mm, q_near):
        q, pos, axis, roll = self._solve(p_mm, q_near)
        if not self._ok(pos, axis, roll) or float(np.abs(q - q_near).max()) > NEAR_RAD:
            return None
        return q
