"""A walk's joint angles, sample by sample: the prioritised LM IK (paper 002) rooted at the support
sole and switched when the support does (Sun et al. 2007), with the knee-stretched walk's support
knee held on a profile (Tanaka & Sugihara 2014)."""

from __future__ import annotations

import math

import numpy as np

from hil.kinematics.floating import inverse_transform, inverse_transforms
from hil.kinematics.ik import LMSolver, Task
from hil.motion import contacts
from hil.motion.contacts import HEEL, TOE
from hil.motion.gait import FEET, Gait, WalkParams, _yaw_poses, corner_pose, feet_roll
from hil.robots.legs import legs


def leg_joints(model) -> set[int]:
    """The joints of either leg (whatever they are named): below where the two legs part, as
    `hil.robots.legs` finds them. A joint both legs hang from (the Booster T1's waist, between its
    trunk and its hips) is the body's and keeps its pose: free to the walk's IK, it serves
    whichever foot's task is worst off and turns back and forth between samples."""
    return {j for leg in legs(model).values() for j in leg.joints}


def leg_can_yaw(model) -> bool:
    """True if some leg joint turns about an (almost) vertical axis at the home pose."""
    J = model.jacobian(model.home, "l_sole")
    return any(abs(J[5, i]) > 0.5 for i in leg_joints(model))


def with_contact_frames(model):
    """The model with a frame at each sole corner a foot on its toe or heel touches with (kept on
    the model: the walk solvers' tasks are set on these frames)."""
    out = model.meta.get("_walk_model")
    if out is None:
        hl, hw = model.sole_half
        out = model.meta["_walk_model"] = model.with_frames(
            {contacts.corner_frame(s, c): (f"{s}_sole", corner_pose(s, c, hl, hw)) for s in FEET for c in (TOE, HEEL)})
    return out


KNEE_SHORT_OF_STRAIGHT = math.radians(2.0)   # a stretched knee stops here: straight, the leg is singular


# how far short of straight the support knee dips at mid-stance: the first of these the step allows
STRETCH_DIPS = tuple(math.radians(d) for d in (2.5, 5.0, 10.0, 20.0))


STRETCH_RAMP = 0.45   # of the stance, for the support knee to reach its dip and to leave it (feet rolling)


def _walk_solver(model, p: WalkParams, root: str, kind: str, ahead: bool = False) -> LMSolver:
    """Prioritised LM rooted at a flat sole (the root's contact is exact by construction).
    Priority 1: the COM (in a stretched walk's single support without its height, which the
    support knee's profile sets), the body's attitude and the other foot: flat, its pose
    ("both"); on its toe or heel, the touching corner's position and the sole's pitch and roll
    (its heading is free: a 5-joint leg cannot set it too, and the corner is a point contact);
    in the air, the sole's position (a rolling walk: its heel corner's), pitch and roll."""
    other = "r" if root == "l_sole" else "l"
    stretch = p.knee_stretched and kind == "air"
    # a leg with a hip yaw sets the lifted foot's heading too: left free, it drifts in the swing and
    # jumps back when the foot lands
    heading = " rz" if leg_can_yaw(model) else ""
    tasks = [Task("com", np.zeros(3), mask="x y" if stretch else "position", priority=1, ref=root),
             Task(model.base_frame, np.eye(4), mask="orientation", priority=1, ref=root)]
    # ε per sample (Tanaka & Sugihara 2014, eqs. 2-3): when a foot becomes a contact, or its contact changes,
    # the error asked for in one step stays small: no jumps. A swinging foot follows its moving
    # target without it, and so does a double support solved ahead from a pose a step away.
    eps = 0.0005 if kind != "air" and not ahead else 0.0
    if kind == "both":
        frame, mask = f"{other}_sole", "pose"
    elif kind == "air":
        frame, mask = (f"{other}_heel_contact" if feet_roll(p) else f"{other}_sole"), "x y z rx ry" + heading
    else:
        frame, mask = contacts.corner_frame(other, TOE if kind == "toe" else HEEL), "x y z rx ry" + heading
    tasks.append(Task(frame, np.eye(4), mask=mask, priority=1, ref=root, max_error_step=eps))
    # everything but the legs (arms, head, a waist) keeps its pose: not needed, and the arms' tiny
    # COM Jacobian columns would otherwise be used as nearly singular directions
    legs = leg_joints(model)
    locked = {n: float(model.home[i]) for i, n in enumerate(model.joint_names) if i not in legs}
    return LMSolver(model, tasks, max_iter=200, tol=1e-9, locked=locked)


class KneeStretch:
    """The knees of a knee-stretched walk, sample by sample: in single support the support knee is
    held on a profile that leaves where the double support put it, dips to a few degrees short of
    straight through mid-stance and arrives where the next double support will want it (found by
    solving that double support ahead), with matching speeds at both ends; the swing knee stays
    clear of straight."""

    def __init__(self, model, p: WalkParams, gait: Gait, dip: float) -> None:
        self.model, self.p, self.gait, self.dip = model, p, gait, dip
        self.joint = {side: leg.knee for side, leg in legs(model).items()}
        self.profile: dict[int, float] = {}
        self.ahead: dict[tuple[str, str], LMSolver] = {}

    def bounds(self, k: int, Q: np.ndarray, root: str) -> dict[int, tuple[float, float]]:
        m = self.model
        out = {j: (m.lower[j] + KNEE_SHORT_OF_STRAIGHT, m.upper[j]) for j in self.joint.values()}
        if not self.gait.single[k]:
            return out
        if k not in self.profile:
            self._plan_stance(k, Q, root)
        j = self.joint[root[0]]
        out[j] = (self.profile[k], self.profile[k])
        return out

    def _plan_stance(self, k0: int, Q: np.ndarray, root: str) -> None:
        single, dt = self.gait.single, self.gait.dt
        k1 = k0
        while k1 < len(single) and single[k1]:
            k1 += 1
        j = self.joint[root[0]]
        a = max(k0 - 1, 0)
        th_s = Q[a, j]
        v_s = (Q[a, j] - Q[a - 1, j]) / dt if a >= 1 else 0.0
        if k1 + 1 < len(single) and not single[k1]:
            q1 = self._double_support_at(k1, Q[a], root)
            q2 = self._double_support_at(k1 + 1, q1, root)
            th_e, v_e = q1[j], (q2[j] - q1[j]) / dt
        else:
            th_e, v_e = th_s, 0.0
        floor = self.model.lower[j] + self.dip
        n = k1 - a
        u = np.arange(1, n + 1) / n
        T = n * dt
        h00, h10 = 1 - 10 * u**3 + 15 * u**4 - 6 * u**5, u - 6 * u**3 + 8 * u**4 - 3 * u**5
        h01, h11 = 10 * u**3 - 15 * u**4 + 6 * u**5, -4 * u**3 + 7 * u**4 - 3 * u**5
        H = h00 * th_s + h10 * v_s * T + h01 * th_e + h11 * v_e * T   # quintic, zero accelerations at the ends
        if self.gait.rolls:   # 1 through the middle tenth of the stance, down to 0 smoothly at both ends
            bump = np.minimum(_smooth(u / STRETCH_RAMP), _smooth((1 - u) / STRETCH_RAMP))
        else:                 # 1 at mid-stance only: held longer, the swing knee of a flat-footed walk
            bump = (16 * u * u * (1 - u) ** 2) ** 2   # (its outcome) bends sharply and the walk slows down
        inner = bump > 0.05
        A = max(0.0, float(np.min((H[inner] - floor) / bump[inner]))) if inner.any() else 0.0
        for i, kk in enumerate(range(a + 1, k1 + 1)):
            if kk < len(single) and single[kk]:
                self.profile[kk] = float(max(H[i] - A * bump[i], self.model.lower[j] + KNEE_SHORT_OF_STRAIGHT))

    def _double_support_at(self, k: int, q_start: np.ndarray, root: str) -> np.ndarray:
        kind = self.gait.task_kind(k)
        if (root, kind) not in self.ahead:
            self.ahead[root, kind] = _walk_solver(self.model, self.p, root, kind, ahead=True)
        s = self.ahead[root, kind]
        for j in self.joint.values():
            s.lower[j] = self.model.lower[j] + KNEE_SHORT_OF_STRAIGHT
        _set_targets(s, self.gait, k, root)
        return s.solve(np.clip(q_start, s.lower, s.upper), max_iter=400).q


def _smooth(x: np.ndarray) -> np.ndarray:
    """0 → 1 as x goes 0 → 1 (quintic: zero speed and acceleration at both ends), flat outside."""
    x = np.clip(x, 0.0, 1.0)
    return x ** 3 * (10 - 15 * x + 6 * x * x)


def _set_targets(s: LMSolver, gait: Gait, k: int, root: str) -> None:
    W_root = gait.sole[k, FEET.index(root[0])]
    inv_root = inverse_transform(W_root)
    s.set_target(0, (inv_root @ np.append(gait.com[k], 1.0))[:3])
    s.set_target(1, inv_root @ _body_attitudes(gait.yaw[k:k + 1])[0])
    s.set_target(2, inv_root @ gait.task_pose(k))


def _root_targets(gait: Gait) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For every sample at once, what `_set_targets` computes sample by sample but the other
    foot's task (which a rolling walk's lift-off changes as it goes): the root sole's inverse, and
    the COM and the body's attitude in the root sole's frame."""
    N = len(gait.t)
    inv_root = inverse_transforms(gait.sole[np.arange(N), gait.root])
    com = np.matmul(inv_root[:, :3, :3], gait.com[:, :, None])[..., 0] + inv_root[:, :3, 3]
    return inv_root, com, np.matmul(inv_root, _body_attitudes(gait.yaw))


def solve_samples(model, p: WalkParams, gait: Gait, knees: KneeStretch | None, progress=None):
    """The joint angles, sample by sample, continuing from the previous sample, rooted at the
    sole `gait.root` names (Sun et al. 2007: the root changes when the support does); (Q, worst
    priority-1 residual)."""
    solvers: dict = {}
    q = gait.q0.copy()
    N = len(gait.t)
    inv_root, com_target, attitude_target = _root_targets(gait)
    Q = np.zeros((N, model.n))
    worst = 0.0
    tick = max(N // 10, 1)
    for k in range(N):
        if progress is not None and k % tick == 0:
            progress(k / N)
        root = f"{FEET[gait.root[k]]}_sole"
        kind = gait.task_kind(k)
        if (root, kind) not in solvers:
            solvers[root, kind] = _walk_solver(model, p, root, kind)
        s = solvers[root, kind]
        if knees is not None:
            for j, (lo, hi) in knees.bounds(k, Q, root).items():
                s.lower[j], s.upper[j] = lo, hi
        if gait.lifts_off(k):   # the swing starts where the heel corner is, as it moves
            heel = [_world_point(model, gait, Q, kk, root, f"{FEET[1 - gait.root[k]]}_heel_contact")
                    for kk in (k - 1, k - 2)]
            gait.begin_swing(k, *heel)
        s.set_target(0, com_target[k])
        s.set_target(1, attitude_target[k])
        s.set_target(2, inv_root[k] @ gait.task_pose(k))
        res = s.solve(np.clip(q, s.lower, s.upper))
        q = res.q
        Q[k] = q
        worst = max(worst, res.residuals[0])
    return Q, worst


def _world_point(model, gait: Gait, Q: np.ndarray, k: int, root: str, frame: str) -> np.ndarray:
    """World position of `frame` at solved sample k, through the root sole's planned pose."""
    F = model.fk_frames(Q[k])
    body = gait.sole[k, FEET.index(root[0])] @ inverse_transform(F[model.frame_index(root)])
    return (body @ F[model.frame_index(frame)])[:3, 3]


def _body_attitudes(yaws: np.ndarray) -> np.ndarray:
    """The body upright, turned to the mean heading of the two feet, for each row of yaws (N, 2):
    (N, 4, 4)."""
    return _yaw_poses(np.arctan2(np.sin(yaws[:, 0]) + np.sin(yaws[:, 1]), np.cos(yaws[:, 0]) + np.cos(yaws[:, 1])))
