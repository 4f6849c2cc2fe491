"""A walk's timeline: its parameters and default gait, the footsteps, what each foot touches sample
by sample (flat, on its toe or heel, in the air), each sole's planned pose, the ZMP reference and
the swing feet (with toe-off and heel strike: Tanaka & Sugihara 2014). World frame: z up, the ground
at z = 0. Units SI."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from hil.kinematics.floating import inverse_transform
from hil.motion import contacts
from hil.motion.contacts import AIR, FLAT, HEEL, TOE
from hil.motion.preview import G, preview_com
from hil.robots.legs import leg_length
from hil.safety import support_hull_margin


@dataclass
class WalkParams:
    steps: int = 6
    stride: float = 0.03          # forward advance per step (m)
    width: float | None = None    # distance between the sole centres (m); default: as at home
    side: float = 0.0             # sideways advance per step (m), + to the left
    turn_deg: float = 0.0         # yaw per step (degrees)
    period: float = 0.8           # time per step (s)
    double_support: float | None = None   # fraction of the period with both feet down; None: 0.25, or 0.4 in
                                          # a knee-stretched walk whose feet roll (down and up in it)
    lift: float = 0.012           # swing foot clearance (m)
    toe_heel_deg: float = 8.0     # toe-off and heel-strike pitch of the swing sole (degrees)
    knee_stretched: bool = False  # leave COM height free and stretch the support knee
    rate_hz: float = 200.0
    settle: float = 0.8           # time before the first and after the last step (s)
    stand: float | None = None    # time standing still before the first settle's ZMP shift and after the
                                  # last (s); None: as long as a smooth start needs (see `standing_lead`)
    zmp_heel_toe: float = 0.01    # ZMP travel along the support sole in single support (m)
    crouch: float | None = None   # COM lowered by this much while walking (m; in double support only when
                                  # knee-stretched): the short thighs give the stance little height to spare
                                  # for sideways shifts. None: 8 mm, or 3 mm in a knee-stretched walk whose
                                  # feet roll, where the step allows (else 8 mm)
    zmp_inset: float = 0.0        # single-support ZMP moved this far from the sole centre towards
                                  # the inner edge (m): a smaller support region, less sway
    heel_toe: bool | None = None  # the feet roll: toe-off and heel strike on the ground (Tanaka & Sugihara 2014's
                                  # minimal support region); None: in a knee-stretched walk forwards
    contact_pitch_deg: float = 3.0   # the sole's pitch at lift-off (heel up) and touchdown (toe up)
    heel_fraction: float = 0.4    # of each double support: the front foot turns down about its heel
    toe_fraction: float = 0.4     # and, at its end, the rear foot turns up about its toe
    zmp_power: float = 3.0        # N of Tanaka & Sugihara 2014's eq. 1 (the single-support ZMP, heel to toe)


# a gait scaled to the legs: humanoid17's (legs 0.195 m long) steps 3 cm in 0.8 s, its foot lifted
# 12 mm; lengths scale with the leg, times with its square root (a pendulum's: the same Froude number)
GAIT_LEG_M = 0.195
GAIT_STRIDE, GAIT_LIFT, GAIT_PERIOD = 0.03, 0.012, 0.8


def default_gait(model) -> dict[str, float]:
    """The stride (m), step period (s) and lift (m) a walk takes unless told, from the leg's length."""
    k = leg_length(model) / GAIT_LEG_M
    return {"stride": round(min(GAIT_STRIDE * k, 0.2), 3), "period": round(min(GAIT_PERIOD * math.sqrt(k), 10.0), 2),
            "lift": round(min(GAIT_LIFT * k, 0.1), 3), "leg_m": round(k * GAIT_LEG_M, 3)}


def yaw_pose(x: float, y: float, yaw: float, z: float = 0.0) -> np.ndarray:
    c, s = math.cos(yaw), math.sin(yaw)
    # one array from one list: a walk's feet call this for every sample
    return np.array([[c, -s, 0.0, x], [s, c, 0.0, y], [0.0, 0.0, 1.0, z], [0.0, 0.0, 0.0, 1.0]])


def feet_roll(p: WalkParams) -> bool:
    """Whether the feet roll on the ground (toe-off and heel strike): as asked, or by default in a
    knee-stretched walk forwards (Tanaka & Sugihara 2014's proposed method; sideways, backwards and turning
    steps keep the soles flat while they are down)."""
    if p.heel_toe is not None:
        return bool(p.heel_toe)
    return p.knee_stretched and p.stride > 0 and p.side == 0 and p.turn_deg == 0


STANDS = (0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0)   # the standing leads tried, shortest first (s)
KICK_S = 0.1   # the start of a walk, where preview control kicks the COM into motion
LEAD_STEPS = 2   # the steps a standing lead is tried on (the first shift's ZMP heads for the first step's stance)


def standing_lead(p: WalkParams, steps, W_l, W_r, dt: float, hl: float, hw: float, zc: float,
                   com0: np.ndarray) -> "tuple[WalkParams, Gait]":
    """How long the robot stands still before the first shift of its weight. The COM starts at
    rest, and preview control starts it the moment the shift comes into view: the nearer the
    shift, the harder the kick, which moves the ZMP the other way (the taller the robot, the
    farther: out of its feet) and jolts the joints. The shortest lead whose cart-table ZMP stays a
    quarter of a sole's width inside both soles and whose COM, in its first KICK_S, accelerates
    no harder than the shift later asks (docs/robots.md gives the leads of the shipped robots).
    Returns the parameters with that lead, and their gait. Each lead is tried on the walk's first
    two steps (`LEAD_STEPS`): all that comes before the first shift ends is planned from them."""
    for stand in STANDS:
        gait = Gait(replace(p, stand=stand), steps[:LEAD_STEPS], W_l, W_r, dt, hl, hw, com0)
        first = gait.t < gait.times[1]
        com = preview_com(gait.zmp_ref[first], dt, zc - p.crouch, com0[:2])
        acc = np.zeros_like(com)
        acc[1:-1] = (com[2:] - 2 * com[1:-1] + com[:-2]) / dt ** 2
        zmp = com - (zc - p.crouch) * acc / G
        soles = np.array([(gait.sole[0, f] @ np.array([x, y, 0.0, 1.0]))[:2] for f in range(2)
                          for x in (-hl, hl) for y in (-hw, hw)])
        size = np.linalg.norm(acc, axis=1)
        kick = int(round(KICK_S / dt))
        if (min(support_hull_margin(soles, z) for z in zmp) >= hw / 4
                and size[:kick].max() <= size[kick:].max()):
            break
    if len(steps) > LEAD_STEPS:
        gait = Gait(gait.p, steps, W_l, W_r, dt, hl, hw, com0)
    return gait.p, gait


def footsteps(p: WalkParams, W_l: np.ndarray, W_r: np.ndarray, width: float) -> list[tuple[str, np.ndarray]]:
    """(side, world pose of the sole where it lands), one per step. Forward, the right foot swings
    first; sideways, the foot on the side of travel does and leads by one step (the stance opens,
    then the other foot closes it): a foot that stepped toward the other by the step's travel
    would land on it."""
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
        steps.append((side, yaw_pose(cx - off * math.sin(yaw), cy + off * math.cos(yaw), yaw)))
        side = "l" if side == "r" else "r"
    if p.steps % 2 == 1:  # bring the feet together at the end
        off = width / 2 if side == "l" else -width / 2
        steps.append((side, yaw_pose(cx - off * math.sin(yaw), cy + off * math.cos(yaw), yaw)))
    return steps


FEET = ("l", "r")
FLAT_PITCH = 1e-6          # a rolling sole pitched less than this (rad) lies flat


class Gait:
    """The walk's timeline, sample by sample: what each foot touches (`support`, codes of
    hil.motion.contacts), the sole the kinematic tree is rooted at (`root`: a sole flat on the
    ground, switched when the other is the only flat one), each sole's planned world pose and
    heading, the ZMP reference, and the target of the other foot's task. A walk whose feet roll
    (toe-off, heel strike) plans each swing from where the solution put the foot at lift-off."""

    def __init__(self, p: WalkParams, steps, W_l: np.ndarray, W_r: np.ndarray, dt: float, hl: float, hw: float,
                 com0: np.ndarray | None = None):
        self.p, self.hl, self.hw, self.dt, self.com0 = p, hl, hw, dt, com0
        self.rolls = feet_roll(p)
        T_ds = p.period * p.double_support
        self.T_toe, self.T_heel = p.toe_fraction * T_ds, p.heel_fraction * T_ds
        phases = [("both", None, p.stand + p.settle)]
        for i, (side, T) in enumerate(steps):
            phases.append(("single", (side, T), p.period - T_ds))
            # the last: the settle, then as long standing still as before the first shift, for the
            # COM to come to rest (it lags the ZMP's last shift as much as it led the first)
            phases.append(("both", None, T_ds if i < len(steps) - 1 else p.settle + p.stand))
        self.phases = phases
        self.times = times = np.cumsum([0.0] + [ph[2] for ph in phases])
        self.t = t = np.arange(0.0, times[-1], dt)
        N = len(t)
        self.ph_of = np.clip(np.searchsorted(times, t, side="right") - 1, 0, len(phases) - 1)
        self.contact = np.full((N, 2), FLAT, dtype=np.int64)
        self.sole = np.zeros((N, 2, 4, 4))        # each sole's planned world pose (in the air: see `task_pose`)
        self.yaw = np.zeros((N, 2))
        self.swing_pose = np.zeros((N, 2, 4, 4))  # a rolling walk's swing: the heel corner's pose, filled at lift-off
        self._landing: dict[int, tuple[int, np.ndarray, int]] = {}   # k_lift -> (foot, landing corner, k_td)
        self.com = np.zeros((N, 3))
        self.q0 = None
        held = {"l": W_l.copy(), "r": W_r.copy()}
        self.held_at_phase = []
        for kind, info, _ in phases:
            self.held_at_phase.append({f: held[f].copy() for f in FEET})
            if kind == "single":
                held[info[0]] = info[1]
        self._feet()
        if self.rolls:
            self._rolling_feet()
        self.single = (self.contact == AIR).any(axis=1)
        self.support = np.array([contacts.encode(int(a), int(b)) for a, b in self.contact], dtype=np.int64)
        self.root = self._roots()
        self.zmp_ref = self._zmp_reference()

    # ------------------------------------------------------------------ feet
    def _feet(self) -> None:
        """Soles flat where they stand; the swing foot in the air on `_swings` (lifted, pitched)."""
        p = self.p
        for i, (kind, info, dur) in enumerate(self.phases):
            ks = np.flatnonzero(self.ph_of == i)
            held = self.held_at_phase[i]
            for f, side in enumerate(FEET):
                self.sole[ks, f] = held[side]
                self.yaw[ks, f] = _heading(held[side])
            if kind == "single":
                sw, T_new = info
                f = FEET.index(sw)
                u = np.clip((self.t[ks] - self.times[i]) / dur, 0.0, 1.0)
                self.contact[ks, f] = AIR
                self.sole[ks, f] = _swings(held[sw], T_new, u, p.lift, math.radians(p.toe_heel_deg), self.hl)
                self.yaw[ks, f] = np.arctan2(self.sole[ks, f, 1, 0], self.sole[ks, f, 0, 0])

    def _rolling_feet(self) -> None:
        """Toe-off at the end of the double support before each swing (the foot turns up about its
        inner toe corner) and heel strike at the start of the one after (it lands on its outer
        heel corner and turns down about it), with one smooth pitch and roll from flat to flat."""
        pitch = math.radians(self.p.contact_pitch_deg)
        t = self.t
        for i, (kind, info, dur) in enumerate(self.phases):
            if kind != "single":
                continue
            side, T_land = info
            f = FEET.index(side)
            T_lift = self.held_at_phase[i][side]
            t_lo, t_td = self.times[i], self.times[i + 1]
            t_a, t_b = t_lo - self.T_toe, t_td + self.T_heel
            # the toe rises with the pitch still growing at lift-off and the heel comes down from
            # touchdown at speed, each from or to rest: about constant acceleration, a third less
            # than stopping at lift-off and touchdown would take
            knots_pitch = [(t_a, 0.0, 0.0), (t_lo, pitch, 2 * pitch / self.T_toe),
                           (t_td, -pitch, 2 * pitch / self.T_heel), (t_b, 0.0, 0.0)]
            knots_roll = [(t_a, 0.0, 0.0), (t_lo, contacts.edge_roll(side, TOE), 0.0),
                          (t_td, contacts.edge_roll(side, HEEL), 0.0), (t_b, 0.0, 0.0)]
            toe = corner_pose(side, TOE, self.hl, self.hw)
            heel = corner_pose(side, HEEL, self.hl, self.hw)
            ks = np.flatnonzero((t >= t_a) & (t < t_b))
            pitch_k = _hermites(knots_pitch, t[ks])
            # at either end of the roll the sole lies flat (within the numbers' precision)
            ks_ = (np.abs(pitch_k) >= FLAT_PITCH) | ((t[ks] >= t_lo) & (t[ks] < t_td))
            ks, pitch_k = ks[ks_], pitch_k[ks_]
            R = _pitch_rolls(pitch_k, _hermites(knots_roll, t[ks]))
            on_toe, on_heel = t[ks] < t_lo, t[ks] >= t_td
            in_air = ~on_toe & ~on_heel
            # on the toe: turned about the toe corner; on the heel: about the heel corner; in the
            # air: the heel corner's path is made at lift-off
            self.contact[ks[on_toe], f] = TOE
            self.sole[ks[on_toe], f] = np.matmul(T_lift @ toe, R[on_toe]) @ inverse_transform(toe)
            self.sole[ks[in_air], f] = np.matmul(_yaw_poses(self.yaw[ks[in_air], f]), R[in_air])
            self.contact[ks[on_heel], f] = HEEL
            self.sole[ks[on_heel], f] = np.matmul(T_land @ heel, R[on_heel]) @ inverse_transform(heel)
            k_lift = int(np.searchsorted(t, t_lo))
            self._landing[k_lift] = (f, T_land @ heel, int(np.searchsorted(t, t_td)))

    def _roots(self) -> np.ndarray:
        """Per sample the foot (0 left, 1 right) the tree is rooted at: a flat one; when both are
        flat, the one that was (Sun et al. 2007: the root changes when support does)."""
        root = np.zeros(len(self.t), dtype=np.int64)
        r = 0
        for k, (a, b) in enumerate(self.contact):
            if a == FLAT and b != FLAT:
                r = 0
            elif b == FLAT and a != FLAT:
                r = 1
            root[k] = r
        return root

    # ------------------------------------------------------------------ ZMP reference
    def _sole_point(self, T: np.ndarray, dx, side: str | None = None) -> np.ndarray:
        """The ground point dx along sole T (a number: (2,); an array of them: (N, 2)), set in by
        zmp_inset toward the inner edge of `side`'s sole."""
        dy = 0.0 if side is None else (-self.p.zmp_inset if side == "l" else self.p.zmp_inset)
        return np.multiply.outer(dx, T[:2, 0]) + dy * T[:2, 1] + T[:2, 3]

    def _zmp_reference(self) -> np.ndarray:
        """In single support along the stance sole from a heel point to a toe point, in double
        support from the rear sole's toe point to the front sole's heel point. Flat feet: the points
        ±zmp_heel_toe from the sole's centre, passed at a constant speed, handed over by a
        smoothstep. Rolling feet, Tanaka & Sugihara 2014's reference: x_S − (x_S − x_K)(1 − t/T)^N from the heel
        point x_K to the toe point x_S (eq. 1: it leaves the heel quickly and comes to rest at the
        toe), the points as far apart as the sole allows (zmp_heel_toe inside its ends) but no
        farther than the body advances in single support, so the ZMP never goes back."""
        p = self.p
        if self.rolls:
            travel = min(2 * (self.hl - p.zmp_heel_toe), abs(p.stride) * (1 - p.double_support))
            heel, toe = -travel / 2, travel / 2

            def along(u: float) -> float:
                return 1.0 - (1.0 - u) ** p.zmp_power

            def hand_over(u: float) -> float:
                return u ** 3 * (10 - 15 * u + 6 * u * u)
        else:
            heel, toe = -p.zmp_heel_toe, p.zmp_heel_toe

            def along(u: float) -> float:
                return u

            def hand_over(u: float) -> float:
                return u * u * (3 - 2 * u)
        ends = []   # the ZMP at the end of each phase
        for i, (kind, info, _) in enumerate(self.phases):
            held = self.held_at_phase[i]
            if kind == "single":
                st = "l" if info[0] == "r" else "r"
                ends.append(self._sole_point(held[st], toe, st))
            elif i + 1 < len(self.phases):
                st = "l" if self.phases[i + 1][1][0] == "r" else "r"
                ends.append(self._sole_point(held[st], heel, st))
            else:
                ends.append((held["l"][:2, 3] + held["r"][:2, 3]) / 2)
        ref = np.zeros((len(self.t), 2))
        # where a robot standing still has its ZMP: under its COM (between the soles if not known)
        first = (self.com0[:2] if self.com0 is not None
                 else (self.held_at_phase[0]["l"][:2, 3] + self.held_at_phase[0]["r"][:2, 3]) / 2)
        for i, (kind, info, dur) in enumerate(self.phases):
            ks = np.flatnonzero(self.ph_of == i)
            lead = p.stand if i == 0 else 0.0   # the first shift waits while the robot stands
            tail = p.stand if i == len(self.phases) - 1 and i > 0 else 0.0   # the last shift is over before it
            u = np.clip((self.t[ks] - self.times[i] - lead) / (dur - lead - tail), 0.0, 1.0)
            start = ends[i - 1] if i > 0 else first
            if kind == "both":
                ref[ks] = start + hand_over(u)[:, None] * (ends[i] - start)
            else:
                st = "l" if info[0] == "r" else "r"
                ref[ks] = self._sole_point(self.held_at_phase[i][st], heel + (toe - heel) * along(u), st)
        return ref

    # ------------------------------------------------------------------ the other foot's task
    def task_kind(self, k: int) -> str:
        """What the foot that is not the root does at sample k: "both" (flat), "toe", "heel", "air"."""
        c = self.contact[k, 1 - self.root[k]]
        return {FLAT: "both", TOE: "toe", HEEL: "heel", AIR: "air"}[int(c)]

    def task_pose(self, k: int) -> np.ndarray:
        """World pose of the other foot's task frame at sample k (see `_walk_solver`)."""
        f = 1 - self.root[k]
        c = self.contact[k, f]
        if c in (TOE, HEEL):
            return self.sole[k, f] @ corner_pose(FEET[f], int(c), self.hl, self.hw)
        if c == AIR and self.rolls:
            return self.swing_pose[k, f]
        return self.sole[k, f]

    def begin_swing(self, k: int, heel_now: np.ndarray, heel_before: np.ndarray) -> None:
        """At lift-off (sample k) of a rolling walk: the swing of the heel corner from where it is
        (`heel_now`, its world position at sample k − 1; `heel_before` at k − 2: it is moving,
        the foot turns about its toe) to where it lands at rest, lifted by `lift` between; its
        pitch and roll follow the planned ones."""
        if k not in self._landing:
            return
        f, T_heel_land, k_td = self._landing[k]
        p0, p1 = heel_now, T_heel_land[:3, 3]
        t0, t1 = self.t[k - 1], self.t[k_td]
        v0 = (heel_now - heel_before) / self.dt * (t1 - t0)   # per unit of u
        for kk in range(k, k_td):
            u = (self.t[kk] - t0) / (t1 - t0)
            h10, h01 = u - 6 * u**3 + 8 * u**4 - 3 * u**5, 10 * u**3 - 15 * u**4 + 6 * u**5
            T = self.sole[kk, f].copy()   # its heading, pitch and roll
            T[:3, 3] = p0 + h10 * v0 + h01 * (p1 - p0)
            T[2, 3] += self.p.lift * 16 * u * u * (1 - u) ** 2   # lifting at once: the toe is still turning down
            self.swing_pose[kk, f] = T

    def lifts_off(self, k: int) -> bool:
        return self.rolls and k in self._landing


def corner_pose(side: str, kind: int, hl: float, hw: float) -> np.ndarray:
    """The touching corner of a sole on its toe or heel, as a pose in the sole's frame."""
    _, x, y = contacts.corners(side, kind, hl, hw)[0]
    return yaw_pose(x, y, 0.0)


def _pitch_rolls(pitch: np.ndarray, roll: np.ndarray) -> np.ndarray:
    """Ry(pitch) · Rx(roll) as (N, 4, 4): + pitch lowers the toe, + roll lowers the right side."""
    cp, sp, cr, sr = np.cos(pitch), np.sin(pitch), np.cos(roll), np.sin(roll)
    T = np.zeros((len(pitch), 4, 4))
    T[:, 0, 0], T[:, 0, 1], T[:, 0, 2] = cp, sp * sr, sp * cr
    T[:, 1, 1], T[:, 1, 2] = cr, -sr
    T[:, 2, 0], T[:, 2, 1], T[:, 2, 2] = -sp, cp * sr, cp * cr
    T[:, 3, 3] = 1.0
    return T


def _yaw_poses(yaw: np.ndarray) -> np.ndarray:
    """`yaw_pose(0, 0, yaw)` for each of yaw (N,): (N, 4, 4)."""
    T = np.zeros((len(yaw), 4, 4))
    T[:, 0, 0] = T[:, 1, 1] = np.cos(yaw)
    T[:, 1, 0] = np.sin(yaw)
    T[:, 0, 1] = -T[:, 1, 0]
    T[:, 2, 2] = T[:, 3, 3] = 1.0
    return T


def _hermites(knots, t: np.ndarray) -> np.ndarray:
    """A piecewise quintic through knots (time, value, rate), zero accelerations at each knot, at
    each of the times t."""
    ends = np.array([k[0] for k in knots[1:]])
    seg = np.minimum(np.searchsorted(ends, t, side="left"), len(ends) - 1)   # the first whose end is ≥ t
    t0, p0, v0 = (np.array([k[j] for k in knots[:-1]])[seg] for j in range(3))
    t1, p1, v1 = (np.array([k[j] for k in knots[1:]])[seg] for j in range(3))
    T = t1 - t0
    u = np.clip((t - t0) / T, 0.0, 1.0)
    h00, h10 = 1 - 10 * u**3 + 15 * u**4 - 6 * u**5, u - 6 * u**3 + 8 * u**4 - 3 * u**5
    h01, h11 = 10 * u**3 - 15 * u**4 + 6 * u**5, -4 * u**3 + 7 * u**4 - 3 * u**5
    return h00 * p0 + h10 * v0 * T + h01 * p1 + h11 * v1 * T


def _heading(T: np.ndarray) -> float:
    return math.atan2(T[1, 0], T[0, 0])


def _swings(T0: np.ndarray, T1: np.ndarray, u: np.ndarray, lift: float, pitch: float, hl: float) -> np.ndarray:
    """Swing sole poses (N, 4, 4) at phases u (N,) ∈ [0, 1]: smooth in x/y/yaw, lifted, toe-off
    then heel-strike."""
    s = u * u * u * (10 - 15 * u + 6 * u * u)  # quintic: zero speed and acceleration at both ends
    p = T0[:3, 3] + s[:, None] * (T1[:3, 3] - T0[:3, 3])
    y0 = math.atan2(T0[1, 0], T0[0, 0])
    y1 = math.atan2(T1[1, 0], T1[0, 0])
    dy = (y1 - y0 + math.pi) % (2 * math.pi) - math.pi
    yaw = y0 + s * dy
    z = lift * np.sin(math.pi * u) ** 2
    # toe-off (heel up, rotate about the toe) early, heel-strike (toe up) late; zero at both ends.
    # Pitched about the sole centre, a toe or heel dips by hl·sin θ while the lift rises: near
    # both ends lift·sin²(πu) stays above it while sin(pitch) ≤ lift / (2 hl), so the pitch is
    # held under that (with a tenth to spare)
    pitch = min(pitch, 0.9 * math.asin(min(1.0, lift / (2 * hl))))
    theta = pitch * np.sin(2 * math.pi * u) * np.sin(math.pi * u)
    c, sn, ct, st = np.cos(yaw), np.sin(yaw), np.cos(theta), np.sin(theta)
    T = np.zeros((len(u), 4, 4))   # yaw_pose(x, y, yaw) · Ry(theta), lifted by z
    T[:, 0, 0], T[:, 0, 1], T[:, 0, 2], T[:, 0, 3] = c * ct, -sn, c * st, p[:, 0]
    T[:, 1, 0], T[:, 1, 1], T[:, 1, 2], T[:, 1, 3] = sn * ct, c, sn * st, p[:, 1]
    T[:, 2, 0], T[:, 2, 2], T[:, 2, 3] = -st, ct, z
    T[:, 3, 3] = 1.0
    return T
