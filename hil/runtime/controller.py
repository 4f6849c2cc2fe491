"""One control cycle as a plain object: a measured state and the user's requests in, the board
command, board actions and event lines out. No process, port, clock or shared memory: the loop
process (`hil.runtime.loop`) wires this to them, and the tests drive it directly.

Per cycle (`Controller.cycle`):
1. the newest STATE, if it is newer than the last event that needs a fresh one, becomes a board
   observation for the lifecycle (ENABLED, DISABLED, FAULT, ESTOP);
2. missed deadlines in a row become holds or a disable;
3. enabled: the target (hold, jog or the motion at its own time), then one safety call that
   clamps, rate-limits (the ramp speed while ramping) and holds with a named reason;
4. the command: positions while enabled, a keep-alive hold otherwise (the board answers every
   command with a STATE and applies none of these), nothing while disconnected.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from firmware_protocol.messages import BoardState, JointFlag, fault_names
from hil.runtime.balance import BalanceWatch, Stabiliser
from hil.runtime.lifecycle import (ACTIVE, DISABLED, DISCONNECTED, ENABLED_MODES, ENABLING, ESTOP, FAULT, HELD, HOLD_OVERRUN, HOLD_SAFETY, JOG, MOTION, RAMPING, Action, Ev, Lifecycle, Step)
from hil.runtime.stall import StallWatch
from hil.safety import HELD as HELD_FLAG
from hil.safety import LIMIT as LIMIT_FLAG
from hil.safety import I_STEP, I_TO_TARGET, I_TRACK, RATE, flag_names

BOARD_STATE_EVENT = {1: Ev.SAW_DISABLED, 0: Ev.SAW_DISABLED, 2: Ev.SAW_ENABLED, 3: Ev.SAW_FAULT,
                     4: Ev.SAW_ESTOP}
RAMP_DONE_RAD = 1e-4
# what moves the robot toward safety without a user asking: a run in which one happens did not go as
# asked, and ends with a non-zero exit code saying which and when
INCIDENTS = frozenset({Ev.SAW_FAULT, Ev.SAW_ESTOP, Ev.LINK_LOST, Ev.OVERRUN_DISABLE, Ev.FELL, Ev.REBOOT,
                       Ev.ENABLE_FAILED, Ev.ENABLE_TIMEOUT, Ev.STALL})
NO_ACTIONS: list = []  # shared by the cycles that have none (never appended to)
# a board action repeated because the board has not followed (e-stop or disable again) waits this long
RESEND_S = 0.1
ENABLE_SETTLE_S = 0.1   # after the ENABLE's answer, how long a DISABLED STATE may still be one sent before it


@dataclass(frozen=True)
class Policy:
    """The cycle's settings (from LoopConfig)."""

    period_s: float
    ramp_fraction: float = 0.25
    hold_after_misses: int = 5
    disable_after_misses: int = 50
    enable_timeout_s: float = 2.0
    hold_timeout_s: float | None = None  # held longer than this forgets intent (headless runs)
    bring_in: bool = False               # a joint measured outside its range is enabled and brought in


@dataclass
class Output:
    """What one cycle decided. `command` is the array to send (positions, or a keep-alive hold when
    `hold` is true), or None to send nothing."""

    command: np.ndarray | None
    hold: bool
    actions: list[Action] = field(default_factory=list)
    flags: int = 0


# a joint measured this far outside its range (noise, a hard stop just past the limit) still enables
OUTSIDE_TOLERANCE_RAD = math.radians(1.0)
# --bring-in moves a joint standing at most this far outside its range; one that reads further out
# more likely has a wrong zero (a zero across an encoder's wrap reads about ±180°): not moved
BRING_IN_MAX_RAD = math.radians(30.0)


class Controller:
    """The per-cycle decision for one robot: lifecycle + motion + safety."""

    def __init__(self, model, safety, motion, policy: Policy, event=None, stabilise: bool = True,
                 stall: StallWatch | None = None) -> None:
        self.model = model
        self.stall = stall
        self.current_mA = np.zeros(model.n)
        self.qd_meas = np.zeros(model.n)
        self.balance = BalanceWatch(model)
        self.stabiliser = Stabiliser(model) if stabilise else None
        self.imu = None
        self.safety = safety
        self.motion = motion
        self.policy = policy
        self.life = Lifecycle()
        self.say = event or (lambda text: None)
        self.jog_note = ""
        self.q_cmd = model.home.copy()
        self.q_prev = self.q_cmd.copy()
        self.q_target = self.q_cmd.copy()
        self.q_meas = self.q_cmd.copy()
        self.jog_target = self.q_cmd.copy()
        self.ramp_from = self.q_cmd.copy()   # where the current ramp-in started
        self.held_sag: np.ndarray | None = None  # the compliance compensation in the command (`_ramped`)
        self.motion_t = 0.0
        self.flags = 0
        self._held_flags = 0
        self._fresh_after = math.inf  # only STATEs received after this time are observations
        self._have_state = False
        self._since: float | None = None  # when the current mode began (cycle time)
        self._last_resend = -math.inf
        self.abandoned: str | None = None  # why a motion asked for can no longer finish
        self.now = 0.0
        self.max_track_err = 0.0
        self.max_cmd_speed = 0.0
        self._max_step = 0.0
        self.safety_counts: dict[str, int] = {}
        self.safety_total = 0
        self.pending_actions: list[Action] = []
        # what moved the robot toward safety by itself (not a request taken from the mailbox in its
        # turn) since the loop last dropped the requests posted before it: see `handle`
        self.overtaken_by = ""
        self.incidents: list[tuple[float, str]] = []   # (cycle time, what) of each INCIDENTS step
        self.motion_run = False   # the run is for a motion (`--exit-when-done`): is it finished?
        self.motion_done = False
        self.board_state = 1
        self._last_board_us = -1
        self._seen_state = -1       # the board state and mode the lifecycle last judged together
        self._seen_mode = None
        self._observe_again = False
        self._out = Output(None, True)

    # ------------------------------------------------------------------ events in
    def handle(self, ev: Ev, payload=None, start_after: bool = False, why: str = "", queued: bool = False) -> Step:
        """Feed one event (a request, a completion, a link event); returns the lifecycle's step.
        `queued`: a request taken from the mailbox in its turn. Any other event that takes the
        robot to DISABLED, FAULT, ESTOP or DISCONNECTED sets `overtaken_by`: the requests still
        waiting in the mailbox were made before it, by a user who had not seen it."""
        refused = self._check_jog(payload) if ev == Ev.JOG else self._check_enable() if ev == Ev.ENABLE else ""
        if refused:
            self.say(f"{ev.value} refused: {refused}")
            mode = self.life.mode
            return Step(ev, mode, mode, self.life.activity, actions=(), cleared=False, refused=refused)
        step = self.life.handle(ev, start_after)
        self._after(step, payload, why)
        if not queued and step.mode != step.before and step.mode in (DISABLED, FAULT, ESTOP, DISCONNECTED):
            self.overtaken_by = step.event.value
        return step

    def _check_jog(self, payload) -> str:
        """Why a jog target is refused ("" when it is not): not n finite angles, or a pose the
        loop's own checks would hold (collision, balance, workspace, floor). Angles beyond a joint's
        range are clamped to it, said in `jog_note`."""
        self.jog_note = ""
        q = np.asarray(payload, dtype=np.float64)
        if q.shape != (self.model.n,) or not np.all(np.isfinite(q)):
            return f"{self.model.n} finite joint angles needed"
        clamped = np.clip(q, self.model.lower, self.model.upper)
        verdict = self.safety.check(clamped)
        if verdict.flags & ~LIMIT_FLAG:
            return "; ".join(r for r in verdict.reasons if not r.startswith("joint limit")) + " (at the target)"
        if np.any(clamped != q):
            self.jog_note = "clamped to the joint ranges: " + "; ".join(self.model.limit_violations(q))
        return ""

    def _check_enable(self) -> str:
        """Why torque may not come on ("" when it may): a joint measured outside its range. Enabled
        there, the board's clamp (or a servo's own limit) would send it to the end of its range at
        once — a jump; a reading across an encoder's wrap looks the same."""
        if not self._have_state:
            return ""
        q, m = self.q_meas, self.model
        out = np.flatnonzero((q < m.lower - OUTSIDE_TOLERANCE_RAD) | (q > m.upper + OUTSIDE_TOLERANCE_RAD))
        if not len(out):
            return ""
        joints = "; ".join(f"{m.joint_names[j]} reads {math.degrees(q[j]):+.1f}°, outside "
                           f"{math.degrees(m.lower[j]):.0f}…{math.degrees(m.upper[j]):.0f}°" for j in out)
        far = [j for j in out if min(abs(q[j] - m.lower[j]), abs(q[j] - m.upper[j])) > BRING_IN_MAX_RAD]
        if self.policy.bring_in and not far:
            speed = math.degrees(float(np.min(m.velocity_limit[out]))) * self.policy.ramp_fraction
            self.say(f"bringing in from where {'it stands' if len(out) == 1 else 'they stand'} (--bring-in), "
                     f"at up to {speed:.0f}°/s: {joints}")
            return ""
        return (f"{joints}. Move {'it' if len(out) == 1 else 'them'} into range by hand (torque is off), or, if the "
                "reading is wrong (a zero set across the encoder's wrap reads about ±180°), run `hil calibrate`"
                + ("; --bring-in moves it in slowly from where it stands" if not far else
                   f"; --bring-in takes a joint no more than {math.degrees(BRING_IN_MAX_RAD):.0f}° outside (a reading "
                   "further out is more likely a wrong zero than a joint standing there)"))

    def link_lost(self, why: str) -> Step:
        self._have_state = False
        self._fresh_after = math.inf  # nothing from before the loss is a measurement any more
        return self.handle(Ev.LINK_LOST, why=why)

    def reconnected(self, at: float) -> Step:
        """The link is back: nothing is observed or commanded before a STATE received after `at`."""
        self._fresh_after = at
        self._have_state = False
        self._last_board_us = -1
        return self.handle(Ev.RECONNECTED)

    def _after(self, step: Step, payload, why: str) -> None:
        if step.refused:
            self.say(f"{step.event.value} refused: {step.refused}")
            return
        if step.mode != step.before:
            self._since = None  # the cycle that sees the new mode first starts its clock
            if step.mode not in ENABLED_MODES:
                self._held_flags = 0
            if step.before == ENABLING and step.mode == RAMPING:
                np.copyto(self.q_cmd, self.q_meas)  # ramp in from the STATE that said ENABLED
            if step.mode == RAMPING:
                np.copyto(self.ramp_from, self.q_cmd)
                self.held_sag = None
        for action in step.actions:
            if action == Action.SET_JOG:
                self.jog_target = np.asarray(payload, dtype=np.float64).copy()
            elif action == Action.BEGIN_MOTION:
                self.motion.reset(self.q_cmd)
                self.motion_t = 0.0
                self.abandoned = None
        if step.cleared:
            self.motion_t = 0.0
            if self.abandoned is None and self.motion_run and not self.motion_done:
                self.abandoned = f"{step.event.value}{' (' + why + ')' if why else ''}"
        # (a stall holds where the robot stands: an incident without a change of mode)
        if step.event in INCIDENTS and (step.mode != step.before or step.event == Ev.STALL):
            self.incidents.append((self.now, f"{step.event.value}{' (' + why + ')' if why else ''}"))
        quiet = (Ev.SAFETY_HOLD, Ev.SAFETY_RELEASE, Ev.RAMP_DONE)  # said by the cycle, with their reasons
        if step.event not in quiet and (step.mode != step.before or step.cleared):
            parts = [f"{step.before.name} → {step.mode.name}"] if step.mode != step.before else []
            if step.cleared:
                parts.append("intent cleared (the motion stopped, jogs dropped)")
            detail = f" ({why})" if why else ""
            self.say(f"{step.event.value}{detail}: {'; '.join(parts)}")
        board = [a for a in step.actions if a not in (Action.SET_JOG, Action.BEGIN_MOTION)]
        if Action.SEND_ENABLE in board or Action.SEND_CLEAR_FAULT in board:
            # STATEs already under way say what the board was before it got this: observe
            # again only from the first STATE after its answer (`completed`)
            self._fresh_after = math.inf
        elif step.mode != step.before and step.mode in (ESTOP, FAULT, DISABLED) and self._fresh_after == math.inf \
                and self._have_state:
            # toward safety while an enable or a clear was awaited (and may now be dropped unsent):
            # the board's answer no longer matters, its next STATE does
            self._fresh_after = self.now
        self.pending_actions.extend(board)

    def completed(self, action: Action, error: str | None, at: float) -> None:
        """A board transaction ended at `at` (monotonic s): None for success, or what failed."""
        if action in (Action.SEND_ENABLE, Action.SEND_CLEAR_FAULT):
            self._fresh_after = at
        if action == Action.SEND_ENABLE and error:
            self.handle(Ev.ENABLE_FAILED, why=error)
        elif action == Action.SEND_CLEAR_FAULT:
            if error:
                self.say(f"clear fault failed: {error}")
            else:
                self.handle(Ev.CLEARED)
        elif error:
            self.say(f"{action.value} failed: {error}")

    # ------------------------------------------------------------------ the cycle
    def begin(self, q_meas: np.ndarray, motion_run: bool) -> None:
        """Before the first cycle: the first STATE's pose, and whether the run is for a motion."""
        self.q_meas = q_meas.copy()
        np.copyto(self.q_cmd, q_meas)
        self.motion.reset(q_meas)
        self.motion_run = motion_run
        self._fresh_after = -math.inf
        self._have_state = True
        if self.life.mode == DISCONNECTED:
            self.life.handle(Ev.RECONNECTED)  # connected: DISABLED until the board says otherwise

    def cycle(self, now: float, sample, misses_in_row: int) -> Output:
        """One cycle at time `now` (s) with the newest STATE (or None) and the missed deadlines in a
        row; returns the command and the board actions to carry out. (It runs every cycle: the
        common case — same board state, nothing held, nothing missed — takes no event path.)"""
        self.now = now
        life = self.life
        if sample is not None and sample.t_host > self._fresh_after:
            self._have_state = True
            self.q_meas = sample.q
            self.qd_meas = sample.qd
            self.current_mA = sample.current_mA
            imu = getattr(sample, "imu", None)   # (a board with an IMU, the physics emulator's)
            if imu is not None and imu is not self.imu:
                self._watch_balance(imu)
            state = sample.state
            self.board_state = state
            t_board = sample.t_board_us
            if t_board + 1_000_000 < self._last_board_us:  # its clock started again: it was reset
                self.handle(Ev.REBOOT, why="the board's clock went back")
            self._last_board_us = t_board
            if state != self._seen_state or life.mode != self._seen_mode or self._observe_again:
                self._observe(sample)
        if misses_in_row or life.holds:
            self._overruns(misses_in_row)
        mode = life.mode
        if mode == ENABLING and self._mode_age() > self.policy.enable_timeout_s:
            self.handle(Ev.ENABLE_TIMEOUT, why=f"no STATE said ENABLED within {self.policy.enable_timeout_s:g} s")
            mode = life.mode
        self.flags = 0
        out = self._out
        if mode in ENABLED_MODES:
            self._enabled_cycle()
        elif self._have_state and self.board_state != BoardState.ENABLED:
            # follow the measured pose, so the next enable ramps from here (a board still enabled
            # holds its last target meanwhile: that stays the command)
            np.clip(self.q_meas, self.model.lower, self.model.upper, out=self.q_cmd)
            np.copyto(self.q_target, self.q_cmd)
        if self.pending_actions:
            out.actions, self.pending_actions = self.pending_actions, []
        else:
            out.actions = NO_ACTIONS
        out.flags = self.flags
        if not self._have_state or life.mode == DISCONNECTED:
            out.command, out.hold = None, True
        else:
            out.command, out.hold = self.q_cmd, life.mode not in ENABLED_MODES
        return out

    def _watch_balance(self, imu) -> None:
        """A new IMU reading: tilt, travel, and a fall (toward safety, said once)."""
        self.imu = imu
        life = self.life
        support = self.motion.support_at(self.motion_t) if life.activity == MOTION else 3
        if self.balance.update(self.now, imu, self.q_meas, support):
            self.handle(Ev.FELL, why=f"its body tilted {math.degrees(self.balance.tilt):.0f}° from upright")

    def _mode_age(self) -> float:
        """Seconds since the current mode began (0 in the first cycle that sees it)."""
        if self._since is None:
            self._since = self.now
        return self.now - self._since

    def _observe(self, sample) -> None:
        """The lifecycle's view of a STATE whose board state (or our mode) changed since the last one
        seen, or that last time asked for an action again (an e-stop the board has not followed)."""
        ev = BOARD_STATE_EVENT.get(int(sample.state))
        if ev == Ev.SAW_DISABLED and self.life.mode == ENABLING and self.now - self._fresh_after < ENABLE_SETTLE_S:
            # just after the board answered the ENABLE, a STATE it sent before taking it may still
            # arrive: DISABLED then is not a refusal (read so, the README's loop fell back to
            # DISABLED 1 run in 3) unless it lasts; an e-stop or a fault is taken at once
            return
        before = self.life.mode
        step = self.handle(ev, why=_board_why(sample, self.model.joint_names)) if ev is not None else None
        self._seen_state, self._seen_mode = sample.state, self.life.mode
        self._observe_again = bool(step and step.actions)
        if step is None:
            return
        resend = [a for a in step.actions if a in (Action.SEND_ESTOP, Action.SEND_DISABLE)]
        if resend and before == step.mode:
            # the board has not followed yet (frames in flight, or lost): again, but not every cycle
            if self.now - self._last_resend < RESEND_S:
                for a in resend:
                    self.pending_actions.remove(a)
            else:
                self._last_resend = self.now

    def _overruns(self, misses: int) -> None:
        p, life = self.policy, self.life
        if misses > p.disable_after_misses and (life.enabled or life.mode == ENABLING):
            self.handle(Ev.OVERRUN_DISABLE, why=f"{misses} in a row")
        elif misses > p.hold_after_misses and life.enabled:
            if not life.holds & HOLD_OVERRUN:
                self.handle(Ev.OVERRUN_HOLD, why=f"{misses} in a row")
        elif life.holds & HOLD_OVERRUN:
            self.handle(Ev.OVERRUN_RELEASE)

    def _inside(self) -> bool:
        """The command inside every joint's range (a joint brought in from outside is not yet)."""
        m = self.model
        return bool(np.all(self.q_cmd >= m.lower - 1e-9) and np.all(self.q_cmd <= m.upper + 1e-9))

    def _enabled_cycle(self) -> None:
        life, p = self.life, self.policy
        # the compensation the command carries: a motion's, kept while its last command is held
        sag = self.held_sag
        if life.mode == HELD and life.holds & HOLD_OVERRUN:
            q_target = self.q_cmd  # hold where the command is while deadlines are missed
        elif life.activity == MOTION:
            q_target = self.motion.target(self.motion_t)
            sag = self.held_sag = self._ramped(self.motion.sag_at(self.motion_t), q_target)
            if self.stabiliser is not None and self.imu is not None and self.stabiliser.usable:
                t = self.motion_t
                q_target = q_target + self.stabiliser.correction(self.motion.plan_target(t), self.imu,
                                                                 self.motion.support_at(t))
        elif life.activity == JOG:
            q_target = self.jog_target
            sag = self.held_sag = None   # a jog's targets are poses of their own
        else:
            q_target = self.q_cmd
        np.copyto(self.q_prev, self.q_cmd)
        scale = 1.0 if life.mode == ACTIVE else p.ramp_fraction
        flags = self.safety.step(q_target, self.q_prev, p.period_s, scale, self.q_cmd, self.q_meas, sag)
        self.flags = flags
        self.q_target = q_target
        info = self.safety.info
        if flags or self._held_flags or life.mode == HELD:
            self._safety_events(flags, q_target, sag)
        mode = life.mode
        if mode == RAMPING and not flags & HELD_FLAG and info[I_TO_TARGET] < RAMP_DONE_RAD and self._inside():
            self.handle(Ev.RAMP_DONE)
            if life.activity == MOTION and life.mode == ACTIVE:
                self.say(f"ramp-in done; motion '{self.motion.name}' running")
        elif mode == HELD and p.hold_timeout_s is not None and life.has_intent \
                and self._mode_age() > p.hold_timeout_s:
            self.handle(Ev.HOLD_TIMEOUT, why=f"held for more than {p.hold_timeout_s:g} s")
        if life.mode == ACTIVE and life.activity == MOTION:
            self.motion_t += p.period_s
            if self.motion.done(self.motion_t):
                self.handle(Ev.MOTION_DONE)
                self.say(f"motion '{self.motion.name}' done")
                self.motion_done = True
        speed = info[I_STEP]
        if speed > self._max_step:
            self._max_step = speed
            self.max_cmd_speed = float(speed) / p.period_s
        if info[I_TRACK] > self.max_track_err:
            self.max_track_err = float(info[I_TRACK])
        if self.stall is not None:
            self._watch_stall()

    def _ramped(self, sag: np.ndarray | None, q_target: np.ndarray) -> np.ndarray | None:
        """The compliance compensation the command carries so far: while ramping in, each joint's
        share of it grows with the share of its way to the target it has come (the robot stood,
        loaded, where the ramp began); all of it once there. The balance check judges the pose the
        loaded servos reach, the command less this."""
        if sag is None or self.life.mode != RAMPING:
            return sag
        span = q_target - self.ramp_from
        come = self.q_cmd - self.ramp_from   # the command so far: this cycle has not stepped yet
        share = np.ones_like(span)
        np.divide(come, span, out=share, where=np.abs(span) > 1e-9)
        return sag * np.clip(share, 0.0, 1.0)

    def _watch_stall(self) -> None:
        """A joint pushing with (nearly) all its torque, short of its command and not moving: the
        motion stops and that joint's command comes to where it stands (its push ends)."""
        j = self.stall.update(self.q_cmd, self.q_meas, self.qd_meas, self.current_mA)
        if j < 0:
            return
        why = self.stall.describe(j, self.model.joint_names[j], self.q_cmd, self.q_meas, self.current_mA)
        self.q_cmd[j] = self.q_meas[j]
        moving = self.life.has_intent
        self.handle(Ev.STALL, why=why)     # says it when it stops a motion or a jog
        if not moving:
            self.say(f"a joint stalled ({why}): {self.model.joint_names[j]} held where it stands")

    def _safety_events(self, flags: int, q_target: np.ndarray, sag: np.ndarray | None) -> None:
        life = self.life
        if flags & HELD_FLAG:
            if life.mode != HELD or not life.holds & HOLD_SAFETY:
                self.handle(Ev.SAFETY_HOLD)
            if flags != self._held_flags:
                # a range at the target; the pose checks at the step they refused (a ramp's or a
                # rate-limited step stops short of the target, which may pass)
                target = np.ascontiguousarray(q_target, dtype=np.float64)
                reasons = self.safety.explain(flags & LIMIT_FLAG, target) + \
                    self.safety.explain(flags & ~LIMIT_FLAG, self.safety.tried.copy(), sag)
                self.say("safety: " + "; ".join(reasons or flag_names(flags)) + " — command held")
                self._count(flags)
        else:
            if life.mode == HELD and life.holds & HOLD_SAFETY:
                self.handle(Ev.SAFETY_RELEASE)
            if flags & ~RATE and flags != self._held_flags:
                self._count(flags)
                self.say("safety: " + ", ".join(flag_names(flags)) + " — clamped")
        self._held_flags = flags

    def _count(self, flags: int) -> None:
        for name in flag_names(flags):
            self.safety_counts[name] = self.safety_counts.get(name, 0) + 1
            self.safety_total += 1

    # ------------------------------------------------------------------ for displays
    @property
    def motion_progress(self) -> float:
        """0…1 of the motion's duration, or -1 for a motion without an end (demo, jog)."""
        dur = self.motion.duration
        if dur == math.inf:
            return -1.0
        return min(1.0, self.motion_t / dur) if dur > 0 else 0.0


# what a joint's flags in a faulted STATE say happened to it (the fault names the kind, these the joints)
JOINT_TROUBLE = ((JointFlag.STALE, "silent"), (JointFlag.OVERLOAD, "overload"), (JointFlag.OVERTEMP, "overheated"),
                 (JointFlag.VOLTAGE, "supply voltage"), (JointFlag.ENCODER, "encoder"))


def _board_why(sample, joint_names) -> str:
    """The faults of a FAULT or ESTOP state, and each joint whose flags say what happened to it."""
    if not (sample.faults and sample.state in (BoardState.FAULT, BoardState.ESTOP)):
        return ""
    troubles = []
    for name, flags in zip(joint_names, np.asarray(sample.jflags, dtype=np.int64)):
        said = [what for flag, what in JOINT_TROUBLE if flags & flag]
        if said:
            troubles.append(f"{name} {', '.join(said)}")
    return f"faults: {fault_names(sample.faults)}" + (f"; {'; '.join(troubles)}" if troubles else "")
