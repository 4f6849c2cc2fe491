"""The one plan check: every planned motion — a trajectory file, a keyframe motion, a walk, a G-code
path, `hil run --motion` of any kind — is checked here, sample by sample, before the robot is
enabled, with the loop's own checks (`hil.safety`) and the joints' speed, acceleration and torque
limits. Nothing it refuses ever moves.

Both what the joints should do (`q_plan`) and what the servos are told (`q_cmd`: the plan plus any
compliance compensation) are checked: a command the loop would clamp is a plan that does not run
as planned, so it is refused here, not clamped there.
"""

from __future__ import annotations

import math

import numpy as np

from hil.errors import InputError, UnreachableError
from hil.motion.limits import LimitReport, check_limits
from hil.safety import BALANCE, SafetyChecker

# The speed and acceleration a plan may reach, as a share of the limits: the planners slow a motion
# to the limits, and a sampled motion's finest differences land a little either side of them.
SPEED_SLACK = 1.001
ACCEL_SLACK = 1.02


class PlanRefused(UnreachableError, InputError):
    """A planned motion fails a check (what it asks cannot be done, and the file or the options that
    ask it are refused); the message names the motion, the sample, the joint and why.
    `sample` is that sample's index (None: the whole motion), `reason` the message after its place."""

    def __init__(self, where: str, reason: str, t: float | None = None, sample: int | None = None) -> None:
        at = f"at t = {t:.3f} s (sample {sample}): " if sample is not None else ""
        super().__init__(f"{where}: refused before any motion: {at}{reason}")
        self.sample, self.reason = sample, reason


def check_plan(model, t, q_plan, *, static_balance: bool = True, where: str = "the motion", advice: str = "",
               checker: SafetyChecker | None = None) -> LimitReport:
    """Refuse (`PlanRefused`) a planned motion whose joints go faster than their speed or acceleration
    limits, and then the first sample that a check fails: joint ranges, self-collision, floor,
    workspace and, with `static_balance`, the centre of mass over the soles (a walk's balance is its
    ZMP, checked by its planner).
    Returns the speed and acceleration report."""
    t, Q = _rows(model, t, q_plan, where)
    bad = _first_non_finite(Q)
    if bad is not None:
        k, j = bad
        raise PlanRefused(where, f"{model.joint_names[j]} is {float(Q[k, j])}, not a finite angle", t[k], k)
    report = check_limits(model, t, Q)   # first: a jump breaks every check after it, this one names it
    if report.speed_ratio > SPEED_SLACK or report.accel_ratio > ACCEL_SLACK:
        raise PlanRefused(where, f"from t = {report.first_over_t:.3f} s the joints go faster than their limits; "
                                 f"worst: {report.worst}; " + (advice or "plan it slower, or play it slower (--speed)"))
    _check_rows(model, checker or SafetyChecker(model, balance=None if static_balance else False), t, Q, "", where,
                advice)
    return report


def check_commands(model, t, q_cmd, torques=None, *, static_balance: bool = True, where: str = "the motion",
                   advice: str = "", checker: SafetyChecker | None = None, q_plan=None) -> None:
    """The commands the servos are told (the plan with its compliance compensation), as the loop
    checks them: refused where one would be clamped or held; then the servos' torques
    (`torques`, a TorquePlan) against what they give. With `q_plan` (the poses the commands
    compensate for), balance holds where it holds at the plan's pose, as in the loop: loaded, the
    servos stand there."""
    t, Q = _rows(model, t, q_cmd, where)
    sag = None if q_plan is None else Q - _rows(model, t, q_plan, where)[1]
    checker = checker or SafetyChecker(model, balance=None if static_balance else False)
    _check_rows(model, checker, t, Q, "the command (with its compliance compensation) ", where, advice,
                balance_advice="the compliance compensation lifts a sole of the commanded pose off the ground "
                               "(soft servos, feet far apart): play it with --no-compensation", sag=sag)
    if torques is not None and torques.over():
        k = torques.worst()[0]
        raise PlanRefused(where, torques.refusal("it").removeprefix("it: refused: ") + "; "
                          + (advice or "slow it down or lighten the load"), t[k], k)


def _rows(model, t, Q, where: str) -> tuple[np.ndarray, np.ndarray]:
    t = np.asarray(t, dtype=np.float64)
    Q = np.ascontiguousarray(Q, dtype=np.float64)
    if Q.ndim != 2 or Q.shape[1] != model.n or t.shape != (Q.shape[0],):
        raise PlanRefused(where, f"needs {model.n} joint angles per sample and one time per sample; got q "
                                 f"{Q.shape} and t {t.shape}")
    return t, Q


def _check_rows(model, checker: SafetyChecker, t: np.ndarray, Q: np.ndarray, what: str, where: str,
                advice: str, balance_advice: str = "", sag: np.ndarray | None = None) -> None:
    """The first sample a check fails, refused; `balance_advice` stands in for a missing `advice`
    when balance is all that fails (a command's: soft servos with the feet far apart get, from the
    compensation for their hip rolls' sag, targets whose soles would not both stand unloaded)."""
    bad = _first_non_finite(Q)
    if bad is not None:
        k, j = bad
        raise PlanRefused(where, f"{what}{model.joint_names[j]} is {float(Q[k, j])}, not a finite angle", t[k], k)
    first, flags = checker.check_path(Q, sag)
    if first >= 0:
        if int(flags[first]) == BALANCE and not advice:
            advice = balance_advice
        reasons = checker.explain(int(flags[first]), Q[first], None if sag is None else sag[first])
        raise PlanRefused(where, what + "; ".join(reasons) + _peak(model, Q, first) + (f"; {advice}" if advice else ""),
                          t[first], first)


def _first_non_finite(Q: np.ndarray) -> tuple[int, int] | None:
    bad = ~np.isfinite(Q)
    if not bad.any():
        return None
    k, j = np.argwhere(bad)[0]
    return int(k), int(j)


def _peak(model, Q: np.ndarray, first: int) -> str:
    """Where a joint that leaves its range at sample `first` goes at worst (the first sample past a
    range end is only a little past it)."""
    lo, hi = model.lower, model.upper
    out = Q[first] < lo - 1e-12
    out |= Q[first] > hi + 1e-12
    if not out.any():
        return ""
    j = int(np.flatnonzero(out)[0])
    column = Q[:, j]
    k = int(np.argmax(column) if Q[first, j] > hi[j] else np.argmin(column))
    return f" (it goes on to {math.degrees(column[k]):+.1f}° at sample {k})" if k != first else ""
