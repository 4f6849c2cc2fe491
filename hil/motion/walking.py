"""Walking pattern generator for a humanoid (papers 000 and 002): what a walk asks of the legs
checked first, then the walk planned in its parts — the timeline of footsteps, contacts, ZMP
reference and swing feet (`gait`), the COM by preview control of the cart-table model (`preview`),
the joint angles from the prioritised LM IK with support-foot root switching (`walk_ik`) — and
checked from the joint angles it produces (`walk_check`); `plan` adds the pace, the torques and
the loop's own checks.

World frame: z up, the ground at z = 0; the robot starts standing at its home pose with the left
sole under its home position. Units: metres, radians, seconds.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from hil.errors import InputError, UnreachableError
from hil.kinematics.floating import FloatingBase
from hil.motion.bounds import check_duration
from hil.motion.gait import GAIT_LEG_M, Gait, WalkParams, default_gait, feet_roll, footsteps, standing_lead
from hil.motion.limits import check_limits
from hil.motion.preview import G, preview_com
from hil.motion.torques import TORQUE_RESERVE, torque_plan
from hil.motion.walk_check import WalkResult, check_walk, refuse_unsafe
from hil.motion.walk_ik import (STRETCH_DIPS, KneeStretch, leg_can_yaw, leg_joints, solve_samples,
                                with_contact_frames)
from hil.robots.legs import knee_bend_deg, legs
from hil.robots.servos import servo_table

# what callers of the walker find here (the parts are in gait, preview, walk_ik and walk_check)
__all__ = ["G", "GAIT_LEG_M", "WalkParams", "WalkResult", "check_legs", "check_walk", "default_gait", "generate",
           "plan", "preview_com", "refuse_unsafe"]


def generate(model, params: WalkParams, progress=None) -> WalkResult:
    """Plan a walk and check it from the joint motion it produces; UnreachableError if it fails.
    `progress(fraction)` (0…1), when given, is told how far the joint solution has come.

    knee_stretched: walk with the centre of mass as high as the legs reach (Tanaka & Sugihara 2014): its height
    is left free at first (the legs stretch until their knees stop a few degrees short of
    straight), then smoothed from below and followed; the support knee is then close to straight
    through mid-stance and the COM rises and falls with the legs.
    """
    p = params
    tall = p.knee_stretched and feet_roll(p)   # the double supports can stand taller with rolling feet
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
    before, torque_first = math.inf, math.inf   # (how far past its limit the first torque was)
    for attempt in range(6):   # slower until the joints' speed, acceleration and torque limits hold
        res.torques = torque_plan(model, res.t, res.q, res.support, servo, compensate)
        _refuse_too_weak_to_stand(res.torques)
        if res.torques.too_soft():   # no pace makes a servo stiffer
            raise UnreachableError(res.torques.refusal("walk"))
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
            torque_first = min(torque_first, over) if torque_first == math.inf else torque_first
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
            k, j, tau, avail = res.torques.worst()
            if tau / ((1.0 - TORQUE_RESERVE) * avail) - 1.0 >= 0.9 * torque_first:   # slower paces, no lower
                raise UnreachableError(_not_a_matter_of_pace(model, res, report, ""))
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
        table = res.torques.servo
        if not table.declared:
            advice = "give the kit's servos in a [servo] table (docs/physics.md)"
        else:   # the robot's own servo numbers: the load, not the table, is what can change
            _, j, _, _ = res.torques.worst()
            advice = (f"a home pose that loads {model.joint_names[j]} less ([poses] home in a side file) or a narrower "
                      f"--width may ask less of it (servos as {table.source or 'its [servo] table'} gives them)")
        return (res.torques.refusal("walk") + ", and no less at a slower pace (holding the robot up asks it): "
                f"its servos are too weak for it; {advice}")
    return (f"walk: refused: {why}, and no less at a slower pace: the plan jumps there (not a matter of pace); "
            "try a shorter stride, another --width, or --no-compensation")


def _limits(model, res: WalkResult):
    """The joints' speed and acceleration against their limits: the plan's and the commands' (with
    their compensation), whichever is worse."""
    plan, cmd = check_limits(model, res.t, res.q), check_limits(model, res.t, res.q_cmd)
    return plan if plan.time_scale >= cmd.time_scale else cmd


def _check_params(model, p: WalkParams) -> None:
    if p.turn_deg and not leg_can_yaw(model):
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
    if feet_roll(p) and not (0.5 <= p.contact_pitch_deg <= 20 and p.zmp_power >= 1 and p.heel_fraction > 0
                          and p.toe_fraction > 0 and p.heel_fraction + p.toe_fraction <= 0.9):
        raise InputError("walk: toe-off and heel strike need contact_pitch_deg in [0.5, 20], zmp_power ≥ 1, and "
                         "heel_fraction, toe_fraction > 0 with heel_fraction + toe_fraction ≤ 0.9")


def check_legs(model) -> None:
    """This walk keeps the body upright and the soles flat while down: a leg carries the body over
    its foot by rolling at the hip and back at the ankle. A leg with one roll joint or none cannot
    (its sole would tilt), whatever the stride: said before any IK is tried (a leg with its hip roll
    and three pitch joints walks rocking instead: `hil.motion.rocking`)."""
    check_driven_legs(model)
    for side, leg in legs(model).items():
        if len(leg.roll) < 2:
            names = ", ".join(model.joint_names[j] for j in leg.joints)
            has = {0: "no joint that rolls", 1: f"one joint that rolls ({model.joint_names[leg.roll[0]]})"}[len(leg.roll)]
            rocks = len(leg.roll) == 1 and len(leg.pitch) == 3
            raise InputError(f"walk: {model.name}'s {'left' if side == 'l' else 'right'} leg ({names}) has {has}; "
                             "this walk keeps the body upright and the soles flat, and carries the body over the "
                             "stance foot by a roll at the hip and one at the ankle (as humanoid17, the OP3 and the "
                             "G1 have)" + ("; `hil walk` walks such legs rocking (hil.motion.rocking)" if rocks else
                                           ", or rocks a leg with a hip roll and three pitch joints (hip, knee, ankle) "
                                           "over its foot's edge: this leg has neither") + " (docs/robots.md)")


def check_driven_legs(model) -> None:
    """Every joint of the legs is one a servo drives: hil plans through those, and does not compute a
    linkage's passive joints from them."""
    passive = set(model.meta.get("unactuated_joints", ()))
    for side, leg in legs(model).items():
        moved_by_none = [model.joint_names[j] for j in leg.joints if model.joint_names[j] in passive]
        if moved_by_none:
            raise InputError(f"walk: {model.name}'s {'left' if side == 'l' else 'right'} leg has joints no actuator of "
                             f"its MJCF moves ({', '.join(moved_by_none)}: a linkage's passive joints, as a knee "
                             "turned by rods): hil plans a walk through joints its servos drive, and does not compute "
                             "a linkage's joints from them (docs/robots.md)")


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
    steps = footsteps(p, W_l, W_r, width)
    if p.stand is None:
        p, gait = standing_lead(p, steps, W_l, W_r, dt, hl, hw, zc, com0)
    else:
        gait = Gait(p, steps, W_l, W_r, dt, hl, hw, com0)
    t = gait.t
    com_xy = preview_com(gait.zmp_ref, dt, zc - p.crouch, com0[:2])
    # COM height: down to the walking height during the first settle, back up during the last
    # (both between the standing still before and after)
    ramp_in = np.clip((t - p.stand) / p.settle, 0, 1)
    ramp_out = np.clip((gait.times[-1] - p.stand - t) / p.settle, 0, 1)
    blend = np.minimum(ramp_in, ramp_out)
    blend = blend * blend * (3 - 2 * blend)
    gait.com = np.column_stack([com_xy, zc - p.crouch * blend])
    gait.q0 = q0
    solver_model = with_contact_frames(model)
    # knee-stretched (Tanaka & Sugihara 2014): the COM height is not asked for; in single support the one
    # freedom left, the support knee, follows a smooth profile down to a few degrees short of
    # straight at mid-stance (in double support the feet, COM and attitude fix it)
    if not p.knee_stretched:
        Q, worst = solve_samples(solver_model, p, gait, None, progress)
    else:   # as straight as this step allows: a longer or wider step leaves the swing foot out of reach
        for dip in STRETCH_DIPS:
            Q, worst = solve_samples(solver_model, p, gait, KneeStretch(solver_model, p, gait, dip), progress)
            if worst <= 1e-4:
                break
    if worst > 1e-4:
        _refuse_straight_knees(model, worst)
        stretched = ", or walk without --knee-stretched (its knees cannot stretch on this step)" if p.knee_stretched else ""
        held, stop = _first_stop(model, Q, t)
        if held in {j for leg in legs(model).values() for j in leg.roll}:
            # the sway over each foot, not the step, takes a roll joint to its stop
            name = model.joint_names[held]
            raise UnreachableError(f"walk: the IK cannot keep contact and balance (residual {worst:.3g}{stop}): "
                                   f"carrying the body over each foot takes {name} past its stop, whatever the "
                                   f"stride; a shorter --period sways the body less (now {p.period:g} s), a stance "
                                   f"at home ([poses] home in a side file) or a --width may need less of {name}, or "
                                   f"give [joints.{name}] the robot's own stops if they reach further (docs/robots.md)")
        if not (p.stride or p.side or p.turn_deg):   # a shorter step cannot help a step that goes nowhere
            raise UnreachableError(f"walk: the IK cannot keep contact and balance even stepping in place (residual "
                                   f"{worst:.3g}{stop}): the legs cannot carry the centre of mass over one foot from "
                                   f"the home pose at this height and width; try a longer --period, a lower --lift or "
                                   f"a home pose with the knees more bent{stretched}")
        step = (f"stride (now {p.stride * 100:.1f} cm)" if p.stride or not p.side
                else f"side step (now {p.side * 100:.1f} cm)")
        raise StepOutOfReach(f"walk: the IK cannot keep contact and balance (residual {worst:.3g}{stop}); use a "
                             f"shorter {step}, a lower --lift or a longer period{stretched}")
    res = check_walk(model, t, Q, gait.support, gait.zmp_ref, p, hl, hw, worst, _label(p))
    res.com_ref = gait.com
    res.params = p
    return res


class StepOutOfReach(UnreachableError):
    """The legs cannot reach what this step asks (a joint at its stop), where a shorter step or a
    lower lift may hold: the default gait is tried smaller before this is said (`hil walk`)."""


def _first_stop(model, Q: np.ndarray, t: np.ndarray) -> tuple[int | None, str]:
    """Where a solved walk first holds a leg joint at one of its stops (the IK keeps the joints in
    their ranges, so a leg that cannot reach what a step asks ends there): the joint, and ", NAME
    at its lower stop (−30°) from t = 3.41 s"; (None, "") where none is, or one already is at home."""
    first = None
    for j in sorted(leg_joints(model)):
        for stop, which in ((model.lower[j], "lower"), (model.upper[j], "upper")):
            at = np.flatnonzero(np.abs(Q[:, j] - stop) < 1e-6)
            if len(at) and abs(model.home[j] - stop) > 1e-6 and (first is None or at[0] < first[0]):
                first = (int(at[0]), j, which, stop)
    if first is None:
        return None, ""
    k, j, which, stop = first
    return j, f", {model.joint_names[j]} at its {which} stop ({math.degrees(stop):.0f}°) from t = {t[k]:.2f} s"


STRAIGHT_KNEE_DEG = 10.0   # a home pose's knee this close to straight leaves a walk no height to work with


def _refuse_straight_knees(model, worst: float) -> None:
    """The IK failed on a robot that stands with a knee (nearly) straight at home: that is the cause
    to name. A walk lowers the body and carries it over each foot, which a stretched leg cannot
    reach (an MJCF's zero pose is often straight-legged)."""
    bends = knee_bend_deg(model)
    straight = {side: bend for side, bend in bends.items() if bend < STRAIGHT_KNEE_DEG}
    if not straight:
        return
    names = ", ".join(f"{model.joint_names[legs(model)[side].knee]} {bend:.0f}°" for side, bend in straight.items())
    raise UnreachableError(f"walk: the IK cannot keep contact and balance (residual {worst:.3g}): {model.name} stands "
                           f"with its knees (nearly) straight at home (bent {names}), and a walk lowers the body and "
                           "carries it over each foot, which a stretched leg cannot reach; give a home pose with the "
                           "knees bent 30–40° ([poses] home in a side file: docs/robots.md)")


def _label(p: WalkParams) -> str:
    moves = ([f"{100 * abs(p.stride):.1f} cm {'backward' if p.stride < 0 else 'forward'}"]
             if p.stride or not (p.side or p.turn_deg) else [])
    if p.side:
        moves.append(f"{100 * abs(p.side):.1f} cm to the {'left' if p.side > 0 else 'right'}")
    if p.turn_deg:
        moves.append(f"turning {abs(p.turn_deg):.0f}° {'left' if p.turn_deg > 0 else 'right'}")
    return f"{p.steps} steps of {', '.join(moves)}" + (", toe-off and heel strike" if feet_roll(p) else "")
