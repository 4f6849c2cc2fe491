"""The cycle's decisions without a process, a port or a clock: STATEs in, commands and actions out."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest

import hil.robots as robots
from hil.runtime.controller import Controller, Policy
from hil.runtime.lifecycle import ACTIVE, RAMPING, Action, Activity, Ev, Mode
from hil.runtime.motion_sources import Demo, Hold, Trajectory
from hil.runtime.stall import STALL_S, StallWatch
from hil.robots.servos import servo_table
from hil.safety import BALANCE as BALANCE_FLAG, SafetyChecker

T = 0.002
DISABLED, ENABLED, FAULT, ESTOP = 1, 2, 3, 4


@dataclass
class Sample:
    t_host: float
    state: int
    q: np.ndarray
    faults: int = 0
    seq: int = 0
    t_board_us: int = 0
    qd: np.ndarray = field(default_factory=lambda: np.zeros(6))
    current_mA: np.ndarray = field(default_factory=lambda: np.zeros(6))


class Bench:
    """A controller and a pretend board that follows commands exactly."""

    def __init__(self, motion=None, hold_timeout_s=None, stall=False, bring_in=False, robot="puma560") -> None:
        self.model = robots.load(robot)
        self.events: list[str] = []
        self.ctl = Controller(self.model, SafetyChecker(self.model), motion or Hold(),
                              Policy(T, hold_timeout_s=hold_timeout_s, bring_in=bring_in), self.events.append,
                              stall=StallWatch(servo_table(self.model), T) if stall else None)
        self.blocked: int | None = None   # a joint that stops where it is and pushes
        self.load = 0.0                   # its current over its stall current
        self.now = 100.0
        self.q = self.model.home.copy()
        self.state = DISABLED
        self.sent: list[tuple[np.ndarray | None, bool]] = []
        self.actions: list[Action] = []
        self.ctl.begin(self.q, motion_run=motion is not None)

    def cycle(self, misses: int = 0, sample: bool = True):
        self.now += T
        n = self.model.n
        s = Sample(self.now, self.state, self.q.copy(), qd=np.zeros(n), current_mA=np.zeros(n)) if sample else None
        if s is not None and self.blocked is not None:   # a position servo: its push grows with the error
            j = self.blocked
            short = abs(self.ctl.q_cmd[j] - self.q[j]) / np.radians(5)     # all it has 5° short (docs/physics.md)
            s.current_mA[j] = self.ctl.stall.stall_mA[j] * min(1.0, short)
            self.load = s.current_mA[j] / self.ctl.stall.stall_mA[j]
        out = self.ctl.cycle(self.now, s, misses)
        self.actions += out.actions
        for a in out.actions:  # the board carries them out at once and answers
            if a == Action.SEND_ENABLE and self.state == DISABLED:
                self.state = ENABLED
            elif a == Action.SEND_DISABLE and self.state == ENABLED:
                self.state = DISABLED
            elif a == Action.SEND_ESTOP:
                self.state = ESTOP
            elif a == Action.SEND_CLEAR_FAULT and self.state in (FAULT, ESTOP):
                self.state = DISABLED
            if a in (Action.SEND_ENABLE, Action.SEND_CLEAR_FAULT, Action.SEND_DISABLE):
                self.now += 1e-4
                self.ctl.completed(a, None, self.now)
        cmd = None if out.command is None else out.command.copy()
        self.sent.append((cmd, out.hold))
        if cmd is not None and not out.hold and self.state == ENABLED:
            moved = cmd.copy()
            if self.blocked is not None:
                moved[self.blocked] = self.q[self.blocked]
            self.q = moved
        return out

    def run(self, cycles: int, **kw):
        for _ in range(cycles):
            self.cycle(**kw)

    def positions_sent(self, since: int = 0) -> int:
        return sum(1 for c, hold in self.sent[since:] if c is not None and not hold)


def enabled_bench(**kw) -> Bench:
    b = Bench(**kw)
    b.ctl.handle(Ev.ENABLE, start_after=isinstance(b.ctl.motion, Demo))
    b.run(20)
    assert b.ctl.life.enabled
    return b


def test_nothing_but_keepalives_before_an_enable():
    b = Bench()
    b.run(50)
    assert b.positions_sent() == 0 and all(hold for _, hold in b.sent)
    assert b.ctl.life.mode == Mode.DISABLED


def test_a_board_found_enabled_after_a_reconnect_is_disabled_and_never_driven():
    """Repro: after a reconnect, a board that kept executing (long watchdog) reported ENABLED and
    the loop ramped in and resumed the motion by itself."""
    b = enabled_bench(motion=Demo(robots.load("puma560")))
    b.run(100)
    assert b.ctl.life.motion_running
    b.ctl.link_lost("the cable")
    b.run(10, sample=False)
    assert all(c is None for c, _ in b.sent[-10:])  # nothing is sent while disconnected
    b.ctl.reconnected(b.now)
    mark = len(b.sent)
    b.run(5, sample=False)  # no STATE since the reconnect: nothing is computed or sent
    assert all(c is None for c, _ in b.sent[mark:])
    b.state = ENABLED  # the board kept running through the loss
    b.actions.clear()
    b.run(200)
    assert Action.SEND_DISABLE in b.actions
    assert b.positions_sent(mark) == 0
    assert b.ctl.life.mode == Mode.DISABLED and not b.ctl.life.has_intent


def test_an_estop_drops_a_queued_jog_and_re_enabling_moves_nothing():
    b = enabled_bench()
    q0 = b.q.copy()
    jog = q0 + np.radians([20, -20, 20, 0, 0, 0])
    b.ctl.handle(Ev.JOG, jog)
    b.ctl.handle(Ev.ESTOP)
    b.run(5)
    b.ctl.handle(Ev.JOG, jog)  # posted during the e-stop: refused
    b.run(5)
    b.ctl.handle(Ev.CLEAR_FAULT)
    b.run(5)
    assert b.ctl.life.mode == Mode.DISABLED
    b.ctl.handle(Ev.ENABLE)
    b.run(500)
    assert b.ctl.life.mode == Mode.ACTIVE and b.ctl.life.activity == Activity.IDLE
    assert np.abs(b.q - q0).max() < 1e-9  # the jog was forgotten
    assert any("jog refused" in e for e in b.events)


def test_the_command_lines_motion_starts_once_and_not_after_a_fault():
    b = enabled_bench(motion=Demo(robots.load("puma560")))
    b.run(300)
    assert b.ctl.life.motion_running
    b.state = FAULT  # the watchdog, say
    b.run(3)
    assert b.ctl.life.mode == Mode.FAULT and b.ctl.abandoned and "FAULT" in b.ctl.abandoned
    b.ctl.handle(Ev.CLEAR_FAULT)
    b.run(3)
    b.ctl.handle(Ev.ENABLE)
    b.run(300)
    assert b.ctl.life.mode == Mode.ACTIVE and not b.ctl.life.motion_running
    b.ctl.handle(Ev.START)  # a user asks again: it starts from its beginning
    b.run(300)
    assert b.ctl.life.motion_running and b.ctl.abandoned is None


def test_missed_deadlines_hold_then_disable():
    b = enabled_bench(motion=Demo(robots.load("puma560")))
    b.run(300)
    b.run(3, misses=6)
    assert b.ctl.life.mode == Mode.HELD and b.ctl.life.has_intent  # a hold keeps intent
    held = b.ctl.q_cmd.copy()
    b.run(3, misses=6)
    assert np.array_equal(b.ctl.q_cmd, held)
    b.run(1, misses=51)
    assert b.ctl.life.mode == Mode.DISABLED and not b.ctl.life.has_intent
    assert Action.SEND_DISABLE in b.actions


def test_going_to_safety_by_itself_overtakes_the_requests_made_before():
    # the loop drops the requests to move still waiting in the mailbox when this is set
    b = enabled_bench()
    assert b.ctl.overtaken_by == ""
    b.run(1, misses=51)                                   # overruns: disabled by itself
    assert b.ctl.overtaken_by == "missed deadlines: disable"
    b.ctl.overtaken_by = ""
    b.ctl.handle(Ev.ENABLE, queued=True)
    b.run(20)
    b.ctl.handle(Ev.DISABLE, queued=True)                 # a request in its turn: nothing overtaken
    assert b.ctl.life.mode == Mode.DISABLED and b.ctl.overtaken_by == ""
    b.ctl.handle(Ev.ESTOP, why="the twin")                # the e-stop word, not the mailbox
    assert b.ctl.overtaken_by == "e-stop"


def test_a_long_hold_forgets_intent_when_headless():
    b = enabled_bench(motion=Demo(robots.load("puma560")), hold_timeout_s=0.1)
    b.run(300)
    b.run(100, misses=6)  # 0.2 s held
    assert b.ctl.life.mode == Mode.HELD and not b.ctl.life.has_intent
    assert b.ctl.abandoned and "held" in b.ctl.abandoned


def test_a_flood_of_enable_requests_sends_one_enable():
    b = Bench()
    for _ in range(10_000):
        b.ctl.handle(Ev.ENABLE)
    out = b.cycle()
    assert out.actions.count(Action.SEND_ENABLE) == 1


def test_a_bad_jog_is_refused_and_changes_nothing():
    b = enabled_bench()
    for bad in (np.full(6, np.nan), np.zeros(3), [1.0] * 7):
        step = b.ctl.handle(Ev.JOG, bad)
        assert step.refused
    assert b.ctl.life.activity == Activity.IDLE


@pytest.mark.parametrize("state", [DISABLED, ESTOP])
def test_estop_is_sent_again_while_the_board_does_not_follow(state):
    b = enabled_bench()
    b.ctl.handle(Ev.ESTOP)
    b.actions.clear()
    b.state = ENABLED if state == DISABLED else DISABLED  # it did not take the e-stop
    for _ in range(200):  # 0.4 s
        b.now += T
        out = b.ctl.cycle(b.now, Sample(b.now, b.state, b.q.copy()), 0)
        b.actions += out.actions
    assert 2 <= b.actions.count(Action.SEND_ESTOP) <= 5  # again, but not every cycle


def test_an_estop_while_an_enable_is_awaited_keeps_the_board_observed():
    """The queued ENABLE may be dropped unsent by the e-stop: the board's next STATEs must still be
    judged (here it does not take the e-stop at first, so it must get it again)."""
    b = Bench()
    b.ctl.handle(Ev.ENABLE)  # awaited: no answer comes (the transaction never runs)
    b.ctl.handle(Ev.ESTOP)
    b.ctl.pending_actions.clear()
    b.state = DISABLED
    actions = []
    for _ in range(100):
        b.now += T
        actions += b.ctl.cycle(b.now, Sample(b.now, b.state, b.q.copy()), 0).actions
    assert Action.SEND_ESTOP in actions  # observed: disabled, not e-stopped as asked


def test_a_disabled_state_sent_before_the_board_took_the_enable_does_not_undo_it():
    """Just after the board answered the ENABLE, a STATE it sent before taking it may still arrive
    saying DISABLED. That is not a refusal (read so, the README's loop went ENABLING → DISABLED one
    run in three); a DISABLED that lasts is — and an e-stop is taken at once either way."""
    from hil.runtime.controller import ENABLE_SETTLE_S

    def answered(first_state: int) -> Bench:
        b = Bench()
        b.ctl.handle(Ev.ENABLE)
        b.ctl.pending_actions.clear()
        b.now += T
        b.ctl.completed(Action.SEND_ENABLE, None, b.now)
        b.now += T
        b.ctl.cycle(b.now, Sample(b.now, first_state, b.q.copy()), 0)
        return b

    b = answered(DISABLED)            # one in flight
    assert b.ctl.life.mode == Mode.ENABLING
    b.now += T
    b.ctl.cycle(b.now, Sample(b.now, ENABLED, b.q.copy()), 0)
    assert b.ctl.life.enabled
    refused = answered(DISABLED)      # and it goes on saying so
    while refused.ctl.life.mode == Mode.ENABLING and refused.now < 101.0:
        refused.now += T
        refused.ctl.cycle(refused.now, Sample(refused.now, DISABLED, refused.q.copy()), 0)
    assert refused.ctl.life.mode == Mode.DISABLED and refused.now - 100.0 < 2 * ENABLE_SETTLE_S
    assert answered(ESTOP).ctl.life.mode == Mode.ESTOP


class PastTheRange(Hold):
    """A motion whose target runs past both ends of two joints' ranges (a bad plan, a bad file)."""

    name = "past the range"

    def target(self, t: float) -> np.ndarray:
        q = self.q.copy()
        q[1] = self.q[1] - 10.0 * t      # towards and past the lower end
        q[2] = self.q[2] + 10.0 * t      # towards and past the upper end
        return q


def test_the_loop_never_commands_a_joint_past_its_range_whatever_the_motion_asks():
    b = enabled_bench(motion=PastTheRange())
    b.ctl.handle(Ev.START)
    b.run(3000)   # 6 s: long enough for the rate-limited command to reach both ends
    model = b.model
    sent = np.array([c for c, hold in b.sent if c is not None and not hold])
    assert np.all(sent >= model.lower) and np.all(sent <= model.upper)
    assert b.ctl.q_cmd[1] == model.lower[1] and b.ctl.q_cmd[2] == model.upper[2]   # on the ends, not short
    assert b.ctl.safety_counts.get("joint limit", 0) > 0


def test_a_joint_measured_outside_its_range_is_not_enabled_and_each_is_named():
    b = Bench()
    model = b.model
    b.q[1] = model.lower[1] - 0.3                    # powered up past its range (or read across a wrap)
    b.q[4] = model.upper[4] + 0.1
    b.run(3)
    step = b.ctl.handle(Ev.ENABLE)
    assert step.refused and "shoulder reads" in step.refused and "wrist_bend reads" in step.refused
    assert "elbow" not in step.refused.replace("wrist_bend", "")
    b.run(20)
    assert Action.SEND_ENABLE not in b.actions and b.state == DISABLED and b.positions_sent() == 0
    b.q[1] = model.lower[1] - 0.01                   # within a degree of the end: noise, a hard stop
    b.q[4] = model.upper[4]
    b.run(3)
    assert not b.ctl.handle(Ev.ENABLE).refused
    b.run(20)
    assert b.ctl.life.enabled


def test_bring_in_enables_a_joint_outside_and_ramps_it_in_never_further_out():
    b = Bench(bring_in=True)
    model = b.model
    b.q[1] = model.lower[1] - np.radians(10)          # powered up 10° below its range
    b.run(3)
    assert not b.ctl.handle(Ev.ENABLE).refused
    assert any("bringing in from where it stands" in e and "shoulder reads" in e for e in b.events)
    b.run(3)
    assert b.ctl.life.mode == RAMPING
    ramp = model.velocity_limit[1] * Policy(T).ramp_fraction * T
    sent = []
    for _ in range(int(2.0 / T)):
        b.cycle()
        if b.sent[-1][0] is not None and not b.sent[-1][1]:
            sent.append(b.sent[-1][0][1])
    steps = np.diff(sent)
    assert sent[0] > model.lower[1] - np.radians(10) - 1e-12 and np.all(steps >= -1e-12)   # inward only
    assert np.all(steps <= ramp + 1e-12)                                                    # at the ramp speed
    assert sent[-1] == pytest.approx(model.lower[1]) and b.ctl.life.mode == ACTIVE        # in, then ramp done
    # a reading far outside is more likely a wrong zero: not moved, even when asked
    far = Bench(bring_in=True)
    far.q[1] = model.lower[1] - np.radians(60)
    far.run(3)
    refused = far.ctl.handle(Ev.ENABLE).refused
    assert refused and "--bring-in takes a joint no more than 30° outside" in refused


def test_a_stalled_joint_stops_the_motion_is_named_and_its_push_ends():
    b = enabled_bench(stall=True)
    target = b.q.copy()
    target[1] += 0.5
    b.ctl.handle(Ev.JOG, payload=target)
    b.run(int(0.1 / T))
    assert b.ctl.life.activity == Activity.JOG
    b.blocked = 1                                      # the shoulder meets something
    start = None
    for k in range(int(1.0 / T)):
        b.cycle()
        if start is None and b.load >= 0.85:           # it pushes with (nearly) all it has: stalled from here
            start = k
        if b.ctl.life.activity != Activity.JOG:
            break
    assert b.ctl.life.activity == Activity.IDLE and b.ctl.life.enabled        # stopped, still enabled, held
    assert start is not None and (k - start) * T <= 0.2, (start, k)           # named within 0.2 s
    said = [e for e in b.events if "stalled" in e]
    assert said and "shoulder pushes with" in said[0] and "something blocks it" in said[0], b.events
    assert b.ctl.q_cmd[1] == pytest.approx(b.q[1])                            # its command came to where it is
    assert b.ctl.incidents and "stalled" in b.ctl.incidents[0][1]
    b.run(int(0.5 / T))
    assert b.ctl.q_cmd[1] == pytest.approx(b.q[1]) and len([e for e in b.events if "stalled" in e]) == 1


def test_high_current_alone_or_a_lag_alone_is_not_a_stall():
    watch = StallWatch(servo_table(robots.load("puma560")), T)
    n = int(2 * STALL_S / T)
    full, zero, q = watch.stall_mA.copy(), np.zeros(6), np.zeros(6)
    behind = np.full(6, 0.2)
    for _ in range(n):     # pushing hard while moving toward the command: a heavy move
        assert watch.update(behind, q, np.full(6, 1.0), full) < 0
    for _ in range(n):     # behind and still, at a light load: a slow servo, a soft one
        assert watch.update(behind, q, zero, 0.5 * full) < 0
    for _ in range(n):     # at full current on its command: holding a load
        assert watch.update(q, q, zero, full) < 0
    tripped = [watch.update(behind, q, zero, full) for _ in range(n)]
    assert tripped.index(0) == watch.cycles - 1


def test_the_stall_watch_counts_each_joint_as_its_three_conditions_say():
    """The compiled pass against the conditions written out in NumPy, on random cycles with NaNs and
    currents on the threshold."""
    from hil.runtime.stall import STALL_ERROR_RAD, STALL_LOAD, STILL_RAD_S

    watch = StallWatch(servo_table(robots.load("puma560")), T)
    rng = np.random.default_rng(7)
    count = np.zeros(6, dtype=np.int64)
    for _ in range(400):
        q_cmd, q_meas = rng.normal(0, 0.06, 6), rng.normal(0, 0.06, 6)
        qd = rng.choice([0.0, 0.01, 0.2], 6)
        cur = watch.stall_mA * rng.choice([0.5, STALL_LOAD, 0.9, 1.0], 6) * rng.choice([-1, 1], 6)   # the edge too
        q_meas[rng.integers(0, 6)] = np.nan if rng.random() < 0.1 else q_meas[0]
        pushing = (np.abs(cur) >= STALL_LOAD * watch.stall_mA) & (np.abs(q_cmd - q_meas) > STALL_ERROR_RAD) \
            & (np.abs(qd) < STILL_RAD_S)
        count = np.where(pushing, count + 1, 0)
        got = watch.update(q_cmd, q_meas, qd, cur)
        worst = int(np.argmax(count))
        assert got == (worst if count[worst] >= watch.cycles else -1)
        if got >= 0:
            count[:] = 0
        np.testing.assert_array_equal(watch.count, count)


def test_the_stall_pass_at_each_condition_s_edge_and_the_first_of_equal_counts():
    """Exactly `error_rad` short or moving exactly `still_rad_s` is no push (the conditions say
    more than, slower than); of joints pushing equally long, the first is named."""
    from hil.safety import stall_step

    def once(q_cmd, qd, count):
        n = len(count)
        return stall_step(np.full(n, q_cmd), np.zeros(n), np.full(n, qd), np.full(n, 900.0), np.full(n, 1000.0),
                          count, 0.5, 0.05, 0.1)

    count = np.zeros(3, dtype=np.int64)
    once(0.05, 0.0, count)
    assert not count.any()                               # exactly the error allowed: no push
    once(np.nextafter(0.05, 1.0), 0.0, count)
    assert (count == 1).all()
    once(0.06, 0.1, count)
    assert not count.any()                               # exactly the still speed: moving
    count[:] = [2, 5, 5]
    assert once(0.06, 0.0, count) == 1 and list(count) == [3, 6, 6]
    count[:] = [0, 0, 0]
    assert once(0.0, 0.0, count) == 0                    # nothing pushes: the first joint, count 0


def _leaning(sag_deg: float, plan_leans: bool) -> Trajectory:
    """humanoid17 standing 1 s with its commands leaning sideways by `sag_deg` at the hip rolls: the
    compliance compensation for that much sag (the plan stands upright), or, `plan_leans`, a plan
    that leans as far itself. A few degrees lift a sole: both the unloaded command and the command
    less all of its compensation lose a foot early in the ramp-in."""
    model = robots.load("humanoid17")
    t = np.linspace(0.0, 1.0, 11)
    plan = np.repeat(model.home[None, :], len(t), axis=0)
    cmd = plan.copy()
    for j in ("l_hip_roll", "r_hip_roll"):
        cmd[:, model.joint_index(j)] += np.radians(sag_deg)
    traj = Trajectory(t, cmd, "leaning")
    if not plan_leans:
        traj.q_plan = plan
    return traj


def test_balance_is_judged_where_the_loaded_servos_stand_from_the_ramp_in_on():
    """Commands whose unloaded pose would topple, compensating a sag: the ramp-in and the motion
    run (the pose the loaded servos reach, the command less the compensation it carries so far,
    stands); the same commands as a plan of their own are held."""
    checker = SafetyChecker(robots.load("humanoid17"))
    assert checker.check(_leaning(10.0, True).q[0]).flags & BALANCE_FLAG     # the unloaded pose topples
    b = Bench(motion=_leaning(10.0, False), robot="humanoid17")
    b.ctl.handle(Ev.ENABLE, start_after=True)
    b.run(800)
    assert b.ctl.motion_done and "balance" not in b.ctl.safety_counts, b.events
    assert np.allclose(b.ctl.q_cmd, b.ctl.motion.q[-1])
    b = Bench(motion=_leaning(10.0, True), robot="humanoid17")
    b.ctl.handle(Ev.ENABLE, start_after=True)
    b.run(800)
    assert not b.ctl.motion_done and b.ctl.safety_counts.get("balance", 0) > 0


def test_a_held_step_is_explained_at_the_step_not_at_the_target():
    """A jog whose target stands but whose way there (the rate-limited steps) leaves the support
    polygon: the hold names the margin of the step it refused, short of the margin asked."""
    import re

    b = Bench(robot="humanoid17")
    b.ctl.handle(Ev.ENABLE)
    b.run(300)
    d = np.radians([15, 13, 29, -15, 2, -13, 51, -20, -23, -18, -44, 27, 18, -67, -13, -7, 18])
    target = b.model.home + d
    assert not b.ctl.safety.check(target).flags      # the target itself is fine
    b.ctl.handle(Ev.JOG, target)
    b.run(1500)
    held = [e for e in b.events if e.startswith("safety: balance")]
    assert held, b.events
    m = re.search(r"is (only )?([\d.]+) mm (inside the edge of|outside) the support polygon \(it must stay ([\d.]+) mm",
                  held[0])
    inside = float(m.group(2)) * (1 if m.group(1) else -1)
    assert inside < float(m.group(4)), held[0]
