"""Before a motion runs on a robot that can fall: does it stay up on robots a little unlike the model?

`predict` rolls the run's commands out N times in MuJoCo (`hil.physics.build`'s model of the robot
with the run's servo table), each time on a robot varied within `Variation`'s bounds — every servo's
stiffness, every body's mass, the floor's friction, the delay between a command and its servo —
and, as the run would: powered up on its stand at home, released, ramped in to the motion's first
pose at the loop's ramp speed, the motion played at the loop's rate, held a second at its end. Open
loop: no balance stabiliser (the run's stabiliser can only do better). The rollouts run on every CPU
core, in processes that end with this one. A rollout's margin is how far its body stayed from the
fall's tilt (`FALL_TILT_DEG`); the prediction counts those that fell and names the worst.
"""

from __future__ import annotations

import copy
import multiprocessing as mp
import os
import signal
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, replace

import numpy as np

from hil.errors import InputError
from hil.kinematics.floating import FALL_TILT_DEG
from hil.physics.build import PhysicsModel, build
from hil.physics.physics_plant import STAND_RELEASE_S, PhysicsPlant
from hil.process_life import die_with_parent

STAND_AFTER_RELEASE_S = 0.3   # standing on its own feet before the ramp-in, as after an enable
HOLD_AT_END_S = 1.0           # the last pose held: a fall that starts at the end counts
RAMP_FRACTION = 0.25          # of each joint's velocity limit while ramping in (the loop's policy)
DEFAULT_MAX_FALL_SHARE = 0.10


@dataclass(frozen=True)
class Variation:
    """The bounds each rollout's robot is drawn within (uniformly, each servo and body on its own)."""

    stiffness: float = 0.20                       # ± share of each servo's stiffness
    mass: float = 0.10                            # ± share of each body's mass (and inertia)
    friction: tuple[float, float] = (0.7, 1.0)    # the floor's sliding friction
    latency_s: tuple[float, float] = (0.0, 0.010)  # command → servo, the bus's and the adapter's delay

    def says(self) -> str:
        return (f"servo stiffness ±{100 * self.stiffness:.0f} %, masses ±{100 * self.mass:.0f} %, floor friction "
                f"{self.friction[0]:g}–{self.friction[1]:g}, latency {1e3 * self.latency_s[0]:g}–"
                f"{1e3 * self.latency_s[1]:g} ms")


@dataclass
class Rollout:
    index: int
    fell: bool
    fell_at_s: float | None       # into the motion (s; negative: before it started)
    max_tilt_deg: float
    travel_m: np.ndarray          # the base's travel in the world over the motion (x, y)

    @property
    def margin_deg(self) -> float:
        return FALL_TILT_DEG - self.max_tilt_deg


@dataclass
class Prediction:
    rollouts: list[Rollout]
    variation: Variation
    workers: int
    seconds: float
    planned_travel_m: np.ndarray | None = None

    @property
    def fell(self) -> int:
        return sum(r.fell for r in self.rollouts)

    @property
    def fall_share(self) -> float:
        return self.fell / max(len(self.rollouts), 1)

    @property
    def worst(self) -> Rollout:
        return min(self.rollouts, key=lambda r: r.margin_deg)

    def covered(self) -> np.ndarray | None:
        """Each rollout's share of the planned distance (along the planned direction), or None."""
        p = self.planned_travel_m
        if p is None or float(np.linalg.norm(p)) < 0.01:
            return None
        d = p / np.linalg.norm(p)
        return np.array([float(r.travel_m @ d) / float(np.linalg.norm(p)) for r in self.rollouts])

    def summary(self) -> str:
        n, w = len(self.rollouts), self.worst
        up = n - self.fell
        text = (f"predict: {n} rollouts in physics ({self.variation.says()}; open loop): {up} stay up "
                f"({100 * up / n:.0f} %), {self.fell} fall")
        text += f"; worst tilt {w.max_tilt_deg:.1f}° (margin {w.margin_deg:.1f}° to the fall at {FALL_TILT_DEG:g}°)"
        if self.fell:
            first = min((r for r in self.rollouts if r.fell), key=lambda r: r.fell_at_s)
            text += f", the first fall {first.fell_at_s:.1f} s into the motion"
        share = self.covered()
        if share is not None:
            text += (f"; distance covered: median {100 * float(np.median(share)):.0f} %, least "
                     f"{100 * float(share.min()):.0f} % of the planned {100 * float(np.linalg.norm(self.planned_travel_m)):.1f} cm")
        return text + (f"; {self.workers} process(es), {self.seconds:.1f} s "
                       f"({n / max(self.seconds, 1e-9):.1f} rollouts/s)")

    def as_dict(self) -> dict:
        share = self.covered()
        return {"rollouts": len(self.rollouts), "fell": self.fell, "fall_share": round(self.fall_share, 4),
                "worst_tilt_deg": round(self.worst.max_tilt_deg, 2), "worst_margin_deg": round(self.worst.margin_deg, 2),
                "covered_median": None if share is None else round(float(np.median(share)), 4),
                "bounds": {"stiffness": self.variation.stiffness, "mass": self.variation.mass,
                           "friction": list(self.variation.friction), "latency_s": list(self.variation.latency_s)},
                "workers": self.workers, "seconds": round(self.seconds, 3)}


@dataclass
class RolloutJob:
    """What every rollout shares (handed to the worker processes as they fork)."""

    pm: PhysicsModel
    q_cmd: np.ndarray        # (N, n) the commands at the loop's rate
    dt: float
    ramp_speed: np.ndarray   # rad/s per joint
    variation: Variation
    seed: int


_JOB: RolloutJob | None = None


def check_can_fall(model, option: str = "--predict") -> None:
    if not model.floating:
        raise InputError(f"{option}: {model.name} is fixed to the ground and cannot fall; it predicts falls of "
                         "robots with a floating base (humanoids)")


def predict(model, t, q, n: int, servo=None, rate_hz: float = 200.0, variation: Variation | None = None,
            planned_travel_m=None, workers: int | None = None, seed: int = 0, progress=None) -> Prediction:
    """Roll the commands `q` (N, n) at times `t` (N,) out `n` times (see the module): the run's
    commands, sampled at its loop's `rate_hz`, with `servo` its servo table (default the robot's)."""
    check_can_fall(model)
    if not (isinstance(n, int) and 1 <= n <= 10000):
        raise InputError(f"--predict {n}: the number of rollouts, 1 … 10000 (e.g. --predict 64)")
    variation = variation or Variation()
    dt = 1.0 / rate_hz
    t = np.asarray(t, dtype=np.float64) - float(t[0])
    q = np.asarray(q, dtype=np.float64)
    grid = np.arange(0.0, t[-1] + dt / 2, dt)
    q_cmd = np.stack([np.interp(grid, t, q[:, j]) for j in range(q.shape[1])], axis=1)
    if not np.isfinite(q_cmd).all():
        raise InputError("--predict: the motion's commands are not all finite numbers")
    ramp = np.asarray(model.velocity_limit, dtype=np.float64) * RAMP_FRACTION
    return rolled_out(RolloutJob(build(model, servo), q_cmd, dt, ramp, variation, seed), n, workers, progress,
                      planned_travel_m)


def rolled_out(job: RolloutJob, n: int, workers: int | None = None, progress=None,
               planned_travel_m=None) -> Prediction:
    """`n` rollouts of a job whose physics model is built (`predict` builds one; a search that tries
    many commands on one robot builds it once): the same seed, the same robots."""
    global _JOB
    _JOB = job
    workers = max(1, min(workers or os.cpu_count() or 1, n))
    t0 = time.monotonic()
    try:
        rollouts = _run_all(n, workers, progress)
    finally:
        _JOB = None
    return Prediction(sorted(rollouts, key=lambda r: r.index), job.variation, workers, time.monotonic() - t0,
                      None if planned_travel_m is None else np.asarray(planned_travel_m, dtype=np.float64)[:2])


def _run_all(n: int, workers: int, progress) -> list[Rollout]:
    if workers == 1:
        out = []
        for i in range(n):
            out.append(_rollout(i))
            if progress is not None:
                progress(len(out), n)
        return out
    # fork: the workers inherit the compiled model and the commands (nothing pickled); none of this
    # process's threads run in them, and the planner starts none
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("fork"),
                               initializer=_worker_start, initargs=(os.getpid(),))
    out: list[Rollout] = []
    try:
        for f in as_completed([pool.submit(_rollout, i) for i in range(n)]):
            out.append(f.result())
            if progress is not None:
                progress(len(out), n)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return out


def _worker_start(parent: int) -> None:
    # Ctrl-C is the parent's to handle (it cancels the rest); a worker ends with its parent
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if die_with_parent(signal.SIGKILL, parent):
        os._exit(0)


def _varied(job: RolloutJob, rng: np.random.Generator) -> PhysicsModel:
    """A copy of the model with this rollout's servos, masses and floor."""
    v = job.variation
    m = copy.copy(job.pm.model)
    act = job.pm.ctrl_of_joint
    kp = m.actuator_gainprm[act, 0] * rng.uniform(1 - v.stiffness, 1 + v.stiffness, len(act))
    m.actuator_gainprm[act, 0] = kp
    m.actuator_biasprm[act, 1] = -kp
    scale = rng.uniform(1 - v.mass, 1 + v.mass, m.nbody)
    scale[0] = 1.0   # the world
    m.body_mass[:] = m.body_mass * scale
    m.body_inertia[:] = m.body_inertia * scale[:, None]
    m.geom_friction[:, 0] = rng.uniform(*v.friction)
    return replace(job.pm, model=m)


def _rollout(i: int) -> Rollout:
    job = _JOB
    rng = np.random.default_rng([job.seed, i])
    latency = float(rng.uniform(*job.variation.latency_s))
    pm = _varied(job, rng)
    plant = PhysicsPlant(pm)
    on = np.ones(plant.n, dtype=bool)
    home = plant.q.copy()
    now = 0.0

    def step_to(t_cmd: float, q: np.ndarray) -> None:
        nonlocal now
        plant.advance(t_cmd + latency)   # what was commanded before reaches the servos `latency` late
        plant.drive(q, on)
        now = t_cmd

    dt = job.dt
    while now < STAND_RELEASE_S + STAND_AFTER_RELEASE_S:
        step_to(now + dt, home)
    q = plant.q.copy()   # ramp in from the measured pose, as the loop does
    first = job.q_cmd[0]
    while np.abs(first - q).max() > 1e-4 and plant.fell_at is None and now < 60.0:
        q = q + np.clip(first - q, -job.ramp_speed * dt, job.ramp_speed * dt)
        step_to(now + dt, q)
    start, xy0 = now, plant.d.qpos[0:2].copy()
    for q in job.q_cmd:
        if plant.fell_at is not None:
            break
        step_to(now + dt, q)
    xy1 = plant.d.qpos[0:2].copy()
    end = now + HOLD_AT_END_S
    while now < end and plant.fell_at is None:
        step_to(now + dt, job.q_cmd[-1])
    fell_at = None if plant.fell_at is None else plant.fell_at - start
    return Rollout(i, plant.fell_at is not None, fell_at, plant.max_tilt_deg if plant.fell_at is None
                   else max(plant.max_tilt_deg, FALL_TILT_DEG), xy1 - xy0)


def refuse_if_it_falls(pred: Prediction, max_share: float, what: str, tried: str = "") -> None:
    """A plan that falls in more than `max_share` of its rollouts does not run; `tried` says what
    slower plans fell too."""
    if pred.fall_share > max_share + 1e-12:
        slow = "Shorten its steps" if tried else "Slow it (--speed 0.5), shorten its steps"
        raise InputError(f"{what}: falls in {pred.fell} of {len(pred.rollouts)} rollouts "
                         f"({100 * pred.fall_share:.0f} %, more than the {100 * max_share:g} % allowed"
                         + (f"; {tried}" if tried else "") + f"): not run. {slow}, or allow more "
                         "(--predict-falls PCT)")


def max_fall_share(pct: float | None) -> float:
    """--predict-falls PCT, checked, as a share."""
    if pct is None:
        return DEFAULT_MAX_FALL_SHARE
    if not (0.0 <= pct <= 100.0):   # also NaN
        raise InputError(f"--predict-falls {pct:g}: a percentage of the rollouts, 0 … 100 (e.g. 10)")
    return pct / 100.0

