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
from hil.motion import contacts
from hil.motion.bounds import check_duration
from hil.motion.contacts import AIR, FLAT, HEEL, TOE
from hil.motion.limits import check_limits
from hil.motion.plan_check import check_commands, check_plan
from hil.motion.torques import TORQUE_RESERVE, TorquePlan, torque_plan
from hil.robots.legs import leg_length, legs
from hil.robots.servos import servo_table
from hil.safety import support_hull_margin

G = 9.81


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
    stand: float | None = None    # time standing still before the first settle's ZMP shift (s); None: as
                                  # long as the robot's height needs (0 for humanoid17, see `_standing_lead`)
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
    lowest: np.ndarray | None = None   # per sample, the lowest sole corner (m)
    params: "WalkParams | None" = None  # what it was planned with, every default filled in
    torques: "TorquePlan | None" = None  # the servos' torques and the compensated commands (`plan`)

    @property
    def q_cmd(self) -> np.ndarray:
        """What the servos are told (N, n): the joint angles plus the compliance compensation."""
        return self.q if self.torques is None else self.torques.q_cmd

    def save(self, path: str) -> None:
        """t, the commands `q` (compensated), the plan `q_plan`, the torques `tau`, support, COM, ZMP."""
        extra = {} if self.torques is None else {"q_plan": self.q, "tau": self.torques.tau}
        np.savez(path, t=self.t, q=self.q_cmd, support=self.support, com_w=self.com_w, zmp_w=self.zmp_w,
                 zmp_ref=self.zmp_ref, dynamic_balance_checked=np.array(True), **extra)

    def summary(self) -> str:
        knee = "" if math.isnan(self.knee_mid_stance_deg) else (
            f", support knee at mid-stance {self.knee_mid_stance_deg:.1f}° from straight "
            f"(leg {self.leg_short_mm:.1f} mm short of full extension)")
        stand = self.params.stand if self.params is not None else None
        first = f" (standing {stand:.2f} s before its first shift)" if stand else ""
        return (f"plan: {self.report[0]}, {self.t[-1]:.1f} s{first}, ZMP margin ≥ {1e3 * self.margin.min():.1f} mm, "
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


def generate(model, params: WalkParams, progress=None) -> WalkResult:
    """Plan a walk and check it from the joint motion it produces; UnreachableError if it fails.
    `progress(fraction)` (0…1), when given, is told how far the joint solution has come.

    knee_stretched: walk with the centre of mass as high as the legs reach (Tanaka & Sugihara 2014): its height
    is left free at first (the legs stretch until their knees stop a few degrees short of
    straight), then smoothed from below and followed; the support knee is then close to straight
    through mid-stance and the COM rises and falls with the legs.
    """
    p = params
    tall = p.knee_stretched and _rolls(p)   # the double supports can stand taller with rolling feet
    if p.double_support is None:
        p = replace(p, double_support=STRETCHED_DOUBLE_SUPPORT if tall else DOUBLE_SUPPORT)
    if p.crouch is not None:
        return _generate(model, p, progress)
    crouches = STRETCHED_CROUCHES if tall else (CROUCH,)
    for crouch in crouches[:-1]:   # the double supports as tall as the step allows
        try:
            return _generate(model, replace(p, crouch=crouch), progress)
        except UnreachableError:
            pass
    return _generate(model, replace(p, crouch=crouches[-1]), progress)


DOUBLE_SUPPORT, STRETCHED_DOUBLE_SUPPORT = 0.25, 0.4
CROUCH = 0.008
STRETCHED_CROUCHES = (0.003, CROUCH)


CONTACT_TOLERANCE = 1e-6   # a sole the plan has down may lie this far off the ground (m)
FLAT_PITCH = 1e-6          # a rolling sole pitched less than this (rad) lies flat
SLIDE_TOLERANCE = 1e-6     # and move this far while it is down (m)


def plan(model, params: WalkParams, progress=None, say=print, servo=None, compensate: bool = True,
         strict: bool = False) -> WalkResult:
    """A walk the robot can follow, or UnreachableError naming the first sample that fails.

    Planned (`generate`), then planned again with a longer step period while the joints' speed or
    acceleration limits are exceeded, or the torques it asks of the servos (`servo`, default the
    robot's own table) are more than they give; then checked sample by sample as the loop checks:
    the ZMP inside what touches the ground, feet down lying flat and not sliding, and the loop's own
    checks (limits, floor, self-collision) on every pose. Its commands carry the compliance
    compensation (`compensate`, where the servos declare a stiffness). `say` hears each replanning;
    `strict` refuses instead of planning again slower."""
    servo = servo or servo_table(model)
    _check_length(params)
    res = generate(model, params, progress)
    before = math.inf
    for attempt in range(6):   # slower until the joints' speed, acceleration and torque limits hold
        res.torques = torque_plan(model, res.t, res.q, res.support, servo, compensate)
        _refuse_too_weak_to_stand(res.torques)
        report = _limits(model, res)
        if report.time_scale <= 1.0 and not res.torques.over():
            break
        # a longer step is not the same motion slowed down (the settles keep their time, the COM
        # and the knees are planned again): the ratio can fall short, so each try asks for more
        if report.time_scale > 1.0:   # (over: how far past the limit, as a share of it)
            scale, why, over = report.time_scale, report.worst, report.time_scale - 1.0
        else:
            k, j, tau, avail = res.torques.worst()
            scale, why = 1.15, f"{model.joint_names[j]} {tau:.2f} N·m of {avail:.2f}"
            over = tau / ((1.0 - TORQUE_RESERVE) * avail) - 1.0
        if strict:
            raise UnreachableError(f"walk: refused (--strict): at a {params.period:.2f} s step period: {why}; "
                                   "try a longer --period, a shorter stride or --speed")
        # far past a limit, and a slower pace did not bring it down: the plan jumps there (near a
        # limit, successive plans' peaks move a few percent either way: planned again)
        if over > FAR_PAST_A_LIMIT and over > 0.9 * before:
            raise UnreachableError(_not_a_matter_of_pace(model, res, report, why))
        before = over
        params = replace(params, period=params.period * scale * (1.02 + 0.02 * attempt))
        _check_length(params, f"at the {params.period:.2f} s step period its limits need")
        say(f"walk: {why}: planned again with a {params.period:.2f} s step period")
        res = generate(model, params, progress)
    else:
        res.torques = torque_plan(model, res.t, res.q, res.support, servo, compensate)
        report = _limits(model, res)
        if report.time_scale > 1.0:
            raise UnreachableError(f"walk: refused: the joints cannot follow it ({report.worst}); try a shorter "
                                   "stride or a longer --period")
        if res.torques.over():
            raise UnreachableError(res.torques.refusal("walk") + "; try a shorter stride or a longer --period")
    refuse_unsafe(model, res)
    return res


def _check_length(params: WalkParams, why: str = "") -> None:
    """A walk's steps (with the stand before and after them) within the longest motion hil plans."""
    check_duration((params.steps + 2) * params.period, f"walk: {params.steps} steps of {params.period:.3g} s"
                   + (f" ({why})" if why else ""), "walk fewer steps at a time, or a shorter --period")


FAR_PAST_A_LIMIT = 0.25   # a plan's time scale (or torque) a quarter past its limit, or more


def _refuse_too_weak_to_stand(torques) -> None:
    """A robot whose servos cannot hold it up standing still walks at no pace: refused at once."""
    tau, avail = np.abs(torques.tau[0]), (1.0 - TORQUE_RESERVE) * torques.available[0]
    j = int(np.argmax(tau / np.maximum(avail, 1e-9)))
    if tau[j] > avail[j]:
        raise UnreachableError(f"walk: refused: {torques.joint_names[j]} needs {tau[j]:.2f} N·m to hold the robot "
                               f"up standing still, more than its servo gives ({torques.available[0, j]:.2f} N·m, "
                               f"{100 * TORQUE_RESERVE:.0f} % kept in reserve): no pace helps; give the kit's "
                               "servos in a [servo] table (docs/physics.md)")


def _not_a_matter_of_pace(model, res: WalkResult, report, why: str) -> str:
    """Why a walk that a slower pace does not bring within the limits is refused."""
    if report.time_scale <= 1.0:
        return (res.torques.refusal("walk") + ", and no less at a slower pace (holding the robot up asks it): "
                "its servos are too weak for it; give the kit's servos in a [servo] table (docs/physics.md)")
    return (f"walk: refused: {why}, and no less at a slower pace: the plan jumps there (not a matter of pace); "
            "try a shorter stride, another --width, or --no-compensation")


def _limits(model, res: WalkResult):
    """The joints' speed and acceleration against their limits: the plan's and the commands' (with
    their compensation), whichever is worse."""
    plan, cmd = check_limits(model, res.t, res.q), check_limits(model, res.t, res.q_cmd)
    return plan if plan.time_scale >= cmd.time_scale else cmd


def refuse_unsafe(model, res: WalkResult) -> None:
    """UnreachableError at the first sample of a planned walk that fails a check (see `plan`)."""
    k = int(np.argmin(np.nan_to_num(res.margin, nan=-np.inf)))
    if not res.margin[k] > 0:
        raise UnreachableError(f"walk: refused: the planned ZMP leaves {model.name}'s support polygon "
                               f"({1e3 * res.margin[k]:.1f} mm) at t = {res.t[k]:.3f} s; try a shorter stride, "
                               "a longer --period, or a home pose the robot walks from (docs/robots.md)")
    if res.min_foot_z < -CONTACT_TOLERANCE:
        k = int(np.argmin(res.lowest))
        raise UnreachableError(f"walk: refused: a sole corner goes {-1e3 * res.min_foot_z:.3f} mm into the ground "
                               f"at t = {res.t[k]:.3f} s; try a larger --lift or a shorter stride")
    if res.contact_error > CONTACT_TOLERANCE or res.slide > SLIDE_TOLERANCE:
        raise UnreachableError(f"walk: refused: a foot on the ground is {1e3 * res.contact_error:.3f} mm off it "
                               f"or slides {1e3 * res.slide:.3f} mm; try a shorter stride or a longer --period")
    # the plan and its commands as the loop will check them (balance: the ZMP's, checked above)
    advice = "try a wider --width, a shorter stride or a smaller --side"
    check_plan(model, res.t, res.q, static_balance=False, where="walk", advice=advice)
    if res.torques is not None:
        check_commands(model, res.t, res.q_cmd, static_balance=False, where="walk",
                       advice=advice + (" or --no-compensation" if res.torques.compensated else ""))


def _leg_joints(model) -> set[int]:
    """The joints between the body and either sole (whatever they are named)."""
    return {i for side in FEET for i in np.flatnonzero(np.abs(model.jacobian(model.home, f"{side}_sole")).sum(axis=0)
                                                         > 1e-9)}


def _leg_can_yaw(model) -> bool:
    """True if some leg joint turns about an (almost) vertical axis at the home pose."""
    J = model.jacobian(model.home, "l_sole")
    return any(abs(J[5, i]) > 0.5 for i in _leg_joints(model))


def _rolls(p: WalkParams) -> bool:
    """Whether the feet roll on the ground (toe-off and heel strike): as asked, or by default in a
    knee-stretched walk forwards (Tanaka & Sugihara 2014's proposed method; sideways, backwards and turning
    steps keep the soles flat while they are down)."""
    if p.heel_toe is not None:
        return bool(p.heel_toe)
    return p.knee_stretched and p.stride > 0 and p.side == 0 and p.turn_deg == 0


def _check_params(model, p: WalkParams) -> None:
    if p.turn_deg and not _leg_can_yaw(model):
        raise InputError(f"walk: {model.name}'s legs have no hip-yaw joint (hip roll, hip pitch, knee, ankle pitch, "
                         "ankle roll), so a foot cannot turn relative to the other while both are down: turning "
                         "needs --turn 0 (the paper's 5-joint legs); walk sideways with --side instead")
    if p.knee_stretched and any(leg.knee is None for leg in legs(model).values()):
        raise InputError(f"walk: --knee-stretched holds the support knee on a profile; {model.name}'s legs have no "
                         "knee (a leg's knee is the middle of three joints that pitch between hip and sole): "
                         "walk without it")
    check_legs(model)
    if p.steps < 1 or p.period <= 0.2 or not 0.05 <= p.double_support <= 0.6 or p.rate_hz < 50:
        raise InputError("walk: steps ≥ 1, period > 0.2 s, double_support in [0.05, 0.6], rate ≥ 50 Hz")
    if _rolls(p) and not (0.5 <= p.contact_pitch_deg <= 20 and p.zmp_power >= 1 and p.heel_fraction > 0
                          and p.toe_fraction > 0 and p.heel_fraction + p.toe_fraction <= 0.9):
        raise InputError("walk: toe-off and heel strike need contact_pitch_deg in [0.5, 20], zmp_power ≥ 1, and "
                         "heel_fraction, toe_fraction > 0 with heel_fraction + toe_fraction ≤ 0.9")


def check_legs(model) -> None:
    """This walk keeps the body upright and the soles flat while down: a leg carries the body over
    its foot by rolling at the hip and back at the ankle. A leg with one roll joint or none cannot
    (its sole would tilt), whatever the stride: said before any IK is tried."""
    for side, leg in legs(model).items():
        if len(leg.roll) < 2:
            names = ", ".join(model.joint_names[j] for j in leg.joints)
            has = {0: "no joint that rolls", 1: f"one joint that rolls ({model.joint_names[leg.roll[0]]})"}[len(leg.roll)]
            raise InputError(f"walk: {model.name}'s {'left' if side == 'l' else 'right'} leg ({names}) has {has}; "
                             "hil's walk keeps the body upright and the soles flat, and carries the body over the "
                             "stance foot by a roll at the hip and one at the ankle (as humanoid17, the OP3 and the "
                             "G1 have): a leg without an ankle roll cannot shift the weight sideways, so no walk "
                             "is planned for it (docs/robots.md)")


def _generate(model, params: WalkParams, progress=None) -> WalkResult:
    p = params
    _check_params(model, p)
    dt = 1.0 / p.rate_hz
    q0 = model.home.copy()
    base = FloatingBase(model, "l_sole", q0)
    W_l = base.frame_pose(q0, "l_sole")
    W_r = base.frame_pose(q0, "r_sole")
    width = p.width if p.width is not None else float(np.linalg.norm(W_l[:3, 3] - W_r[:3, 3]))
    com0 = base.com(q0)
    zc = float(com0[2])
    hl, hw = model.sole_half
    steps = _footsteps(p, W_l, W_r, width)
    if p.stand is None:
        p, gait = _standing_lead(p, steps, W_l, W_r, dt, hl, hw, zc, com0)
    else:
        gait = _Gait(p, steps, W_l, W_r, dt, hl, hw, com0)
    t = gait.t
    com_xy = preview_com(gait.zmp_ref, dt, zc - p.crouch, com0[:2])
    # COM height: down to the walking height during the first settle, back up during the last
    ramp_in = np.clip((t - p.stand) / p.settle, 0, 1)
    ramp_out = np.clip((gait.times[-1] - t) / p.settle, 0, 1)
    blend = np.minimum(ramp_in, ramp_out)
    blend = blend * blend * (3 - 2 * blend)
    gait.com = np.column_stack([com_xy, zc - p.crouch * blend])
    gait.q0 = q0
    solver_model = _with_contact_frames(model)
    # knee-stretched (Tanaka & Sugihara 2014): the COM height is not asked for; in single support the one
    # freedom left, the support knee, follows a smooth profile down to a few degrees short of
    # straight at mid-stance (in double support the feet, COM and attitude fix it)
    if not p.knee_stretched:
        Q, worst = _solve_samples(solver_model, p, gait, None, progress)
    else:   # as straight as this step allows: a longer or wider step leaves the swing foot out of reach
        for dip in STRETCH_DIPS:
            Q, worst = _solve_samples(solver_model, p, gait, _KneeStretch(solver_model, p, gait, dip), progress)
            if worst <= 1e-4:
                break
    if worst > 1e-4:
        stretched = ", or walk without --knee-stretched (its knees cannot stretch on this step)" if p.knee_stretched else ""
        if not (p.stride or p.side or p.turn_deg):   # a shorter step cannot help a step that goes nowhere
            raise UnreachableError(f"walk: the IK cannot keep contact and balance even stepping in place (residual "
                                   f"{worst:.3g}): the legs cannot carry the centre of mass over one foot from the "
                                   f"home pose at this height and width; try a longer --period, a lower --lift or a "
                                   f"home pose with the knees more bent{stretched}")
        step = (f"stride (now {p.stride * 100:.1f} cm)" if p.stride or not p.side
                else f"side step (now {p.side * 100:.1f} cm)")
        raise UnreachableError(f"walk: the IK cannot keep contact and balance (residual {worst:.3g}); use a shorter "
                               f"{step} or a longer period{stretched}")
    res = check_walk(model, t, Q, gait.support, gait.zmp_ref, p, hl, hw, worst, _label(p))
    res.com_ref = gait.com
    res.params = p
    return res


STANDS = (0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0)   # the standing leads tried, shortest first (s)


def _standing_lead(p: WalkParams, steps, W_l, W_r, dt: float, hl: float, hw: float, zc: float,
                   com0: np.ndarray) -> "tuple[WalkParams, _Gait]":
    """How long the robot stands still before the first shift of its weight. The COM starts at
    rest and the first shift begins at once; the taller the robot, the harder its COM must be
    pushed to follow, and the push moves the ZMP the other way: on G1 (COM 0.67 m up) 0.7 m out of
    its feet. The shortest lead whose cart-table ZMP stays a quarter of a sole's width inside both
    soles (none on humanoid17). Returns the parameters with that lead, and their gait."""
    for stand in STANDS:
        gait = _Gait(replace(p, stand=stand), steps, W_l, W_r, dt, hl, hw, com0)
        first = gait.t < gait.times[1]
        com = preview_com(gait.zmp_ref[first], dt, zc - p.crouch, com0[:2])
        acc = np.zeros_like(com)
        acc[1:-1] = (com[2:] - 2 * com[1:-1] + com[:-2]) / dt ** 2
        zmp = com - (zc - p.crouch) * acc / G
        soles = np.array([(gait.sole[0, f] @ np.array([x, y, 0.0, 1.0]))[:2] for f in range(2)
                          for x in (-hl, hl) for y in (-hw, hw)])
        if min(support_hull_margin(soles, z) for z in zmp) >= hw / 4:
            break
    return gait.p, gait


def _footsteps(p: WalkParams, W_l: np.ndarray, W_r: np.ndarray, width: float) -> list[tuple[str, np.ndarray]]:
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
        steps.append((side, _yaw_T(cx - off * math.sin(yaw), cy + off * math.cos(yaw), yaw)))
        side = "l" if side == "r" else "r"
    if p.steps % 2 == 1:  # bring the feet together at the end
        off = width / 2 if side == "l" else -width / 2
        steps.append((side, _yaw_T(cx - off * math.sin(yaw), cy + off * math.cos(yaw), yaw)))
    return steps


FEET = ("l", "r")


class _Gait:
    """The walk's timeline, sample by sample: what each foot touches (`support`, codes of
    hil.motion.contacts), the sole the kinematic tree is rooted at (`root`: a sole flat on the
    ground, switched when the other is the only flat one), each sole's planned world pose and
    heading, the ZMP reference, and the target of the other foot's task. A walk whose feet roll
    (toe-off, heel strike) plans each swing from where the solution put the foot at lift-off."""

    def __init__(self, p: WalkParams, steps, W_l: np.ndarray, W_r: np.ndarray, dt: float, hl: float, hw: float,
                 com0: np.ndarray | None = None):
        self.p, self.hl, self.hw, self.dt, self.com0 = p, hl, hw, dt, com0
        self.rolls = _rolls(p)
        T_ds = p.period * p.double_support
        self.T_toe, self.T_heel = p.toe_fraction * T_ds, p.heel_fraction * T_ds
        phases = [("both", None, p.stand + p.settle)]
        for i, (side, T) in enumerate(steps):
            phases.append(("single", (side, T), p.period - T_ds))
            phases.append(("both", None, T_ds if i < len(steps) - 1 else p.settle))
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
        """Soles flat where they stand; the swing foot in the air on `_swing` (lifted, pitched)."""
        p = self.p
        for k, tk in enumerate(self.t):
            i = self.ph_of[k]
            kind, info, dur = self.phases[i]
            held = self.held_at_phase[i]
            for f, side in enumerate(FEET):
                self.sole[k, f] = held[side]
                self.yaw[k, f] = _heading(held[side])
            if kind == "single":
                sw, T_new = info
                f = FEET.index(sw)
                u = min(1.0, max(0.0, (tk - self.times[i]) / dur))
                self.contact[k, f] = AIR
                self.sole[k, f] = _swing(held[sw], T_new, u, p.lift, math.radians(p.toe_heel_deg), self.hl)
                self.yaw[k, f] = _heading(self.sole[k, f])

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
            toe = _corner_T(side, TOE, self.hl, self.hw)
            heel = _corner_T(side, HEEL, self.hl, self.hw)
            for k in np.flatnonzero((t >= t_a) & (t < t_b)):
                pitch_k = _hermite(knots_pitch, t[k])
                if abs(pitch_k) < FLAT_PITCH and not t_lo <= t[k] < t_td:
                    continue   # at either end of the roll the sole lies flat (within the numbers' precision)
                R = _pitch_roll(pitch_k, _hermite(knots_roll, t[k]))
                if t[k] < t_lo:      # on the toe: turned about the toe corner
                    self.contact[k, f] = TOE
                    self.sole[k, f] = T_lift @ toe @ R @ inverse_transform(toe)
                elif t[k] < t_td:    # in the air: the heel corner's path is made at lift-off
                    self.sole[k, f] = _yaw_T(0, 0, self.yaw[k, f]) @ R
                else:                # on the heel: turned about the heel corner
                    self.contact[k, f] = HEEL
                    self.sole[k, f] = T_land @ heel @ R @ inverse_transform(heel)
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
    def _sole_point(self, T: np.ndarray, dx: float, side: str | None = None) -> np.ndarray:
        dy = 0.0 if side is None else (-self.p.zmp_inset if side == "l" else self.p.zmp_inset)
        return (T @ [dx, dy, 0, 1])[:2]

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
        for k, tk in enumerate(self.t):
            i = self.ph_of[k]
            kind, info, dur = self.phases[i]
            lead = p.stand if i == 0 else 0.0   # the first shift waits while the robot stands
            u = min(1.0, max(0.0, (tk - self.times[i] - lead) / (dur - lead)))
            start = ends[i - 1] if i > 0 else first
            if kind == "both":
                ref[k] = start + hand_over(u) * (ends[i] - start)
            else:
                st = "l" if info[0] == "r" else "r"
                ref[k] = self._sole_point(self.held_at_phase[i][st], heel + (toe - heel) * along(u), st)
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
            return self.sole[k, f] @ _corner_T(FEET[f], int(c), self.hl, self.hw)
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


def _with_contact_frames(model):
    """The model with a frame at each sole corner a foot on its toe or heel touches with (kept on
    the model: the walk solvers' tasks are set on these frames)."""
    out = model.meta.get("_walk_model")
    if out is None:
        hl, hw = model.sole_half
        out = model.meta["_walk_model"] = model.with_frames(
            {contacts.corner_frame(s, c): (f"{s}_sole", _corner_T(s, c, hl, hw)) for s in FEET for c in (TOE, HEEL)})
    return out


def _corner_T(side: str, kind: int, hl: float, hw: float) -> np.ndarray:
    """The touching corner of a sole on its toe or heel, as a pose in the sole's frame."""
    _, x, y = contacts.corners(side, kind, hl, hw)[0]
    return _yaw_T(x, y, 0.0)


def _pitch_roll(pitch: float, roll: float) -> np.ndarray:
    """Ry(pitch) · Rx(roll) as a (4, 4): + pitch lowers the toe, + roll lowers the right side."""
    cp, sp, cr, sr = math.cos(pitch), math.sin(pitch), math.cos(roll), math.sin(roll)
    T = np.eye(4)
    T[:3, :3] = [[cp, sp * sr, sp * cr], [0, cr, -sr], [-sp, cp * sr, cp * cr]]
    return T


def _hermite(knots, t: float) -> float:
    """A piecewise quintic through knots (time, value, rate), zero accelerations at each knot."""
    for (t0, p0, v0), (t1, p1, v1) in zip(knots, knots[1:]):
        if t <= t1:
            break
    T = t1 - t0
    u = min(1.0, max(0.0, (t - t0) / T))
    h00, h10 = 1 - 10 * u**3 + 15 * u**4 - 6 * u**5, u - 6 * u**3 + 8 * u**4 - 3 * u**5
    h01, h11 = 10 * u**3 - 15 * u**4 + 6 * u**5, -4 * u**3 + 7 * u**4 - 3 * u**5
    return h00 * p0 + h10 * v0 * T + h01 * p1 + h11 * v1 * T


def _heading(T: np.ndarray) -> float:
    return math.atan2(T[1, 0], T[0, 0])


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
    heading = " rz" if _leg_can_yaw(model) else ""
    tasks = [Task("com", np.zeros(3), mask="x y" if stretch else "position", priority=1, ref=root),
             Task(model.base_frame, np.eye(4), mask="orientation", priority=1, ref=root)]
    # ε per sample (Tanaka & Sugihara 2014, eqs. 2-3): when a foot becomes a contact, or its contact changes,
    # the error asked for in one step stays small: no jumps. A swinging foot follows its moving
    # target without it, and so does a double support solved ahead from a pose a step away.
    eps = 0.0005 if kind != "air" and not ahead else 0.0
    if kind == "both":
        frame, mask = f"{other}_sole", "pose"
    elif kind == "air":
        frame, mask = (f"{other}_heel_contact" if _rolls(p) else f"{other}_sole"), "x y z rx ry" + heading
    else:
        frame, mask = contacts.corner_frame(other, TOE if kind == "toe" else HEEL), "x y z rx ry" + heading
    tasks.append(Task(frame, np.eye(4), mask=mask, priority=1, ref=root, max_error_step=eps))
    # everything but the legs (arms, head, a waist) keeps its pose: not needed, and the arms' tiny
    # COM Jacobian columns would otherwise be used as nearly singular directions
    legs = _leg_joints(model)
    locked = {n: float(model.home[i]) for i, n in enumerate(model.joint_names) if i not in legs}
    return LMSolver(model, tasks, max_iter=200, tol=1e-9, locked=locked)


class _KneeStretch:
    """The knees of a knee-stretched walk, sample by sample: in single support the support knee is
    held on a profile that leaves where the double support put it, dips to a few degrees short of
    straight through mid-stance and arrives where the next double support will want it (found by
    solving that double support ahead), with matching speeds at both ends; the swing knee stays
    clear of straight."""

    def __init__(self, model, p: WalkParams, gait: _Gait, dip: float) -> None:
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


def _set_targets(s: LMSolver, gait: _Gait, k: int, root: str) -> None:
    W_root = gait.sole[k, FEET.index(root[0])]
    inv_root = inverse_transform(W_root)
    s.set_target(0, (inv_root @ np.append(gait.com[k], 1.0))[:3])
    s.set_target(1, inv_root @ _body_attitude(gait.yaw[k]))
    s.set_target(2, inv_root @ gait.task_pose(k))


def _solve_samples(model, p: WalkParams, gait: _Gait, knees: _KneeStretch | None, progress=None):
    """The joint angles, sample by sample, continuing from the previous sample, rooted at the
    sole `gait.root` names (Sun et al. 2007: the root changes when the support does); (Q, worst
    priority-1 residual)."""
    solvers: dict = {}
    q = gait.q0.copy()
    N = len(gait.t)
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
        _set_targets(s, gait, k, root)
        res = s.solve(np.clip(q, s.lower, s.upper))
        q = res.q
        Q[k] = q
        worst = max(worst, res.residuals[0])
    return Q, worst


def _world_point(model, gait: _Gait, Q: np.ndarray, k: int, root: str, frame: str) -> np.ndarray:
    """World position of `frame` at solved sample k, through the root sole's planned pose."""
    F = model.fk_frames(Q[k])
    body = gait.sole[k, FEET.index(root[0])] @ inverse_transform(F[model.frame_index(root)])
    return (body @ F[model.frame_index(frame)])[:3, 3]


def _body_attitude(yaws: np.ndarray) -> np.ndarray:
    """The body upright, turned to the mean heading of the two feet."""
    R = np.eye(4)
    R[:3, :3] = _yaw_T(0, 0, math.atan2(math.sin(yaws[0]) + math.sin(yaws[1]),
                                        math.cos(yaws[0]) + math.cos(yaws[1])))[:3, :3]
    return R


def _label(p: WalkParams) -> str:
    moves = ([f"{100 * abs(p.stride):.1f} cm {'backward' if p.stride < 0 else 'forward'}"]
             if p.stride or not (p.side or p.turn_deg) else [])
    if p.side:
        moves.append(f"{100 * abs(p.side):.1f} cm to the {'left' if p.side > 0 else 'right'}")
    if p.turn_deg:
        moves.append(f"turning {abs(p.turn_deg):.0f}° {'left' if p.turn_deg > 0 else 'right'}")
    return f"{p.steps} steps of {', '.join(moves)}" + (", toe-off and heel strike" if _rolls(p) else "")


def _swing(T0: np.ndarray, T1: np.ndarray, u: float, lift: float, pitch: float, hl: float) -> np.ndarray:
    """Swing sole pose at phase u ∈ [0, 1]: smooth in x/y/yaw, lifted, toe-off then heel-strike."""
    s = u * u * u * (10 - 15 * u + 6 * u * u)  # quintic: zero speed and acceleration at both ends
    p = T0[:3, 3] + s * (T1[:3, 3] - T0[:3, 3])
    y0 = math.atan2(T0[1, 0], T0[0, 0])
    y1 = math.atan2(T1[1, 0], T1[0, 0])
    dy = (y1 - y0 + math.pi) % (2 * math.pi) - math.pi
    yaw = y0 + s * dy
    z = lift * math.sin(math.pi * u) ** 2
    # toe-off (heel up, rotate about the toe) early, heel-strike (toe up) late; zero at both ends.
    # Pitched about the sole centre, a toe or heel dips by hl·sin θ while the lift rises: near
    # both ends lift·sin²(πu) stays above it while sin(pitch) ≤ lift / (2 hl), so the pitch is
    # held under that (with a tenth to spare)
    pitch = min(pitch, 0.9 * math.asin(min(1.0, lift / (2 * hl))))
    theta = pitch * math.sin(2 * math.pi * u) * math.sin(math.pi * u)
    T = _yaw_T(p[0], p[1], yaw)
    c, sn = math.cos(theta), math.sin(theta)
    T = T @ np.array([[c, 0, sn, 0], [0, 1, 0, 0], [-sn, 0, c, 0], [0, 0, 0, 1.0]])
    T[2, 3] += z
    return T


def check_walk(model, t, Q, support, zmp_ref, p: WalkParams, hl, hw, worst, label) -> WalkResult:
    """The checks, from the joint angles alone (FK through the root-switching floating base) and
    what the plan says touches the ground (`support`, codes of hil.motion.contacts)."""
    N = len(t)
    dt = t[1] - t[0]
    feet_contacts = [contacts.decode(int(c)) for c in support]
    base = FloatingBase(model, "l_sole", Q[0])
    feet = np.zeros((N, 2, 4, 4))
    com = np.zeros((N, 3))
    li, ri = model.frame_index("l_sole"), model.frame_index("r_sole")
    for k in range(N):
        left, right = feet_contacts[k]
        want = "l_sole" if left == FLAT and right != FLAT else "r_sole" if right == FLAT and left != FLAT else None
        if want and want != base.support:
            # the new root sole's world pose is where it stood at the last sample it was flat
            # beside the other: in this sample the other foot has already begun to roll or lift
            base.switch(want, Q[max(k - 1, 0)])
        F = base.body_pose(Q[k]) @ model.fk_frames(Q[k])[[li, ri]]
        feet[k] = F
        com[k] = base.com(Q[k])
    # COM acceleration by the finest central second difference the samples allow
    h = 1
    acc = np.zeros_like(com)
    acc[h:-h] = (com[2 * h:] - 2 * com[h:-h] + com[:-2 * h]) / (h * dt) ** 2
    zmp = com[:, :2] - com[:, 2:3] * acc[:, :2] / (G + acc[:, 2:3])
    # the plan says which corners of each sole are down: they must lie on the ground
    # (`contact_error`: their largest height or depth) and must not move while they stay down
    # (`slide`); every corner must stay above the ground (`min_foot_z`); the ZMP must stay inside
    # what is down (`margin`)
    names = [[nm for nm, _, _ in contacts.corners(side, FLAT, hl, hw)] for side in FEET]
    corners = np.array([[x, y, 0, 1] for _, x, y in contacts.corners("l", FLAT, hl, hw)]).T
    down_names = {(f, c): [nm for nm, _, _ in contacts.corners(FEET[f], c, hl, hw)] for f in range(2) for c in range(4)}
    margin = np.zeros(N)
    lowest = np.zeros(N)
    contact_error = 0.0
    slide = 0.0
    anchor: dict[str, np.ndarray] = {}
    for k in range(N):
        pts = []
        held = set()
        for f in range(2):
            C = (feet[k, f] @ corners)[:3].T
            lowest[k] = min(lowest[k], float(C[:, 2].min())) if f else float(C[:, 2].min())
            for nm in down_names[f, feet_contacts[k][f]]:
                c = C[names[f].index(nm)]
                contact_error = max(contact_error, abs(float(c[2])))
                pts.append(c[:2])
                held.add(nm)
                if nm not in anchor:
                    anchor[nm] = c.copy()
                slide = max(slide, float(np.linalg.norm(c - anchor[nm])))
        for nm in [nm for nm in anchor if nm not in held]:
            del anchor[nm]
        margin[k] = support_hull_margin(np.array(pts), zmp[k]) if len(pts) >= 3 else -math.inf
    qd = np.diff(Q, axis=0) / dt
    sp = float(np.max(np.abs(qd) / model.velocity_limit))
    knee_dev, short = _support_knees(model, Q, support)
    # the first and last h samples have no second difference: they take their neighbours' value
    margin[:h] = margin[h]
    margin[-h:] = margin[-h - 1]
    res = WalkResult(t, Q, support, com, zmp, zmp_ref, feet, margin, slide, float(lowest.min()), sp, knee_dev, short,
                     float(worst), [label], contact_error=contact_error, lowest=lowest)
    return res


def _support_knees(model, Q, support) -> tuple[float, float]:
    """The support knee at mid-stance: degrees from straight (the knee's range ends at straight) and how
    much shorter the leg is than straight, hip-pitch axis to ankle-pitch axis, mm. NaN for legs
    without a knee (hil.robots.legs)."""
    leg_of = legs(model)
    if any(leg.knee is None or leg.ankle_pitch is None for leg in leg_of.values()):
        return math.nan, math.nan
    knee_dev = 0.0
    short = 0.0
    in_air = np.array([AIR in contacts.decode(int(c)) for c in support])
    runs = np.flatnonzero(np.diff(np.concatenate([[0], in_air.astype(int), [0]])))
    for a, b in zip(runs[::2], runs[1::2]):
        mid_k = (a + b) // 2
        leg = leg_of["l" if contacts.decode(int(support[mid_k]))[0] != AIR else "r"]
        kj = leg.knee
        straight = math.degrees(model.lower[kj])  # the knee's range ends at (just short of) straight
        knee_dev = max(knee_dev, math.degrees(Q[mid_k, kj]) - straight)

        def span(qq):
            F = model.fk_frames(qq)
            return np.linalg.norm(F[leg.hip_pitch + 1][:3, 3] - F[leg.ankle_pitch + 1][:3, 3])
        qs = Q[mid_k].copy()
        qs[kj] = model.lower[kj]
        short = max(short, (span(qs) - span(Q[mid_k])) * 1e3)
    return knee_dev, short
