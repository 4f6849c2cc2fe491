"""Motion sources for the loop: each gives the joint target (radians) for the motion's own time.

The loop owns the clock: a motion's time runs only while the robot is enabled, ramped in, and no
safety check holds the command. So a held or paused trajectory resumes where it stopped instead of
jumping ahead.
"""

from __future__ import annotations

import math
import time

import numpy as np

from hil.errors import InputError, UnreachableError
from hil.inputs import load_npz
from hil.motion import contacts, progress, rocking
from hil.motion.bounds import MAX_SAMPLES, check_count, check_duration
from hil.motion.keyframes import load_motion
from hil.motion.limits import check_limits
from hil.motion.plan_check import check_commands, check_plan
from hil.motion.torques import torque_plan
from hil.motion.walking import WalkParams, check_walk
from hil.robots.servos import servo_table
from hil.runtime.leader import LOST, READING, STALE_S, LeaderBlock


class MotionSource:
    """Base class. `reset(q_now)` at (re)start, `target(t)` per cycle, `duration` (inf if open).
    `failure`: why a motion that streams from elsewhere can go on no more (the loop then stops)."""

    name = "motion"
    duration = math.inf
    failure: str | None = None

    def attach(self, model, say) -> None:
        """The loop's robot (its ranges narrowed to the servos') and its way of saying things."""

    def reset(self, q_now: np.ndarray) -> None:
        pass

    def target(self, t: float) -> np.ndarray:
        raise NotImplementedError

    def done(self, t: float) -> bool:
        return t >= self.duration

    def support_at(self, t: float) -> int:
        """The feet the motion stands on at t, as `contacts` codes (recorded per cycle); UNKNOWN
        for motions that do not say."""
        return contacts.UNKNOWN

    def plan_target(self, t: float) -> np.ndarray:
        """Where the joints should be at t (the target less any compliance compensation)."""
        return self.target(t)

    def sag_at(self, t: float) -> np.ndarray | None:
        """The compliance compensation inside the target at t (None: there is none): the loop's
        balance check also judges the pose the loaded servos reach, the target less this."""
        return None


class Hold(MotionSource):
    """Stay at the pose the robot was in when the motion started (the default). Jogs do not need a
    motion of their own: the controller follows them whatever the motion (`hil ctl jog`)."""

    name = "hold"

    def __init__(self) -> None:
        self.q = None

    def reset(self, q_now: np.ndarray) -> None:
        self.q = q_now.copy()

    def target(self, t: float) -> np.ndarray:
        return self.q


class Demo(MotionSource):
    """A gentle sine on a few joints around the start pose (dry-run demonstration)."""

    name = "demo"

    def __init__(self, model, amplitude_deg: float = 12.0, period_s: float = 4.0) -> None:
        self.model = model
        self.amp = np.zeros(model.n)
        names = model.joint_names
        moving = [j for j in ("waist", "shoulder", "elbow", "wrist_bend", "l_shoulder_pitch", "r_shoulder_pitch",
                              "l_elbow", "r_elbow", "head_yaw") if j in names]
        for j in moving:
            self.amp[names.index(j)] = math.radians(amplitude_deg)
        self.period = period_s
        self.q0 = None

    def reset(self, q_now: np.ndarray) -> None:
        # centre the swing so that it stays inside the ranges
        m = self.model
        self.q0 = np.clip(q_now, m.lower + self.amp, m.upper - self.amp)

    def target(self, t: float) -> np.ndarray:
        # starts at zero velocity: a smooth ramp of the amplitude over the first period
        s = min(1.0, t / self.period)
        env = s * s * (3 - 2 * s)
        # scalars first, then one array product and one in-place sum: this runs every cycle
        q = self.amp * (env * math.sin(2 * math.pi * t / self.period))
        q += self.q0
        return q


class Trajectory(MotionSource):
    """Joint samples q (N, n) at times t (N,), linearly interpolated; starts at q[0]."""

    name = "trajectory"

    dynamic_balance_checked = False
    balance_checked_by = "zmp"   # or "physics": rolled out when loaded (a rocking walk)

    def __init__(self, t: np.ndarray, q: np.ndarray, name: str = "trajectory") -> None:
        t = np.asarray(t, dtype=np.float64)
        q = np.asarray(q, dtype=np.float64)
        if t.ndim != 1 or q.ndim != 2 or q.shape[0] != t.shape[0] or t.shape[0] < 1:
            raise InputError(f"trajectory needs t (N,) and q (N, n); got {t.shape} and {q.shape}")
        if not np.all(np.isfinite(t)) or not np.all(np.isfinite(q)):
            raise InputError("trajectory contains NaN or inf")
        if np.any(np.diff(t) < 0):
            raise InputError("trajectory times must not decrease")
        self.t = t - t[0]
        self.q = q
        self.duration = float(self.t[-1])
        self.name = name
        self.support: np.ndarray | None = None   # per sample what touches the ground (a walk's; hil.motion.contacts)
        self.note = ""                          # what was done to it to make it followable (said at start)
        self.time_scale = 1.0                   # how much slower than written it runs (keyframe motions)
        self.q_plan = self.q                    # where the joints should be (q: what the servos are told)
        self.torques = None                     # hil.motion.torques.TorquePlan, where computed

    @classmethod
    def load(cls, path: str, model=None, speed: float = 1.0, servo=None) -> "Trajectory":
        """A trajectory file (t, q), played at `speed` (its times divided by it; a file's own
        compensated commands are then dropped, to be planned again at that pace). A file's claim
        that its balance was checked dynamically (`dynamic_balance_checked`, from `hil walk`) is
        not trusted: with the `support` array beside it the ZMP is computed again from the joint
        motion as it will run (`model` needed), and without it the static balance check applies.
        `servo`: the servos that run it (default the robot's own), which bound a compensation."""
        f = load_npz(path, "trajectory file")
        try:
            traj = cls(f["t"], f["q"], name=path)
            claim = "dynamic_balance_checked" in f and bool(np.asarray(f["dynamic_balance_checked"]).reshape(-1)[:1].all())
            in_physics = "balance_checked_in_physics" in f and bool(
                np.asarray(f["balance_checked_in_physics"]).reshape(-1)[:1].all())
            support = np.asarray(f["support"]) if "support" in f else None
            q_plan = np.asarray(f["q_plan"], dtype=np.float64) if "q_plan" in f else None
        except (KeyError, ValueError, TypeError) as e:
            raise InputError(f"{path}: not a trajectory file with arrays t (N,) and q (N, n): {e}") from None
        check_count(len(traj.t), MAX_SAMPLES, "samples", path, "split it into several files run one after another")
        check_duration(traj.duration, path)
        if model is not None and traj.q.shape[1] != model.n:
            raise InputError(f"{path}: trajectory has {traj.q.shape[1]} joints, {model.name} has {model.n}")
        if q_plan is not None:
            traj.q_plan = _checked_plan(model, traj.q, q_plan, path, servo)
        if speed != 1.0:
            check_duration(traj.duration / speed, f"{path} at --speed {speed:g}",
                           "play it faster, or split it into several files")
            traj.t = traj.t / speed
            traj.duration = float(traj.t[-1])
            traj.q = traj.q_plan   # the compensation belongs to the written pace: planned again
            traj.note = f"played at {100 * speed:.0f} % of its written speed (--speed)"
        if claim and support is not None and model is not None:
            traj.dynamic_balance_checked = verify_dynamic_balance(model, traj, support, path)
        elif in_physics and model is not None:
            traj.dynamic_balance_checked = verify_in_physics(model, traj, path, servo)
            traj.balance_checked_by = "physics"
        if support is not None and support.shape == traj.t.shape and np.all(contacts.is_valid(support)):
            traj.support = support.astype(np.int64)
        return traj

    @property
    def start(self) -> np.ndarray:
        return self.q[0]

    def support_at(self, t: float) -> int:
        if self.support is None:
            return contacts.UNKNOWN
        k = min(max(int(np.searchsorted(self.t, t, side="right")) - 1, 0), len(self.t) - 1)
        return int(self.support[k])

    def target(self, t: float) -> np.ndarray:
        return self._at(self.q, t)

    def plan_target(self, t: float) -> np.ndarray:
        return self._at(self.q_plan, t)

    def sag_at(self, t: float) -> np.ndarray | None:
        return None if self.q_plan is self.q else self.target(t) - self.plan_target(t)

    def _at(self, Q: np.ndarray, t: float) -> np.ndarray:
        if t <= 0.0:
            return Q[0]
        if t >= self.duration:
            return Q[-1]
        k = int(np.searchsorted(self.t, t, side="right")) - 1
        t0, t1 = self.t[k], self.t[k + 1]
        a = (t - t0) / (t1 - t0) if t1 > t0 else 1.0
        return Q[k] + a * (Q[k + 1] - Q[k])


def _checked_plan(model, q: np.ndarray, q_plan: np.ndarray, where: str, servo=None) -> np.ndarray:
    """A trajectory file's plan beside its commands: the commands may differ from it by no more
    than a compliance compensation can (its margin × torque limit / stiffness per joint, of
    `servo`: the servos that run it, default the robot's own)."""
    if not np.all(np.isfinite(q_plan)) or q_plan.shape != q.shape:
        raise InputError(f"{where}: q_plan must be finite and of q's shape {q.shape}, got {q_plan.shape}")
    if model is None:
        return q_plan
    servo = servo or servo_table(model)
    bound = servo.column("compensation_margin") * servo.column("torque_limit_nm") / servo.column("kp_nm_per_rad") + 1e-9
    over = np.abs(q - q_plan) > bound
    if over.any():
        k, j = np.argwhere(over)[0]
        raise InputError(f"{where}: q differs from q_plan by {np.degrees(abs(q[k, j] - q_plan[k, j])):.2f}° at "
                         f"sample {k} ({model.joint_names[j]}): more than a compliance compensation can "
                         f"({np.degrees(bound[j]):.2f}°); q is what the servos are told, q_plan where the joints go")
    return q_plan


def verify_in_physics(model, traj: Trajectory, where: str, servo=None) -> bool:
    """Roll a walk whose file says physics checked its balance (a rocking walk: hil.motion.rocking)
    out in physics again, as its planner did; True when none falls, InputError naming the file else."""
    dt = np.diff(traj.t)
    if len(traj.t) < 3 or dt.min() <= 0 or dt.max() - dt.min() > 1e-9 * max(1.0, dt.max()):
        raise InputError(f"{where}: a walk checked in physics has evenly spaced samples")
    try:
        # on one core: `hil ctl play` loads a walk beside a running loop, whose port process and
        # emulator keep the other
        rocking.rolled_out(model, traj.t, traj.q, rocking.ROLLOUTS, servo, 1.0 / float(dt[0]), workers=1)
    except UnreachableError as e:
        raise InputError(f"{where}: the file says physics checked its balance; checked again: {e}") from None
    return True


def verify_dynamic_balance(model, traj: Trajectory, support: np.ndarray, where: str) -> bool:
    """Recompute a walk's ZMP from its joint motion and support annotation; True when it stays
    inside the support polygon throughout, InputError naming the first place it does not."""

    t, Q = traj.t, traj.q_plan   # where the joints go (the commands carry the compensation)
    if support.shape != t.shape or len(t) < 3 or not np.all(contacts.is_valid(support)):
        raise InputError(f"{where}: 'support' must hold a support code (0 both, 1 left, 2 right, or one of "
                         f"hil.motion.contacts' for a foot on its toe or heel) for each of the {len(t)} samples")
    dt = np.diff(t)
    if dt.min() <= 0 or dt.max() - dt.min() > 1e-9 * max(1.0, dt.max()):
        raise InputError(f"{where}: a walk's samples must be evenly spaced in time")
    if not model.floating:
        raise InputError(f"{where}: a walk's balance can only be checked for a humanoid ({model.name} is an {model.kind})")
    hl, hw = model.sole_half
    res = check_walk(model, t, Q, support, np.zeros((len(t), 2)), WalkParams(rate_hz=1.0 / dt[0]), hl, hw, 0.0,
                     where)
    k = int(np.argmin(res.margin))
    if not res.margin[k] >= 0:
        raise InputError(f"{where}: refused: recomputed from its joint motion, the ZMP leaves the support polygon "
                         f"by {-1e3 * res.margin[k]:.1f} mm at t = {t[k]:.3f} s (the file says it was checked)")
    return True


def _compensate(traj: Trajectory, model, servo, compensate: bool, refuse: bool = True):
    """Plan the trajectory's torques and give it the compensated commands (a file that already
    carries them, with q_plan, keeps its own); with `refuse`, InputError when they are more than its
    servos give. Returns the TorquePlan."""
    if len(traj.t) < 3:
        return None
    servo = servo or servo_table(model)
    support = traj.support if traj.support is not None and np.all(contacts.is_valid(traj.support)) \
        else np.zeros(len(traj.t), dtype=np.int64)
    tp = torque_plan(model, traj.t, traj.q_plan, support, servo, compensate and traj.q_plan is traj.q)
    if tp.over() and refuse:
        raise InputError(tp.refusal(traj.name) + "; slow it down or lighten the load")
    traj.torques = tp
    if tp.compensated:
        traj.q = tp.q_cmd
    return tp


def _keyframe_motion(spec: str, model, servo, compensate: bool, speed: float = 1.0,
                     strict: bool = False) -> Trajectory:
    """A keyframe motion sampled at the robot's rate at `speed` of its written pace, slowed further
    (its keyframe times stretched) until the joints' speed, acceleration and torque limits hold —
    or, `strict`, refused where they do not — its torques planned and compensated."""
    motion = load_motion(spec, model)
    rate = model.default_rate_hz
    k = 1.0 / speed
    check_duration(motion.duration * k, f"{spec} at --speed {speed:g}" if speed != 1.0 else spec,
                   "play it faster, or split it into several files")
    note = f"played at {100 * speed:.0f} % of its written speed (--speed)" if speed != 1.0 else ""
    progress.report("sampling the keyframes")
    t, q = (motion.time_scaled(k) if k != 1.0 else motion).trajectory(rate)
    report = check_limits(model, t, q)
    if report.time_scale > 1.0:   # slower until the joints' speed and acceleration limits hold
        if strict:
            raise InputError(f"{spec}: refused (--strict): the joints cannot follow it at "
                             f"{100 * speed:.0f} % of its written speed: {report.worst}")
        k *= report.time_scale * 1.01
        note = f"slowed to {100 / k:.0f} % of its written speed: {report.worst}"
        check_duration(motion.duration * k, f"{spec}, {note}", "write it slower, or split it into several files")
    for attempt in range(8):      # and until its servos give the torques it needs
        scaled = motion.time_scaled(k) if k != 1.0 else motion
        t, q = scaled.trajectory(rate)
        traj = Trajectory(t, q, name=motion.name)
        traj.note, traj.time_scale = note, k
        traj.support = scaled.support_codes(t)
        progress.report("the servos' torques" + (f" (slowed, try {attempt + 1})" if attempt else ""))
        tp = _compensate(traj, model, servo, compensate, refuse=attempt == 7 or strict)
        if tp is None or not tp.over():
            break
        _, j, tau, avail = tp.worst()
        k *= 1.15
        note = (f"slowed to {100 / k:.0f} % of its written speed: {model.joint_names[j]} needs {tau:.2f} N·m, its "
                f"servo gives {avail:.2f} at that speed")
        check_duration(motion.duration * k, f"{spec}, {note}", "lighten the load, or write it slower in several files")
    if motion.dynamic:
        scaled.check_dynamic(model, rate)  # the ZMP computed back from this very motion
        traj.dynamic_balance_checked = True
    progress.report("checking every sample as the loop will")
    check_plan(model, traj.t, traj.q_plan, static_balance=not motion.dynamic, where=spec)
    check_commands(model, traj.t, traj.q, traj.torques, static_balance=not motion.dynamic, where=spec,
                   q_plan=traj.q_plan)
    return traj


def past_travel(motion: MotionSource, robot, narrowed, where: str) -> str:
    """What a motion of finite length asks past a board config's narrower limits (`narrowed`: the
    robot within the config, hil.board_config.within_config): a note naming each joint, how far
    it is asked and where its servo's travel ends (the loop holds it there), or ''."""
    if narrowed is robot or not math.isfinite(motion.duration):
        return ""
    motion.reset(robot.home.copy())
    Q = np.array([motion.target(t) for t in np.arange(0.0, motion.duration + 0.02, 0.02)])
    over = []
    for i, name in enumerate(robot.joint_names):
        for asked, end in ((Q[:, i].max(), narrowed.upper[i]), (Q[:, i].min(), narrowed.lower[i])):
            if abs(asked - np.clip(asked, narrowed.lower[i], narrowed.upper[i])) > 1e-9:
                over.append(f"{name} to {math.degrees(asked):+.1f}° (its servo's travel ends at "
                            f"{math.degrees(end):+.1f}°)")
    if not over:
        return ""
    return (f"the motion asks past this kit's servo travel ({where}): {'; '.join(over)}; held at those ends "
            "(safety: joint limit)")


class Follow(MotionSource):
    """A leader arm's pose, read each cycle from its block (`hil.runtime.leader`): the follower's
    target, clamped to the follower's ranges (said once per excursion, never sent past them). A
    leader lost (its port gone, its servos silent, its reader stalled) ends the motion with
    `failure`; until then the target stays where the leader last was."""

    name = "teleop"

    def __init__(self, path: str, model) -> None:
        self.block = LeaderBlock(path, model.n)
        self.names = model.joint_names
        self.lower, self.upper = model.lower.copy(), model.upper.copy()
        self.say = lambda text: None
        self.q = model.home.copy()
        self.outside = np.zeros(model.n, dtype=bool)
        self.heard: float | None = None   # when the last whole, fresh reading came (monotonic s)

    def attach(self, model, say) -> None:
        self.lower, self.upper = model.lower.copy(), model.upper.copy()
        self.say = say

    def reset(self, q_now: np.ndarray) -> None:
        self.q = q_now.copy()

    def target(self, t: float) -> np.ndarray:
        got = self.block.read()   # None now and then: the leader was writing (its next reading comes)
        now = time.monotonic()
        if got is not None and got[1] == READING and got[0] < STALE_S:
            self.heard = now
            self._take(got[2])
        elif self.heard is not None and self.failure is None:
            if got is not None and got[1] == LOST:
                self.failure = f"leader lost: {self.block.why()}"
            elif now - self.heard > STALE_S:
                self.failure = f"leader lost: no reading from the leader for {STALE_S:g} s (its reader stalled or died)"
        return self.q

    SAY_PAST_RAD = math.radians(0.5)   # a leader this far past a range is said (a tick or two is not)

    def _take(self, leader: np.ndarray) -> None:
        q = np.clip(leader, self.lower, self.upper)
        out = np.abs(q - leader) > self.SAY_PAST_RAD
        for k in np.flatnonzero(out & ~self.outside):
            end = self.upper[k] if leader[k] > self.upper[k] else self.lower[k]
            self.say(f"teleop: the leader's {self.names[k]} at {math.degrees(leader[k]):+.1f}° is past the "
                     f"follower's range; held at {math.degrees(end):+.1f}° until it comes back")
        self.outside = out
        self.q = q


def make_motion(spec: str | None, model, servo=None, compensate: bool = True, speed: float = 1.0,
                strict: bool = False) -> MotionSource:
    """From the CLI's --motion: hold (default), jog, demo, or a trajectory .npz file (t, q). Planned
    motions are checked against the servos' torques (`servo`, default the robot's) and carry the
    compliance compensation (`compensate`, where the servos declare a stiffness). A motion file or
    trajectory runs at `speed` (0 < f ≤ 1) of its written pace; a keyframe motion the joints
    cannot follow is slowed further, or refused with `strict` (a trajectory always is)."""
    if not spec or spec in ("hold", "jog"):  # "jog": older name; jogs are followed whatever the motion
        return Hold()
    if spec.startswith("follow:"):   # a leader arm's block (hil teleop)
        return Follow(spec.removeprefix("follow:"), model)
    if spec == "demo":
        return Demo(model)
    if spec.endswith(".npz"):
        traj = Trajectory.load(spec, model, speed, servo)
        if traj.q.shape[1] != model.n:
            raise InputError(f"{spec}: trajectory has {traj.q.shape[1]} joints, {model.name} has {model.n}")
        # samples at given times: not ours to slow down; refused wherever a check fails
        static = not traj.dynamic_balance_checked
        check_plan(model, traj.t, traj.q_plan, static_balance=static, where=spec)
        tp = _compensate(traj, model, servo, compensate)
        check_commands(model, traj.t, traj.q, tp, static_balance=static, where=spec, q_plan=traj.q_plan)
        return traj
    if spec.endswith((".toml", ".json")):
        return _keyframe_motion(spec, model, servo, compensate, speed, strict)
    raise InputError(f"unknown --motion {spec!r}: use hold, jog, demo, a motion file (.toml/.json) or a "
                     "trajectory .npz (t, q)")
