"""A rocking walk, for legs without an ankle roll (the Open Duck Mini's: hip yaw, hip roll, hip
pitch, knee, ankle pitch).

Such a leg cannot carry the body over its foot with both soles flat, as hil's ZMP walk
(`hil.motion.walking`) does: with one roll joint, the sole tilts as the hip rolls. So the body
rocks: both hips roll together and the robot tips onto one foot's outer edge, the other foot
lifts (the leg's pitch joints shorten it, its sole kept level) and swings forward, and the hip yaws
twist with the swing. Its balance is dynamic — no sample holds the centre of mass over a flat
sole — so no sample-by-sample check can say it holds: it is rolled out in physics, on robots varied
within stated bounds (`hil.physics.predict`), before anything moves, and refused if one falls.

The gait is a pattern in time of each leg's joints about home, in the body's axes (an angle about
the body's x, y or z axis, whatever each joint's own sign), one cycle a step of each leg: `RockingGait`.
A robot's side file gives its numbers (`[walk]`, degrees and seconds); otherwise the Open Duck
Mini's are taken, times scaled to the legs' length (a pendulum's: the same Froude number).
Units: radians, seconds, metres.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from hil.errors import ConfigError, InputError, UnreachableError
from hil.motion.limits import check_limits
from hil.motion.plan_check import check_plan
from hil.robots.legs import joints_along, leg_length, legs


@dataclass(frozen=True)
class RockingGait:
    """One cycle is a step of each leg; each amplitude grows in over `ramp` and fades out over it."""

    period: float        # s, one cycle (two steps)
    sway: float          # hip roll, both legs together: the body rocks over one foot, then the other
    sway_phase: float
    splay: float         # hip roll, the legs opposite ways
    lift: float          # the swing leg shortened: knee bent by 2·lift, hip and ankle pitch by lift each
    lift_phase: float
    swing: float         # the leg turned forward at the hip, the ankle keeping the sole's pitch
    swing_phase: float
    twist: float         # hip yaw, each leg opposite to the other, with the swing
    ramp: float          # s


# Found for the Open Duck Mini v2 (legs 0.203 m long) by a search (CMA-ES) in its makers' MJCF,
# within hil's joint limits, for the most distance its worst robot covers among servo stiffness
# ±20 %, masses ±10 % and floor friction 0.6–0.7, its body kept within 15° of upright
# (docs/robots.md): the body rocks ±15°, the legs swing ±12° in step with it, the feet barely lift
DUCK_LEG_M = 0.203
DUCK = RockingGait(period=0.6519, sway=math.radians(-14.93), sway_phase=math.radians(84.53),
                   splay=math.radians(2.532), lift=math.radians(0.04011),
                   lift_phase=math.radians(109.4), swing=math.radians(-11.87),
                   swing_phase=math.radians(-178.1), twist=math.radians(-2.871), ramp=1.49)

# the side file's [walk] keys: (field, unit factor to SI, lowest, highest) in the user's units
SIDE_KEYS = {
    "period_s": ("period", 1.0, 0.2, 5.0),
    "ramp_s": ("ramp", 1.0, 0.1, 5.0),
    "sway_deg": ("sway", math.pi / 180, -45.0, 45.0),
    "splay_deg": ("splay", math.pi / 180, -45.0, 45.0),
    "lift_deg": ("lift", math.pi / 180, 0.0, 45.0),
    "swing_deg": ("swing", math.pi / 180, -45.0, 45.0),
    "twist_deg": ("twist", math.pi / 180, -45.0, 45.0),
    "sway_phase_deg": ("sway_phase", math.pi / 180, -360.0, 360.0),
    "lift_phase_deg": ("lift_phase", math.pi / 180, -360.0, 360.0),
    "swing_phase_deg": ("swing_phase", math.pi / 180, -360.0, 360.0),
}


@dataclass(frozen=True)
class RockingLeg:
    """A leg's joints the pattern moves, each with its axis's sign along the body's axis at home."""

    side: int            # +1 left, -1 right
    yaw: int | None
    roll: int
    hip: int
    knee: int
    ankle: int
    signs: dict          # joint → ±1
    knee_bend: float     # ±1: the way the knee bends at home, as an angle about the body's y axis


def applies(model) -> bool:
    """Whether a walk on these legs rocks: each has one roll joint (no ankle roll) and three pitch
    joints (hip, knee, ankle)."""
    return all(len(lg.roll) == 1 and len(lg.pitch) == 3 for lg in legs(model).values())


def rocking_legs(model) -> list[RockingLeg]:
    """Each leg's joints the pattern moves, their signs read from the tree at home."""
    F = model.fk_frames(model.home)
    out = []
    for side, lg in legs(model).items():
        yaw = joints_along(model, lg.joints, 2)
        signs = {}
        for j in lg.joints:
            a = F[0][:3, :3].T @ (F[j + 1][:3, :3] @ np.asarray(model.joints[j].axis, dtype=np.float64))
            signs[j] = 1.0 if a[int(np.argmax(np.abs(a)))] > 0 else -1.0
        hip, knee, ankle = lg.pitch
        bend = signs[knee] * model.home[knee]
        out.append(RockingLeg(1 if side == "l" else -1, yaw[0] if yaw else None, lg.roll[0], hip, knee, ankle,
                              signs, 1.0 if bend >= 0 else -1.0))
    return out


def _smooth(x: np.ndarray) -> np.ndarray:
    """0 below 0, 1 above 1, and between a cubic with level ends."""
    x = np.clip(x, 0.0, 1.0)
    return x * x * (3.0 - 2.0 * x)


def pattern(model, gait: RockingGait, steps: int, rate_hz: float) -> tuple[np.ndarray, np.ndarray]:
    """(t, Q): the walk at `rate_hz` from home — the ramp in, `steps` steps, the ramp out — ending at home."""
    g = gait
    samples = math.ceil((2 * g.ramp + steps * g.period / 2) * rate_hz - 1e-9)
    duration = samples / rate_hz   # on the rate's grid: the last sample is home exactly
    t = np.arange(samples + 1) / rate_hz
    Q = np.tile(model.home, (len(t), 1))
    phase = 2 * math.pi * t / g.period
    envelope = _smooth(t / g.ramp) * _smooth((duration - t) / g.ramp)
    for leg in rocking_legs(model):
        own = phase + (0.0 if leg.side > 0 else math.pi)
        up = np.maximum(0.0, np.sin(own + g.lift_phase))
        lift = g.lift * up * up * envelope
        swing = g.swing * np.sin(own + g.swing_phase) * envelope
        turn = {   # angles about the body's axes
            leg.roll: (g.sway * np.sin(phase + g.sway_phase)
                       + leg.side * g.splay * np.sin(own + g.sway_phase)) * envelope,
            leg.hip: -leg.knee_bend * lift - swing,
            leg.knee: 2 * leg.knee_bend * lift,
            leg.ankle: -leg.knee_bend * lift + swing,
        }
        if leg.yaw is not None:
            turn[leg.yaw] = leg.side * g.twist * np.sin(own + g.swing_phase) * envelope
        for j, angle in turn.items():
            Q[:, j] += leg.signs[j] * angle
    return t, Q


def gait_of(model) -> tuple[RockingGait, str]:
    """The robot's gait and where it comes from: its side file's [walk] numbers, else the Open Duck
    Mini's with its times scaled to these legs."""
    table = model.meta.get("walk")
    if table:
        return from_table(table, str(model.meta.get("walk_source", "the side file"))), "its side file's [walk]"
    k = math.sqrt(leg_length(model) / DUCK_LEG_M)
    return (replace(DUCK, period=DUCK.period * k, ramp=DUCK.ramp * k),
            f"the Open Duck Mini v2's, its times scaled to legs {100 * leg_length(model):.1f} cm long")


def from_table(table: dict, where: str) -> RockingGait:
    """A side file's [walk] table (gait = "rocking" and SIDE_KEYS), checked: ConfigError naming the key."""
    if table.get("gait", "rocking") != "rocking":
        raise ConfigError(f"{where}: [walk] gait = {table.get('gait')!r}; the one gait a side file sets is \"rocking\"")
    unknown = set(table) - set(SIDE_KEYS) - {"gait"}
    if unknown:
        raise ConfigError(f"{where}: [walk] unknown key {sorted(unknown)[0]!r}; keys are gait, "
                          + ", ".join(sorted(SIDE_KEYS)))
    values = {}
    for key, (name, unit, lo, hi) in SIDE_KEYS.items():
        v = table.get(key, getattr(DUCK, name) / unit)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi:
            raise ConfigError(f"{where}: [walk] {key} = {v!r} must be a number in {lo:g} … {hi:g}")
        values[name] = float(v) * unit
    return RockingGait(**values)


def describe(gait: RockingGait) -> str:
    d = math.degrees
    return (f"a cycle of {gait.period:.2f} s (a step of each leg), the hips rolling ±{d(abs(gait.sway)):.0f}° together "
            f"and ±{d(abs(gait.splay)):.0f}° apart, the swing foot lifted by {d(gait.lift):.0f}° of hip, "
            f"swung ±{d(abs(gait.swing)):.0f}° and twisted ±{d(abs(gait.twist)):.0f}° at the hip yaw")


ROLLOUTS = 8            # the rollouts in physics that check a rocking walk's balance before it runs
LEAST_STEP_M = 0.002    # a walk whose rollouts get less far than this a step goes nowhere
PLANNED_SHARE = 0.5     # the travel a rocking walk plans: this share of the least any rollout covered


@dataclass
class RockingWalk:
    """A planned rocking walk: its samples, its gait, and the physics rollouts that checked it."""

    t: np.ndarray
    q: np.ndarray
    gait: RockingGait
    source: str
    prediction: object          # hil.physics.predict.Prediction
    travel: np.ndarray          # the planned travel (x, y): PLANNED_SHARE of the least any rollout covered
    com_w: np.ndarray           # (N, 3) the centre of mass's planned way: home's, carried along `travel`
    torques = None              # its balance and its servos' loads are checked in physics, not planned

    @property
    def q_cmd(self) -> np.ndarray:
        return self.q

    def summary(self) -> str:
        p = self.prediction
        return (f"plan: a rocking walk, {self.t[-1]:.1f} s: {100 * float(np.linalg.norm(self.travel)):.1f} cm planned "
                f"({100 * PLANNED_SHARE:.0f} % of the least of {len(p.rollouts)} rollouts in physics; "
                f"{p.variation.says()}), worst tilt {p.worst.max_tilt_deg:.1f}°")

    def save(self, path: str) -> None:
        """t, the commands q (and as the plan, q_plan: what physics checked is what the servos are
        told, no compliance compensation added), the COM's planned way, and the claim that physics
        checked its balance (which a run checks again: hil.runtime.motion_sources)."""
        np.savez(path, t=self.t, q=self.q, q_plan=self.q, com_w=self.com_w,
                 balance_checked_in_physics=np.array(True))


def plan(model, steps: int, rate_hz: float, servo=None, rollouts: int = ROLLOUTS, speed: float = 1.0,
         progress=None) -> RockingWalk:
    """The rocking walk of `steps` steps, its joint limits and self-collision checked sample by
    sample, its balance by `rollouts` rollouts in physics; UnreachableError naming what fails."""
    gait, source = gait_of(model)
    gait = replace(gait, period=gait.period / speed, ramp=gait.ramp / speed)
    t, Q = pattern(model, gait, steps, rate_hz)
    report = check_limits(model, t, Q)
    if report.time_scale > 1.0:
        raise UnreachableError(f"walk: refused: the rocking walk asks more than the joints give ({report.worst}); "
                               "give a longer period_s in the side file's [walk], or a slower --speed")
    check_plan(model, t, Q, static_balance=False, where="walk",
               advice="the rocking walk's gait is its side file's [walk]: change it there")
    prediction = rolled_out(model, t, Q, rollouts, servo, rate_hz, progress)
    least = _least_travel(prediction)
    if float(np.linalg.norm(least)) < steps * LEAST_STEP_M:
        raise UnreachableError(f"walk: refused: the rocking walk stays up but gets nowhere in physics (the least of "
                               f"{len(prediction.rollouts)} rollouts: {100 * float(np.linalg.norm(least)):.1f} cm in "
                               f"{steps} steps); give its side file's [walk] other numbers (docs/robots.md)")
    travel = PLANNED_SHARE * least
    com0 = np.array([*model.com(model.home)[:2], model.com(model.home)[2]])
    share = np.clip(t / t[-1], 0.0, 1.0)[:, None]
    com_w = com0 + share * np.array([*travel, 0.0])
    return RockingWalk(t, Q, gait, source, prediction, travel, com_w)


def rolled_out(model, t, Q, rollouts: int, servo, rate_hz: float, progress=None, workers: int | None = None):
    """The walk's commands rolled out in physics (on `workers` processes, default every core);
    UnreachableError if one falls (or MuJoCo is missing)."""
    from hil.physics import predict   # lazy: its process pool and MuJoCo, for a walk that rocks only

    try:
        prediction = predict.predict(model, t, Q, rollouts, servo=servo, rate_hz=rate_hz, progress=progress,
                                     workers=workers)
    except InputError as e:
        raise UnreachableError(f"walk: a rocking walk's balance is checked in physics, which cannot run here: {e}") \
            from None
    if prediction.fell:
        first = min((r for r in prediction.rollouts if r.fell), key=lambda r: r.fell_at_s)
        raise UnreachableError(f"walk: refused: the rocking walk falls in {prediction.fell} of {len(prediction.rollouts)} "
                               f"rollouts in physics ({prediction.variation.says()}), the first {first.fell_at_s:.1f} s "
                               "into it; give its side file's [walk] other numbers (docs/robots.md)")
    return prediction


def _least_travel(prediction) -> np.ndarray:
    """The travel the rollouts agree on: along their mean direction, as far as the shortest went."""
    ways = np.array([r.travel_m for r in prediction.rollouts])
    mean = ways.mean(axis=0)
    if float(np.linalg.norm(mean)) < 1e-6:
        return np.zeros(2)
    d = mean / np.linalg.norm(mean)
    return max(0.0, float((ways @ d).min())) * d
