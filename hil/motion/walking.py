"""Walking pattern generator for the humanoid: footsteps, ZMP reference, COM by preview control of
the cart-table model, swing feet with toe-off and heel-strike, and joint angles from the
prioritised LM IK with support-foot root switching (papers 000 and 002).

World frame: z up, the ground at z = 0; the robot starts standing at its home pose with the left
sole under its home position. Units: metres, radians, seconds.

The resulting motion is checked from the joint angles it produces, not from the plan: feet and
centre of mass come from forward kinematics through the floating base (rooted at the support
sole, switched when support changes), the ZMP from the COM's finite-difference acceleration with
the cart-table relation, and the support polygon from the soles actually on the ground.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from hil.errors import InputError, UnreachableError
from hil.kinematics.floating import FloatingBase, inverse_transform
from hil.kinematics.ik import LMSolver, Task
from hil.motion.limits import check_limits
from hil.safety import SafetyChecker

G = 9.81


@dataclass
class WalkParams:
    steps: int = 6
    stride: float = 0.03          # forward advance per step (m)
    width: float | None = None    # distance between the sole centres (m); default: as at home
    side: float = 0.0             # sideways advance per step (m), + to the left
    turn_deg: float = 0.0         # yaw per step (degrees)
    period: float = 0.8           # time per step (s)
    double_support: float = 0.25  # fraction of the period with both feet down
    lift: float = 0.012           # swing foot clearance (m)
    toe_heel_deg: float = 8.0     # toe-off and heel-strike pitch of the swing sole (degrees)
    knee_stretched: bool = False  # leave COM height free and stretch the support knee
    rate_hz: float = 200.0
    settle: float = 0.8           # time before the first and after the last step (s)
    zmp_heel_toe: float = 0.01    # ZMP travel along the support sole in single support (m)
    crouch: float = 0.008         # COM lowered by this much while walking (m): the short thighs give
                                  # the bent-knee stance little height to spare for sideways shifts
    zmp_inset: float = 0.0        # single-support ZMP moved this far from the sole centre towards
                                  # the inner edge (m): a smaller support region, less sway


@dataclass
class WalkResult:
    t: np.ndarray
    q: np.ndarray
    support: np.ndarray           # 0 both, 1 left, 2 right (planned)
    com_w: np.ndarray             # COM in the world, from FK of q
    zmp_w: np.ndarray             # ZMP computed back from com_w
    zmp_ref: np.ndarray
    feet_w: np.ndarray            # (N, 2, 4, 4) world poses of l_sole, r_sole from FK of q
    margin: np.ndarray            # ZMP distance inside the support polygon (m), per sample
    slide: float                  # largest drift of a foot while it is on the ground (m)
    min_foot_z: float             # lowest sole corner (m)
    max_speed_ratio: float
    knee_mid_stance_deg: float    # support knee's distance from straight at mid-stance (deg), worst step
    leg_short_mm: float           # support leg (hip pitch to ankle pitch axis) short of full extension
    ik_worst: float
    report: list[str] = field(default_factory=list)
    com_ref: np.ndarray | None = None
    contact_error: float = 0.0    # largest height (or depth) of a sole corner while the plan has it down (m)

    def save(self, path: str) -> None:
        np.savez(path, t=self.t, q=self.q, support=self.support, com_w=self.com_w, zmp_w=self.zmp_w,
                 zmp_ref=self.zmp_ref, dynamic_balance_checked=np.array(True))

    def summary(self) -> str:
        knee = "" if math.isnan(self.knee_mid_stance_deg) else (
            f", support knee at mid-stance {self.knee_mid_stance_deg:.1f}° from straight "
            f"(leg {self.leg_short_mm:.1f} mm short of full extension)")
        return (f"plan: {self.report[0]}, {self.t[-1]:.1f} s, ZMP margin ≥ {1e3 * self.margin.min():.1f} mm, "
                f"feet slide ≤ {1e3 * self.slide:.2f} mm, peak joint speed {100 * self.max_speed_ratio:.0f}% "
                f"of the limits" + knee)


def _yaw_T(x: float, y: float, yaw: float, z: float = 0.0) -> np.ndarray:
    T = np.eye(4)
    c, s = math.cos(yaw), math.sin(yaw)
    T[:2, :2] = [[c, -s], [s, c]]
    T[:3, 3] = [x, y, z]
    return T


def preview_gains(dt: float, zc: float, horizon: int, q_e: float = 1.0, r: float = 1e-6):
    """Kajita's preview controller for the cart-table model (jerk input): (Gi, Gx, Gd)."""
    A = np.array([[1, dt, dt * dt / 2], [0, 1, dt], [0, 0, 1.0]])
    B = np.array([[dt ** 3 / 6], [dt * dt / 2], [dt]])
    C = np.array([[1, 0, -zc / G]])
    At = np.zeros((4, 4))
    At[0, 0] = 1
    At[0, 1:] = (C @ A)[0]
    At[1:, 1:] = A
    Bt = np.vstack([C @ B, B])
    Qt = np.zeros((4, 4))
    Qt[0, 0] = q_e
    P = Qt.copy()
    for _ in range(5000):  # discrete Riccati equation by iteration
        S = r + (Bt.T @ P @ Bt)[0, 0]
        Pn = Qt + At.T @ P @ At - (At.T @ P @ Bt) @ (Bt.T @ P @ At) / S
        if np.abs(Pn - P).max() < 1e-12 * max(1.0, np.abs(P).max()):
            P = Pn
            break
        P = Pn
    S = r + (Bt.T @ P @ Bt)[0, 0]
    K = (Bt.T @ P @ At) / S
    Gi, Gx = K[0, 0], K[0, 1:]
    Ac = At - Bt @ K
    It = np.array([[1.0], [0], [0], [0]])
    X = -Ac.T @ P @ It
    Gd = np.zeros(horizon)
    Gd[0] = -Gi
    for j in range(1, horizon):
        Gd[j] = ((Bt.T @ X) / S)[0, 0]
        X = Ac.T @ X
    return A, B, C, Gi, Gx, Gd


def preview_com(zmp_ref: np.ndarray, dt: float, zc: float, c0: np.ndarray, preview_s: float = 1.6) -> np.ndarray:
    """COM xy (N, 2) whose cart-table ZMP tracks zmp_ref (N, 2), by preview control."""
    N = len(zmp_ref)
    H = int(preview_s / dt)
    A, B, C, Gi, Gx, Gd = preview_gains(dt, zc, H)
    ref = np.vstack([zmp_ref, np.repeat(zmp_ref[-1:], H, axis=0)])
    out = np.zeros((N, 2))
    for d in range(2):
        x = np.array([c0[d], 0.0, 0.0])
        e_sum = 0.0
        for k in range(N):
            p = (C @ x)[0]
            e_sum += p - ref[k, d]
            u = -Gi * e_sum - Gx @ x - Gd @ ref[k + 1:k + 1 + H, d]
            out[k, d] = x[0]
            x = A @ x + B[:, 0] * u
    return out


def _hull_margin(pts: np.ndarray, p: np.ndarray) -> float:
    """Signed distance of p inside the convex hull of pts (2D): + inside."""
    c = pts.mean(axis=0)
    order = np.argsort(np.arctan2(pts[:, 1] - c[1], pts[:, 0] - c[0]))
    P = pts[order]
    # monotone chain for robustness
    P = P[np.lexsort((P[:, 1], P[:, 0]))]

    def cross(o, a, b):
        return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])
    lower, upper = [], []
    for pt in P:
        while len(lower) >= 2 and cross(lower[-2], lower[-1], pt) <= 0:
            lower.pop()
        lower.append(pt)
    for pt in P[::-1]:
        while len(upper) >= 2 and cross(upper[-2], upper[-1], pt) <= 0:
            upper.pop()
        upper.append(pt)
    hull = lower[:-1] + upper[:-1]
    m = math.inf
    for a, b in zip(hull, hull[1:] + hull[:1]):
        e = b - a
        L = math.hypot(*e)
        if L > 1e-12:
            m = min(m, (e[0] * (p[1] - a[1]) - e[1] * (p[0] - a[0])) / L)
    return m


def generate(model, params: WalkParams, progress=None) -> WalkResult:
    """Plan a walk and check it from the joint motion it produces; UnreachableError if it fails.
    `progress(fraction)` (0…1), when given, is told how far the joint solution has come.

    knee_stretched: walk with the centre of mass as high as the legs reach (paper 002): its height
    is left free at first (the legs stretch until their knees stop a few degrees short of
    straight), then smoothed from below and followed; the support knee is then close to straight
    through mid-stance and the COM rises and falls with the legs.
    """
    return _generate(model, params, progress)


CONTACT_TOLERANCE = 1e-6   # a sole the plan has down may lie this far off the ground (m)
SLIDE_TOLERANCE = 1e-6     # and move this far while it is down (m)


def plan(model, params: WalkParams, progress=None, say=print) -> WalkResult:
    """A walk the robot can follow, or UnreachableError naming the first sample that fails.

    Planned (`generate`), then planned again with a longer step period while the joints' speed or
    acceleration limits are exceeded, then checked sample by sample as the loop checks: the ZMP
    inside what touches the ground, feet down lying flat and not sliding, and the loop's own
    checks (limits, floor, self-collision) on every pose. `say` hears each replanning."""
    res = generate(model, params, progress)
    for _ in range(3):   # slower until the joints' speed and acceleration limits hold
        report = check_limits(model, res.t, res.q)
        if report.time_scale <= 1.0:
            break
        params = replace(params, period=params.period * report.time_scale * 1.02)
        say(f"walk: {report.worst}: planned again with a {params.period:.2f} s step period")
        res = generate(model, params, progress)
    else:
        report = check_limits(model, res.t, res.q)
        if report.time_scale > 1.0:
            raise UnreachableError(f"walk: refused: the joints cannot follow it ({report.worst}); try a shorter "
                                   "stride or a longer --period")
    refuse_unsafe(model, res)
    return res


def refuse_unsafe(model, res: WalkResult) -> None:
    """UnreachableError at the first sample of a planned walk that fails a check (see `plan`)."""
    k = int(np.argmin(np.nan_to_num(res.margin, nan=-np.inf)))
    if not res.margin[k] > 0:
        raise UnreachableError(f"walk: refused: the planned ZMP leaves {model.name}'s support polygon "
                               f"({1e3 * res.margin[k]:.1f} mm) at t = {res.t[k]:.3f} s; try a shorter stride, "
                               "a longer --period, or a home pose the robot walks from (docs/robots.md)")
    if res.contact_error > CONTACT_TOLERANCE or res.slide > SLIDE_TOLERANCE:
        raise UnreachableError(f"walk: refused: a foot on the ground is {1e3 * res.contact_error:.3f} mm off it "
                               f"or slides {1e3 * res.slide:.3f} mm; try a shorter stride or a longer --period")
    checker = SafetyChecker(model, balance=False)   # balance is the ZMP's, checked above
    bad, flags = checker.check_path(res.q)
    if bad >= 0:
        raise UnreachableError(f"walk: refused: at t = {res.t[bad]:.3f} s (sample {bad}): "
                               + "; ".join(checker.explain(int(flags[bad]), res.q[bad]))
                               + "; try a wider --width, a shorter stride or a smaller --side")


def _leg_can_yaw(model) -> bool:
    """True if some leg joint turns about an (almost) vertical axis at the home pose."""
    J = model.jacobian(model.home, "l_sole")
    legs = [i for i, n in enumerate(model.joint_names) if n.startswith("l_") and ("hip" in n or "knee" in n
                                                                                  or "ankle" in n)]
    return any(abs(J[5, i]) > 0.5 for i in legs)


def _generate(model, params: WalkParams, progress=None) -> WalkResult:
    p = params
    if p.turn_deg and not _leg_can_yaw(model):
        raise InputError(f"walk: {model.name}'s legs have no hip-yaw joint (hip roll, hip pitch, knee, ankle pitch, "
                         "ankle roll), so a foot cannot turn relative to the other while both are down: turning "
                         "needs --turn 0 (the paper's 5-joint legs); walk sideways with --side instead")
    if p.steps < 1 or p.period <= 0.2 or not 0.05 <= p.double_support <= 0.6 or p.rate_hz < 50:
        raise InputError("walk: steps ≥ 1, period > 0.2 s, double_support in [0.05, 0.6], rate ≥ 50 Hz")
    dt = 1.0 / p.rate_hz
    q0 = model.home.copy()
    base = FloatingBase(model, "l_sole", q0)
    W_l = base.frame_pose(q0, "l_sole")
    W_r = base.frame_pose(q0, "r_sole")
    width = p.width if p.width is not None else float(np.linalg.norm(W_l[:3, 3] - W_r[:3, 3]))
    com0 = base.com(q0)
    zc = float(com0[2])
    hl, hw = model.sole_half

    # footsteps: (side, world pose). Forward, the right foot swings first; sideways, the foot on the
    # side of travel does and leads by one step (the stance opens, then the other foot closes it):
    # a foot that stepped toward the other by the step's travel would land on it
    mid = (W_l[:3, 3] + W_r[:3, 3]) / 2
    yaw = 0.0
    cx, cy = mid[0], mid[1]
    steps = []
    side = "l" if p.side > 0 else "r"
    for k in range(p.steps):
        yaw += math.radians(p.turn_deg)
        last = k == p.steps - 1
        adv = p.stride if not (k == 0 or last) else p.stride / 2
        cx += adv * math.cos(yaw) - p.side * math.sin(yaw)
        cy += adv * math.sin(yaw) + p.side * math.cos(yaw)
        leads = p.side != 0 and (side == "l") == (p.side > 0)
        off = (width / 2 if side == "l" else -width / 2) + (p.side if leads else 0.0)
        T = _yaw_T(cx - off * math.sin(yaw), cy + off * math.cos(yaw), yaw)
        steps.append((side, T))
        side = "l" if side == "r" else "r"
    if p.steps % 2 == 1:  # bring the feet together at the end
        off = width / 2 if side == "l" else -width / 2
        steps.append((side, _yaw_T(cx - off * math.sin(yaw), cy + off * math.cos(yaw), yaw)))

    # timeline
    T_ds = p.period * p.double_support
    T_ss = p.period - T_ds
    phases = [("both", None, p.settle)]
    for i_step, (s_side, T) in enumerate(steps):
        phases.append(("single", (s_side, T), T_ss))
        phases.append(("both", None, T_ds if i_step < len(steps) - 1 else p.settle))
    times = np.cumsum([0.0] + [ph[2] for ph in phases])
    t = np.arange(0.0, times[-1], dt)
    N = len(t)

    # ZMP reference and per-sample support/foot targets
    def sole_point(T, dx, foot=None):
        dy = 0.0 if foot is None else (-p.zmp_inset if foot == "l" else p.zmp_inset)
        return (T @ [dx, dy, 0, 1])[:2]

    zmp_ref = np.zeros((N, 2))
    support = np.zeros(N, dtype=np.int64)
    foot_T = {"l": np.zeros((N, 4, 4)), "r": np.zeros((N, 4, 4))}
    zmp_prev = (W_l[:2, 3] + W_r[:2, 3]) / 2
    ph_of = np.clip(np.searchsorted(times, t, side="right") - 1, 0, len(phases) - 1)
    # ZMP at the end of each phase: on the stance sole's heel at the start of single support, its
    # toe at the end; between the feet at the very end
    cur = {"l": W_l.copy(), "r": W_r.copy()}
    zmp_at_end = []
    for i, (kind, info, dur) in enumerate(phases):
        if kind == "single":
            sw, T_new = info
            st = "l" if sw == "r" else "r"
            zmp_at_end.append(sole_point(cur[st], p.zmp_heel_toe, st))
            cur[sw] = T_new
        else:
            nxt = next((ph for ph in phases[i + 1:] if ph[0] == "single"), None)
            if nxt is None:
                zmp_at_end.append((cur["l"][:2, 3] + cur["r"][:2, 3]) / 2)
            else:
                sw = nxt[1][0]
                st = "l" if sw == "r" else "r"
                zmp_at_end.append(sole_point(cur[st], -p.zmp_heel_toe, st))
    cur = {"l": W_l.copy(), "r": W_r.copy()}
    start_of_phase = {}
    for i, (kind, info, dur) in enumerate(phases):
        start_of_phase[i] = {"l": cur["l"].copy(), "r": cur["r"].copy()}
        if kind == "single":
            cur[info[0]] = info[1]
    for k in range(N):
        i = ph_of[k]
        kind, info, dur = phases[i]
        u = min(1.0, max(0.0, (t[k] - times[i]) / dur))
        feet_now = start_of_phase[i]
        z_start = zmp_at_end[i - 1] if i > 0 else zmp_prev
        if kind == "both":
            support[k] = 0
            s = u * u * (3 - 2 * u)
            zmp_ref[k] = z_start + s * (zmp_at_end[i] - z_start)
            foot_T["l"][k] = feet_now["l"]
            foot_T["r"][k] = feet_now["r"]
        else:
            sw, T_new = info
            st = "l" if sw == "r" else "r"
            support[k] = 1 if st == "l" else 2
            Ts = feet_now[st]
            zmp_ref[k] = sole_point(Ts, -p.zmp_heel_toe + 2 * p.zmp_heel_toe * u, st)
            foot_T[st][k] = Ts
            foot_T[sw][k] = _swing(feet_now[sw], T_new, u, p.lift, math.radians(p.toe_heel_deg), hl)

    com_xy = preview_com(zmp_ref, dt, zc - p.crouch, com0[:2])
    # COM height: down to the walking height during the first settle, back up during the last
    ramp_in = np.clip(t / p.settle, 0, 1)
    ramp_out = np.clip((times[-1] - t) / p.settle, 0, 1)
    blend = np.minimum(ramp_in, ramp_out)
    blend = blend * blend * (3 - 2 * blend)
    z_walk = zc - p.crouch * blend
    plan = _Targets(t, support, foot_T, com_xy, z_walk, q0)
    # knee-stretched (paper 002): the COM height is not asked for; in single support the one
    # freedom left, the support knee, follows a smooth profile down to a few degrees short of
    # straight at mid-stance (in double support the feet, COM and attitude fix it)
    if not p.knee_stretched:
        Q, worst = _solve_samples(model, p, plan, None, progress)
    else:   # as straight as this step allows: a longer or wider step leaves the swing foot out of reach
        for dip in STRETCH_DIPS:
            Q, worst = _solve_samples(model, p, plan, _KneeStretch(model, p, plan, dip), progress)
            if worst <= 1e-4:
                break
    if worst > 1e-4:
        step = (f"stride (now {p.stride * 100:.1f} cm)" if p.stride or not p.side
                else f"side step (now {p.side * 100:.1f} cm)")
        stretched = ", or walk without --knee-stretched (its knees cannot stretch on this step)" if p.knee_stretched else ""
        raise UnreachableError(f"walk: the IK cannot keep contact and balance (residual {worst:.3g}); use a shorter "
                               f"{step} or a longer period{stretched}")
    res = check_walk(model, t, Q, support, zmp_ref, p, hl, hw, worst, _label(p))
    res.com_ref = np.column_stack([com_xy, plan.z])
    return res


KNEE_SHORT_OF_STRAIGHT = math.radians(2.0)   # a stretched knee stops here: straight, the leg is singular
# how far short of straight the support knee dips at mid-stance: the first of these the step allows
STRETCH_DIPS = tuple(math.radians(d) for d in (2.5, 5.0, 10.0, 20.0))


@dataclass
class _Targets:
    """What the joint solution follows, per sample: support, both soles' world poses, the COM."""
    t: np.ndarray
    support: np.ndarray
    foot_T: dict
    xy: np.ndarray
    z: np.ndarray
    q0: np.ndarray


def _walk_solver(model, p: WalkParams, root: str, mode: str, ahead: bool = False) -> LMSolver:
    """Prioritised LM rooted at the stance sole (the support contact is exact by construction).
    Priority 1: the COM (in a stretched walk's single support without its height, which the
    support knee's profile sets), the body's attitude and the other foot (in contact or swinging)."""
    other = "r_sole" if root == "l_sole" else "l_sole"
    stretch = p.knee_stretched and mode == "single"
    tasks = [Task("com", np.zeros(3), mask="x y" if stretch else "position", priority=1, ref=root),
             Task(model.base_frame, np.eye(4), mask="orientation", priority=1, ref=root)]
    # ε per sample (paper 002, eqs. 2-3): when the swing foot becomes a contact the error asked
    # for in one step stays small: no jumps. A swinging foot follows its moving target without it,
    # and so does a double support solved ahead from a pose a step away.
    eps = 0.0005 if mode == "both" and not ahead else 0.0
    # with 5-joint legs, COM (3), attitude (2) and the other foot (5) use all ten leg joints, so
    # the other foot shares priority 1; a 5-joint leg cannot set the yaw of a pitched swing foot
    # independently: in the air the foot is constrained in position, roll and pitch only
    mask = "pose" if mode == "both" else "x y z rx ry"
    tasks.append(Task(other, np.eye(4), mask=mask, priority=1, ref=root, max_error_step=eps))
    # arms and head keep their pose: they are not needed, and their tiny COM Jacobian columns
    # would otherwise be used as nearly singular directions
    q0 = model.home
    locked = {n: float(q0[model.joint_index(n)]) for n in model.joint_names
              if "shoulder" in n or "elbow" in n or n == "head_yaw"}
    return LMSolver(model, tasks, max_iter=200, tol=1e-9, locked=locked)


class _KneeStretch:
    """The knees of a knee-stretched walk, sample by sample: in single support the support knee is
    held on a profile that leaves where the double support put it, dips to a few degrees short of
    straight at mid-stance and arrives where the next double support will want it (found by
    solving that double support ahead), with matching speeds at both ends; the swing knee stays
    clear of straight."""

    def __init__(self, model, p: WalkParams, plan: _Targets, dip: float) -> None:
        self.model, self.p, self.plan, self.dip = model, p, plan, dip
        self.joint = {side: model.joint_index(f"{side}_knee") for side in "lr"}
        self.profile: dict[int, float] = {}
        self.ahead: dict[str, LMSolver] = {}

    def bounds(self, k: int, Q: np.ndarray, root: str) -> dict[int, tuple[float, float]]:
        m, sup = self.model, self.plan.support
        out = {}
        for side, j in self.joint.items():
            out[j] = (m.lower[j] + KNEE_SHORT_OF_STRAIGHT, m.upper[j])
        if sup[k] == 0:
            return out
        if k not in self.profile:
            self._plan_stance(k, Q, root)
        j = self.joint[root[0]]
        out[j] = (self.profile[k], self.profile[k])
        return out

    def _plan_stance(self, k0: int, Q: np.ndarray, root: str) -> None:
        sup, dt = self.plan.support, self.plan.t[1] - self.plan.t[0]
        k1 = k0
        while k1 < len(sup) and sup[k1] == sup[k0]:
            k1 += 1
        j = self.joint[root[0]]
        a = max(k0 - 1, 0)
        th_s = Q[a, j]
        v_s = (Q[a, j] - Q[a - 1, j]) / dt if a >= 1 else 0.0
        if k1 + 1 < len(sup) and sup[k1] == 0:
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
        bump = (16 * u * u * (1 - u) ** 2) ** 2                     # 1 at mid-stance, flat at both ends
        inner = bump > 0.05
        A = max(0.0, float(np.min((H[inner] - floor) / bump[inner]))) if inner.any() else 0.0
        for i, kk in enumerate(range(a + 1, k1 + 1)):
            if kk < len(sup) and sup[kk] == sup[k0]:
                self.profile[kk] = float(max(H[i] - A * bump[i], self.model.lower[j] + KNEE_SHORT_OF_STRAIGHT))

    def _double_support_at(self, k: int, q_start: np.ndarray, root: str) -> np.ndarray:
        if root not in self.ahead:
            self.ahead[root] = _walk_solver(self.model, self.p, root, "both", ahead=True)
        s = self.ahead[root]
        for j in self.joint.values():
            s.lower[j] = self.model.lower[j] + KNEE_SHORT_OF_STRAIGHT
        _set_targets(s, self.plan, k, root)
        return s.solve(np.clip(q_start, s.lower, s.upper), max_iter=400).q


def _set_targets(s: LMSolver, plan: _Targets, k: int, root: str) -> None:
    W_root = plan.foot_T["l" if root == "l_sole" else "r"][k]
    inv_root = inverse_transform(W_root)
    com_t = np.array([plan.xy[k, 0], plan.xy[k, 1], plan.z[k]])
    s.set_target(0, (inv_root @ np.append(com_t, 1.0))[:3])
    s.set_target(1, inv_root @ _body_attitude(plan.foot_T, k))
    s.set_target(2, inv_root @ plan.foot_T["r" if root == "l_sole" else "l"][k])


def _solve_samples(model, p: WalkParams, plan: _Targets, knees: _KneeStretch | None, progress=None):
    """The joint angles, sample by sample, continuing from the previous sample (the root changes
    when the support does, paper 000); (Q, worst priority-1 residual)."""
    solvers: dict = {}
    q = plan.q0.copy()
    N = len(plan.t)
    Q = np.zeros((N, model.n))
    worst = 0.0
    root = "l_sole"
    tick = max(N // 10, 1)
    for k in range(N):
        if progress is not None and k % tick == 0:
            progress(k / N)
        sup = plan.support[k]
        if sup == 1:
            root = "l_sole"
        elif sup == 2:
            root = "r_sole"
        # in double support keep the last root (paper 000: the root changes when support changes)
        mode = "both" if sup == 0 else "single"
        key = (root, mode)
        if key not in solvers:
            solvers[key] = _walk_solver(model, p, root, mode)
        s = solvers[key]
        if knees is not None:
            for j, (lo, hi) in knees.bounds(k, Q, root).items():
                s.lower[j], s.upper[j] = lo, hi
        _set_targets(s, plan, k, root)
        res = s.solve(np.clip(q, s.lower, s.upper))
        q = res.q
        Q[k] = q
        worst = max(worst, res.residuals[0])
    return Q, worst


def _body_attitude(foot_T: dict, k: int) -> np.ndarray:
    """The body upright, turned to the mean heading of the two feet."""
    yaw_l = math.atan2(foot_T["l"][k][1, 0], foot_T["l"][k][0, 0])
    yaw_r = math.atan2(foot_T["r"][k][1, 0], foot_T["r"][k][0, 0])
    R = np.eye(4)
    R[:3, :3] = _yaw_T(0, 0, math.atan2(math.sin(yaw_l) + math.sin(yaw_r), math.cos(yaw_l) + math.cos(yaw_r)))[:3, :3]
    return R


def _label(p: WalkParams) -> str:
    moves = [f"{100 * p.stride:.1f} cm forward"] if p.stride or not (p.side or p.turn_deg) else []
    if p.side:
        moves.append(f"{100 * p.side:.1f} cm to the {'left' if p.side > 0 else 'right'}")
    if p.turn_deg:
        moves.append(f"turning {p.turn_deg:.0f}°")
    return f"{p.steps} steps of {', '.join(moves)}"


def _swing(T0: np.ndarray, T1: np.ndarray, u: float, lift: float, pitch: float, hl: float) -> np.ndarray:
    """Swing sole pose at phase u ∈ [0, 1]: smooth in x/y/yaw, lifted, toe-off then heel-strike."""
    s = u * u * u * (10 - 15 * u + 6 * u * u)  # quintic: zero speed and acceleration at both ends
    p = T0[:3, 3] + s * (T1[:3, 3] - T0[:3, 3])
    y0 = math.atan2(T0[1, 0], T0[0, 0])
    y1 = math.atan2(T1[1, 0], T1[0, 0])
    dy = (y1 - y0 + math.pi) % (2 * math.pi) - math.pi
    yaw = y0 + s * dy
    z = lift * math.sin(math.pi * u) ** 2
    # toe-off (heel up, rotate about the toe) early, heel-strike (toe up) late; zero at both ends
    theta = pitch * math.sin(2 * math.pi * u) * math.sin(math.pi * u)
    T = _yaw_T(p[0], p[1], yaw)
    c, sn = math.cos(theta), math.sin(theta)
    # pitched about the sole centre; the lift (≥ half a foot length × sin θ) keeps the toe and heel
    # above the ground, and the pose stays smooth through θ = 0
    T = T @ np.array([[c, 0, sn, 0], [0, 1, 0, 0], [-sn, 0, c, 0], [0, 0, 0, 1.0]])
    T[2, 3] += z
    return T


def check_walk(model, t, Q, support, zmp_ref, p: WalkParams, hl, hw, worst, label) -> WalkResult:
    """The checks, from the joint angles alone (FK through the root-switching floating base)."""
    N = len(t)
    dt = t[1] - t[0]
    base = FloatingBase(model, "l_sole", Q[0])
    feet = np.zeros((N, 2, 4, 4))
    com = np.zeros((N, 3))
    li, ri = model.frame_index("l_sole"), model.frame_index("r_sole")
    for k in range(N):
        want = {1: "l_sole", 2: "r_sole"}.get(int(support[k]))
        if want and want != base.support:
            # the new support sole's world pose is where it stood at the last sample both feet
            # were down: in this sample the old support foot has already begun to lift
            base.switch(want, Q[max(k - 1, 0)])
        F = base.body_pose(Q[k]) @ model.fk_frames(Q[k])[[li, ri]]
        feet[k] = F
        com[k] = base.com(Q[k])
    # COM acceleration by the finest central second difference the samples allow
    h = 1
    acc = np.zeros_like(com)
    acc[h:-h] = (com[2 * h:] - 2 * com[h:-h] + com[:-2 * h]) / (h * dt) ** 2
    zmp = com[:, :2] - com[:, 2:3] * acc[:, :2] / (G + acc[:, 2:3])
    corners = np.array([[sx * hl, sy * hw, 0, 1] for sx in (-1, 1) for sy in (-1, 1)])
    # the plan says which feet are down (0 both, 1 left, 2 right); a foot that is down must lie flat
    # on the ground (`contact_error`: its corners' largest height or depth) and must not move
    down = np.column_stack([support != 2, support != 1])
    margin = np.zeros(N)
    min_z = math.inf
    contact_error = 0.0
    for k in range(N):
        pts = []
        for f in range(2):
            C = (feet[k, f] @ corners.T).T
            min_z = min(min_z, C[:, 2].min())
            if down[k, f]:
                contact_error = max(contact_error, float(np.abs(C[:, 2]).max()))
                pts.append(C[:, :2])
        margin[k] = _hull_margin(np.vstack(pts), zmp[k])
    slide = 0.0
    for f in range(2):
        anchor = None
        for k in range(N):
            if down[k, f]:
                if anchor is None:
                    anchor = feet[k, f][:3, 3].copy()
                slide = max(slide, float(np.linalg.norm(feet[k, f][:3, 3] - anchor)))
            else:
                anchor = None
    qd = np.diff(Q, axis=0) / dt
    sp = float(np.max(np.abs(qd) / model.velocity_limit))
    knee_dev, short = _support_knees(model, Q, support)
    # the first and last h samples have no second difference: they take their neighbours' value
    margin[:h] = margin[h]
    margin[-h:] = margin[-h - 1]
    res = WalkResult(t, Q, support, com, zmp, zmp_ref, feet, margin, slide, float(min_z), sp, knee_dev, short,
                     float(worst), [label], contact_error=contact_error)
    return res


def _support_knees(model, Q, support) -> tuple[float, float]:
    """The support knee at mid-stance: degrees from straight (the knee's range ends at straight) and how
    much shorter the leg is than straight, mm. NaN for legs not named as humanoid17's (l_knee, l_thigh, …)."""
    needed = {"l_knee", "r_knee"} <= set(model.joint_names) and \
        {"l_thigh", "r_thigh", "l_ankle", "r_ankle"} <= set(model.frame_names)
    if not needed:
        return math.nan, math.nan
    knee_dev = 0.0
    short = 0.0
    k_l, k_r = model.joint_index("l_knee"), model.joint_index("r_knee")
    straight = math.degrees(model.lower[k_l])  # the knee's range ends at (just short of) straight
    runs = np.flatnonzero(np.diff(np.concatenate([[0], (support > 0).astype(int), [0]])))
    for a, b in zip(runs[::2], runs[1::2]):
        mid_k = (a + b) // 2
        side = "l" if support[mid_k] == 1 else "r"
        kj = k_l if side == "l" else k_r
        knee_dev = max(knee_dev, math.degrees(Q[mid_k, kj]) - straight)
        # hip-pitch axis to ankle-pitch axis distance, against the same with the knee straight
        def span(qq):
            F = model.fk_frames(qq)
            return np.linalg.norm(F[model.frame_index(f"{side}_thigh")][:3, 3]
                                  - F[model.frame_index(f"{side}_ankle")][:3, 3])
        qs = Q[mid_k].copy()
        qs[kj] = model.lower[kj]
        short = max(short, (span(qs) - span(Q[mid_k])) * 1e3)
    return knee_dev, short
