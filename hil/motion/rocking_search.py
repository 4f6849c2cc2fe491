"""Finding a rocking walk for a kit in physics (`hil walk --find-gait`): the numbers of its side
file's `[walk]` (hil.motion.rocking), searched for the robot at hand.

An open-loop rocking gait is its robot's own: the Open Duck Mini's falls on a stand-in with the
Duck's joints and feet but other masses. So the search is done on the robot's own physics model
(its MJCF's, or the one hil builds from its tables), the way the Duck's was: each candidate gait is
planned (`rocking.pattern`), kept within the joints' ranges, speeds and accelerations, and rolled
out on the same robots varied as `--predict` varies them (the same seed for every candidate, so that
they are compared on equal terms). Its score is how far the worst of them got along their common
way, less what it fell or tilted past `TILT_OK_DEG`. The search is the cross-entropy method: each
generation draws candidates about the best so far, and the best quarter moves and narrows the draw.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np

from hil.motion.limits import check_limits
from hil.motion.rocking import DUCK_LEG_M, RockingGait, gait_of, pattern
from hil.robots.legs import leg_length

TILT_OK_DEG = 15.0        # beyond this the body's tilt costs: 5 mm of travel a degree
TILT_COST_M = 0.005
FALL_COST_M = 0.5         # a fall costs this much travel, for each robot that fell
ELITE = 0.25
DEG = math.pi / 180
# each field's range, angles in radians; times for the Duck's legs (scaled with the legs' length)
RANGES = {"period": (0.4, 1.6), "sway": (-25 * DEG, 25 * DEG), "sway_phase": (-math.pi, math.pi),
          "splay": (-20 * DEG, 20 * DEG), "lift": (0.0, 20 * DEG), "lift_phase": (-math.pi, math.pi),
          "swing": (-20 * DEG, 20 * DEG), "swing_phase": (-math.pi, math.pi), "twist": (-15 * DEG, 15 * DEG),
          "ramp": (0.5, 1.5)}
NAMES = [f.name for f in fields(RockingGait)]


@dataclass
class GaitFound:
    gait: RockingGait
    score_m: float             # the worst robot's travel, less its costs (m)
    start_score_m: float       # the gait the search started from (the robot's own, or the Duck's)
    tried: int


def _bounds(model) -> np.ndarray:
    k = math.sqrt(leg_length(model) / DUCK_LEG_M)
    return np.array([(lo * k, hi * k) if n in ("period", "ramp") else (lo, hi) for n, (lo, hi) in
                     ((n, RANGES[n]) for n in NAMES)])


def _gait(z: np.ndarray, bounds: np.ndarray) -> RockingGait:
    """The candidate at z, its numbers as the [walk] table writes them (4 significant digits, in
    degrees and seconds): the gait scored is the gait printed (a rocking walk can hang on less)."""
    x = bounds[:, 0] + np.clip(z, 0.0, 1.0) * (bounds[:, 1] - bounds[:, 0])
    unit = {n: 1.0 if n in ("period", "ramp") else DEG for n in NAMES}
    return RockingGait(**{n: float(f"{v / unit[n]:.4g}") * unit[n] for n, v in zip(NAMES, x)})


def _unit(gait: RockingGait, bounds: np.ndarray) -> np.ndarray:
    x = np.array([getattr(gait, n) for n in NAMES])
    return np.clip((x - bounds[:, 0]) / (bounds[:, 1] - bounds[:, 0]), 0.0, 1.0)


class _Scorer:
    """A candidate gait's score on the robot's physics model, built once."""

    def __init__(self, model, steps: int, rollouts: int, servo, rate_hz: float, seed: int) -> None:
        from hil.physics import predict   # lazy: MuJoCo and a process pool, for a search only
        from hil.physics.build import build

        self.predict, self.model, self.steps, self.rollouts, self.rate_hz = predict, model, steps, rollouts, rate_hz
        self.pm = build(model, servo)
        self.ramp = np.asarray(model.velocity_limit, dtype=np.float64) * predict.RAMP_FRACTION
        self.seed = seed

    def __call__(self, gait: RockingGait) -> float:
        m = self.model
        t, Q = pattern(m, gait, self.steps, self.rate_hz)
        outside = float(np.maximum(Q - m.upper, 0.0).max() + np.maximum(m.lower - Q, 0.0).max())
        pace = check_limits(m, t, Q).time_scale
        if outside > 0.0 or pace > 1.0:
            return -1.0 - outside - (pace - 1.0)   # out of the joints' reach: worse than any fall
        job = self.predict.RolloutJob(self.pm, Q, 1.0 / self.rate_hz, self.ramp, self.predict.Variation(),
                                      self.seed)
        pred = self.predict.rolled_out(job, self.rollouts)
        ways = np.array([r.travel_m for r in pred.rollouts])
        mean = ways.mean(axis=0)
        along = float((ways @ (mean / np.linalg.norm(mean))).min()) if np.linalg.norm(mean) > 1e-9 else 0.0
        tilt = max(r.max_tilt_deg for r in pred.rollouts)
        return along - FALL_COST_M * pred.fell - TILT_COST_M * max(0.0, tilt - TILT_OK_DEG)


def search(model, steps: int = 6, generations: int = 40, population: int = 16, rollouts: int = 8, servo=None,
           rate_hz: float = 200.0, seed: int = 0, say=print) -> GaitFound:
    """The rocking gait the search finds for `model`, starting from its own (`gait_of`)."""
    score = _Scorer(model, steps, rollouts, servo, rate_hz, seed)
    bounds = _bounds(model)
    start, _ = gait_of(model)
    best_z, best = _unit(start, bounds), score(start)
    start_score = best
    mean, spread = best_z.copy(), np.full(len(NAMES), 0.2)
    rng = np.random.default_rng(seed)
    tried = 1
    for g in range(generations):
        Z = np.clip(mean + spread * rng.standard_normal((population, len(NAMES))), 0.0, 1.0)
        scores = np.array([score(_gait(z, bounds)) for z in Z])
        tried += population
        order = np.argsort(-scores)
        if scores[order[0]] > best:
            best, best_z = float(scores[order[0]]), Z[order[0]].copy()
        elite = Z[order[:max(2, int(ELITE * population))]]
        mean = 0.5 * mean + 0.5 * np.vstack([elite, best_z]).mean(axis=0)
        spread = np.maximum(0.7 * spread + 0.3 * elite.std(axis=0), 0.02)
        say(f"gait search: generation {g + 1} of {generations}: the best so far takes its worst robot "
            f"{100 * best:.1f} cm" if best > -FALL_COST_M / 2 else
            f"gait search: generation {g + 1} of {generations}: no candidate stays up on every robot yet")
    return GaitFound(_gait(best_z, bounds), best, start_score, tried)


def as_table(gait: RockingGait) -> str:
    """The gait as a side file's [walk] table (degrees and seconds)."""
    d = math.degrees
    rows = [("period_s", gait.period), ("ramp_s", gait.ramp), ("sway_deg", d(gait.sway)),
            ("sway_phase_deg", d(gait.sway_phase)), ("splay_deg", d(gait.splay)), ("lift_deg", d(gait.lift)),
            ("lift_phase_deg", d(gait.lift_phase)), ("swing_deg", d(gait.swing)),
            ("swing_phase_deg", d(gait.swing_phase)), ("twist_deg", d(gait.twist))]
    return "[walk]\ngait = \"rocking\"\n" + "".join(f"{k} = {float(f'{v:.4g}'):g}\n" for k, v in rows)

