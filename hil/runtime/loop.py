"""The real-time loop, in its own process (`run_loop(config)` is the process entry).

This module only wires: the cycle's decisions are `controller.Controller`'s (lifecycle, motion,
safety), the board is a `transport.BoardTransport`, transactions run on `BoardActions`' thread,
the deadlines and their misses are `Deadlines`'. One cycle:

1. take the newest STATE (non-blocking; counted stale if none arrived); a lost link is handed to
   the controller (toward safety) and a reconnect is started off the loop's thread;
2. hand the e-stop word, the stop word, the mailbox and finished transactions to the controller;
3. `Controller.cycle`: the command (positions, a keep-alive hold, or nothing) and board actions;
4. carry the actions out (an e-stop at once, the rest queued) and send the command;
5. publish to shared memory, hand the row to the recorder;
6. account timing; sleep, then spin to the next deadline.

The loop dies with its parent (the `hil` process): a parent-death signal e-stops the board.
"""

from __future__ import annotations

import json
import math
import os
import signal
import sys
import time
import traceback
import dataclasses
from dataclasses import dataclass

import numpy as np

from firmware_protocol.buses.bus_board import RATE_MARGIN, BusConfig
from firmware_protocol.protocol_errors import LinkLostError
from firmware_protocol.messages import LINK_TIMEOUT_S, BoardState, Capability
from hil import board_config, calibration_files, robots
from hil.errors import EXPECTED, HilError, InputError, message
from hil.motion import contacts
from hil.runtime.board_actions import QUEUE_LIMIT, BoardActions
from hil.runtime.controller import Controller, Policy
from hil.runtime.lifecycle import (ACTIVE, DISABLED, DISCONNECTED, ENABLED_MODES, ESTOP, FAULT, HELD, MOTION, RAMPING,
                                   Action, Ev)
from hil.runtime.loop_stats import LoopStats
from hil.runtime.misses import MissTracer, watch_for_stops
from hil.runtime.motion_sources import make_motion, past_travel
from hil.runtime.port_process import open_transport
from hil.process_life import die_with_parent
from hil.runtime.realtime import (SpinWindow, claim_realtime, cpu_times, freeze_heap, next_deadline_after,
                                  reserve_loop_cpu, sleep_before, steal_fraction)
from hil.runtime.recorder import Recorder, loop_flags
from hil.runtime.run_request import PORT_IO
from hil.runtime import remote, run_card
from hil.runtime.shared import (CYCLE_SCALARS, ERROR_PREFIX, ESTOP_BY, MAILBOX_SLOTS, LoopRequest, LoopStatus,
                                LoopWord, SharedState, unlink_block)
from hil.runtime.stall import StallWatch
from hil.runtime.transport import PORT_IO_NOTES, bus_notes, bus_round_trip_warning, round_trip_warning
from hil.safety import SafetyChecker

# the words every cycle looks at, as plain ints: indexing by an enum member costs ~0.2 µs more
_ESTOP, _STOP, _HEAD, _TAIL = (int(w) for w in (LoopWord.ESTOP, LoopWord.STOP, LoopWord.HEAD, LoopWord.TAIL))

# The cache warm-up before a cycle (see `_rest`) is skipped when less than this is left before the
# deadline: a late wake-up must not be made later.
WARM_MARGIN_S = 100e-6
# The live statistics (twice a second, tens of µs) wait for a cycle that leaves at least this much
# before the next deadline.
PUBLISH_MARGIN_S = 300e-6
# Missed deadlines listed one by one in the statistics file (which, how late): a period in their
# times points at whatever recurs.
MISSES_KEPT = 1000
# After a stop the loop keeps cycling (no motion) this long, so the board's answer is seen and recorded;
# an orphaned loop (its `hil` was killed) less: its ESTOP went out from the signal handler, and nothing
# may outlive the run by much
DRAIN_S = 0.3
ORPHAN_DRAIN_S = 0.08
# A headless run whose command is held this long forgets its intent (and a motion run ends).
HEADLESS_HOLD_S = 3.0
# Identical event lines within this many seconds are counted, not repeated.
EVENT_REPEAT_S = 1.0

TOWARD_MOTION = frozenset({LoopRequest.ENABLE, LoopRequest.CLEAR_FAULT, LoopRequest.JOG, LoopRequest.START_MOTION})
REQUEST_EVENTS = {LoopRequest.ENABLE: Ev.ENABLE, LoopRequest.DISABLE: Ev.DISABLE, LoopRequest.CLEAR_FAULT: Ev.CLEAR_FAULT,
                  LoopRequest.JOG: Ev.JOG, LoopRequest.START_MOTION: Ev.START, LoopRequest.STOP_MOTION: Ev.STOP,
                  LoopRequest.ESTOP: Ev.ESTOP}
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
STOPPED_BOARD = (BoardState.DISABLED, BoardState.FAULT, BoardState.ESTOP)
PARENT_DEATH_SIGNAL = signal.SIGUSR2


# what a remote hands over beyond a slot (hil.runtime.remote): done between cycles, in a thread
REMOTE_REQUESTS = frozenset({LoopRequest.LOAD_MOTION, LoopRequest.RECORD_START, LoopRequest.RECORD_STOP})

STALE_SHARE = 0.05   # cycles without a new STATE past this share of a run are said at its end


def link_notes(rejected: int, stale: int, deadlines: int, rate_hz: float, round_trip_ms) -> list[str]:
    """What the link did that a user should hear at the end of a run: frames from the board that
    were rejected (noise, a baud mismatch, another program on the port), and cycles without a new
    STATE past STALE_SHARE (the link does not keep the rate), with the rate that would."""
    notes = []
    if rejected:
        notes.append(f"{rejected} frames from the board were rejected (bad framing or checksum, an unknown message, "
                     "a STATE for another joint count): noise on the line, a baud-rate mismatch, or another program "
                     "writing to the port")
    if deadlines > 100 and stale > STALE_SHARE * deadlines:
        trips = sorted(round_trip_ms or [])
        holds = (f"; about {1e3 / (RATE_MARGIN * trips[len(trips) // 2]):.0f} Hz would hold (its round trip is "
                 f"{trips[len(trips) // 2]:.2f} ms)") if trips else ""
        notes.append(f"{stale} of {deadlines} cycles ({100 * stale / deadlines:.0f} %) had no new STATE from the "
                     f"board: the link does not keep up with {rate_hz:g} Hz{holds}; lower --rate")
    return notes


def _uncalibrated_note(bus) -> str:
    """What a run on a map nobody calibrated says after naming it."""
    if not bus.shipped:
        return ""
    kind = "generated: nominal zeros" if bus.generated else "shipped"
    return f" ({kind}; `hil calibrate --bus … --out FILE` makes a calibrated copy)"


@dataclass(frozen=True)
class LoopConfig:
    robot: str
    port: str
    shm_name: str
    rate_hz: float = 500.0
    duration_s: float | None = None
    baud: int = 1_000_000
    record: str | None = None
    record_errors: str = "stop"   # a recording that cannot be written: stop the run, or "continue" without it
    stats_json: str | None = None
    motion: str | None = None
    enable: bool = False
    start_motion: bool = True
    exit_when_done: bool = False
    headless: bool = True     # no twin: a motion that can no longer finish ends the run
    realtime: bool = True
    keep_cpu_awake: bool = True  # with realtime: no idle states on the loop's CPU (see cpu_idle.py)
    spin_us: float | None = None  # the busy-wait before each deadline; None: sized as it runs (SpinWindow)
    ramp_fraction: float = 0.25
    link_timeout_s: float = LINK_TIMEOUT_S
    reconnect_s: float = 3.0
    hold_after_misses: int = 5
    disable_after_misses: int = 50
    calibration: str | None = None
    # where the serial port's reads and writes run (transport.py): "process", "thread" or "inline"
    port_io: str = PORT_IO[0]
    parent_pid: int | None = None  # the `hil` process: the loop ends when it dies
    bus: BusConfig | None = None   # a servo bus (hil/board_config.py) instead of our own protocol
    compensate: bool = True       # planned motions carry compliance compensation (hil.motion.torques)
    speed: float = 1.0            # a motion file runs at this fraction of its written pace
    strict: bool = False          # and is refused, not slowed, where its joints cannot follow
    stabilise: bool = True        # a humanoid's motions lean back on what its IMU says (runtime.balance)
    watchdog_ms: int | None = None  # the board's command watchdog (CMD_TIMEOUT_MS); None: the board's own
    bring_in: bool = False        # a joint powered up outside its range is enabled and brought in slowly

    @classmethod
    def from_request(cls, req, **resolved) -> "LoopConfig":
        """The loop's configuration from a run's request (hil.runtime.run_request): each of its values
        under the same name (None: this side's default), then what the supervisor `resolved` (the
        port, the rate, the bus, the robot's spec …) over them."""
        mine = {f.name for f in dataclasses.fields(cls)}
        values = {f.name: getattr(req, f.name) for f in dataclasses.fields(req)
                  if f.name in mine and getattr(req, f.name) is not None}
        return cls(**{**values, **resolved})


def run_loop(cfg: LoopConfig) -> int:
    """Process entry point. Returns 0 on a normal stop, 1 on failure."""
    parent_gone = die_with_parent(PARENT_DEATH_SIGNAL, cfg.parent_pid)
    shared = SharedState(cfg.shm_name)
    shared.ctrl[LoopWord.PID] = os.getpid()
    loop = None
    try:
        loop = Loop(cfg, shared)
        if parent_gone:
            loop.orphaned = True
        return loop.run()
    except BaseException as e:  # report anything, then fail
        shared.ctrl[LoopWord.STATUS] = LoopStatus.FAILED
        if isinstance(e, EXPECTED):
            # its message says what and what to do; the supervisor prints it once, at the end
            shared.set_event(ERROR_PREFIX + message(e))
        elif not isinstance(e, SystemExit):
            shared.set_event(ERROR_PREFIX + f"the loop failed: {e!r} (a bug: please report it with the traceback)")
            traceback.print_exc()
        return 1
    finally:
        if loop is not None:
            loop.release_cpu()
        orphaned = loop is not None and loop.orphaned
        shared.close()
        if orphaned:  # its owner is gone: nobody else removes the block
            unlink_block(cfg.shm_name)


class Deadlines:
    """The loop's grid of deadlines: wake-ups, missed deadlines (counted, in a row, listed) and
    the sleep before the next."""

    def __init__(self, period_s: float, spin: SpinWindow, stats: LoopStats, tracer: MissTracer, t0: float) -> None:
        self.T, self.spin, self.stats, self.tracer, self.t0 = period_s, spin, stats, tracer, t0
        self.next = time.monotonic() + period_s
        self.wake_at = self.next
        self.last_wake = time.monotonic()
        self.in_row = 0     # missed deadlines in a row, the skipped ones included
        self.skipped = 0
        self.cycle = 0

    def woke(self) -> tuple[float, float]:
        """At a wake-up: (the time, the period since the last one in µs)."""
        wake = time.monotonic()
        T, st = self.T, self.stats
        period_us = (wake - self.last_wake) * 1e6
        self.last_wake = wake
        late = wake - self.next
        missed = self.cycle > 0 and late > T / 2
        self.tracer.woke(wake, self.next - self.t0, late, missed, T)
        if missed:
            st.misses += 1
            if len(st.missed_at) < MISSES_KEPT:
                st.missed_at.append((self.next - self.t0, late * 1e6))
            self.in_row += 1
        elif not self.skipped:  # on time, and the cycle before skipped nothing
            self.in_row = 0
        return wake, period_us

    def restart(self) -> None:
        """A new start (after a reconnect): the wait was no overrun."""
        self.next = self.wake_at = time.monotonic() + self.T
        self.skipped = self.in_row = 0

    def ended(self, wake: float) -> None:
        """After the cycle's work: the next deadline, skipping those that could only be served late."""
        st, T = self.stats, self.T
        self.cycle += 1
        now = time.monotonic()
        served = self.next
        self.next, skipped, self.wake_at = next_deadline_after(served, now, T, woke=wake)
        self.skipped = skipped
        if skipped:  # never served: missed as well
            st.skipped += skipped
            st.misses += skipped
            self.in_row += skipped
            self.tracer.passed(now, served + T - self.t0, served + T, skipped)
            at_best = max(now, wake + T / 2)  # after this cycle, and T/2 after its wake-up
            for k in range(1, min(skipped, MISSES_KEPT - len(st.missed_at)) + 1):
                st.missed_at.append((served + k * T - self.t0, (at_best - served - k * T) * 1e6))

    def spare(self) -> float:
        return self.wake_at - time.monotonic()

    def sleep(self) -> None:
        self.spin.slept(sleep_before(self.wake_at, self.spin.seconds, self.tracer))

    def spin_to_deadline(self) -> None:
        while time.monotonic() < self.wake_at:
            pass


class _Events:
    """Event lines to the shared block and the stats file; an identical line within
    EVENT_REPEAT_S is counted instead of repeated (a request flood must not flood the display)."""

    def __init__(self, shared, t0: float) -> None:
        self.shared, self.t0 = shared, t0
        self.lines: list[str] = []
        self._last: dict[str, tuple[float, int]] = {}
        self._early: list[tuple[float, str]] = []   # kept for a recording that starts after them
        self._sink = None

    def record_into(self, sink) -> None:
        """From now on (and the lines said before) also `sink(t, text)`: the run's recording."""
        for t, text in self._early:
            sink(t, text)
        self._early = []
        self._sink = sink

    def __call__(self, text: str) -> None:
        now = time.monotonic()
        last, muted = self._last.get(text, (-math.inf, 0))
        if now - last < EVENT_REPEAT_S:
            self._last[text] = (last, muted + 1)
            return
        if len(self._last) > 256:
            self._last.clear()
        self._last[text] = (now, 0)
        if muted:
            text += f" (and {muted} more like it)"
        self.lines.append(f"[{now - self.t0:8.3f} s] {text}")
        del self.lines[:-200]
        self.shared.set_event(text)
        if self._sink is not None:
            self._sink(now - self.t0, text)
        elif len(self._early) < 200:
            self._early.append((now - self.t0, text))


class Loop:
    def __init__(self, cfg: LoopConfig, shared) -> None:
        self.cfg = cfg
        self.shared = shared
        self.t0 = time.monotonic()
        self.event = _Events(shared, self.t0)
        robot = robots.load(cfg.robot)
        # the loop checks against a board config's narrower limits (what its servos can reach); a
        # motion is the robot's, checked against the robot's own, and held at the servos' ends
        self.model = board_config.within_config(robot, cfg.bus)
        self.n = self.model.n
        self.safety = SafetyChecker(self.model)
        self.servo = board_config.servos_of(self.model, cfg.bus)
        self.motion = make_motion(cfg.motion, robot, self.servo, cfg.compensate, cfg.speed, cfg.strict)
        self.motion.attach(self.model, self.event)
        self.travel_note = past_travel(self.motion, robot, self.model, cfg.bus.source if cfg.bus else "")
        if self.travel_note and cfg.strict:
            raise InputError(f"refused (--strict): {self.travel_note}")
        self.stats = LoopStats()
        self.tracer = MissTracer(MISSES_KEPT)
        self.spin = SpinWindow(None if cfg.spin_us is None else cfg.spin_us * 1e-6)
        self.stop_reason: str | None = None
        self.stop_failed = False
        self.orphaned = False
        self.link = None
        self.recorder = None
        self.record_path = cfg.record
        self._record_failure_said = False
        self._jobs: list = []   # a remote's motion being read, a recording being closed (hil.runtime.remote)
        self.actions: BoardActions | None = None
        self._signal: int | None = None
        self._reconnected_at: float | None = None  # set when a reconnect finished: the deadlines restart
        self._release_idle = lambda: None
        self.cpu = None
        self.cpu_idle_note = "idle states allowed (not requested)"
        self.round_trip_ms = None
        self.fields = {k: shared.field(k) for k in shared.layout if not k.startswith("_")}
        first = shared.layout[CYCLE_SCALARS[0]][0]
        self._scalars = shared.data[first:first + len(CYCLE_SCALARS)]
        self._q_cmd, self._q_meas, self._q_target, self._qd_meas, self._load = (
            self.fields[k] for k in ("q_cmd", "q_meas", "q_target", "qd_meas", "load"))
        self._stall_mA = self.servo.stall_current_mA()
        self.static_balance_note = ""
        if getattr(self.motion, "dynamic_balance_checked", False):
            # a walk leaves the static support polygon by design; its ZMP was recomputed at load
            self.safety.check_static_balance(False)
            self.static_balance_note = ("static balance check off for this motion: "
                                        + ("its balance was checked in physics when loaded"
                                           if getattr(self.motion, "balance_checked_by", "zmp") == "physics"
                                           else "its ZMP was checked when loaded"))
        T = 1.0 / cfg.rate_hz
        policy = Policy(T, cfg.ramp_fraction, cfg.hold_after_misses, cfg.disable_after_misses,
                        hold_timeout_s=HEADLESS_HOLD_S if cfg.headless else None, bring_in=cfg.bring_in)
        self.ctl = Controller(self.model, self.safety, self.motion, policy, self.event, stabilise=cfg.stabilise,
                              stall=StallWatch(self.servo, policy.period_s))
        # compile (or load from the cache) every kernel the cycle uses now, not in the first cycle
        q = self.model.home.copy()
        self.safety.step(q, q.copy(), T, 1.0, q.copy(), q.copy())
        self.motion.reset(q)
        self.motion.target(0.0)

    # ------------------------------------------------------------------ start
    def _on_signal(self, signum, frame) -> None:
        if signum == PARENT_DEATH_SIGNAL:
            self.orphaned = True
        if self.link is not None:
            try:
                self.link.estop()  # at once, from the handler: the cycle confirms it
            except Exception:  # noqa: BLE001 - the board's watchdog is the fallback
                pass
        self._signal = signum

    def _connect(self):

        cfg = self.cfg
        link = open_transport(cfg.port_io, cfg.port, cfg.baud, cfg.link_timeout_s, self.n, cfg.realtime, cfg.bus,
                              cfg.watchdog_ms)
        if cfg.bus is not None and cfg.calibration is None:
            # a servo bus's joint map is its board config: zero ticks and directions per joint
            self.event(f"joint zeros and directions: {cfg.bus.source}" + _uncalibrated_note(cfg.bus))
            return link
        try:
            jm = calibration_files.joint_map_for(self.model, link.info, cfg.calibration, self.event)
        except BaseException:
            link.close()   # refused before anything moved: the board stays as it is (DISABLED), not e-stopped
            raise
        if jm is not None:
            link.joint_map = jm
        return link

    def _first_state(self):
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            self.link.send_positions(np.zeros(self.n), hold=True)  # any command frame gets a STATE back
            time.sleep(0.005)
            first = self.link.poll()
            if first is not None:
                return first
        raise HilError(f"no STATE from the board on {self.cfg.port} within 1 s")

    def _check_round_trip(self) -> None:
        """Time a few command → STATE round trips before the loop starts; warn when they take longer
        than a cycle (an FTDI adapter at its default 16 ms latency timer)."""
        trips = sorted(self.link.round_trips_ms(5))
        self.round_trip_ms = trips
        low_latency = self.link.info.low_latency if self.link.info is not None else None
        if self.cfg.bus is not None:  # a bus cycle is a round trip: compare it with its wire time
            warning = bus_round_trip_warning(self.cfg.bus, self.cfg.port, trips)
        else:
            warning = round_trip_warning(self.cfg.port, trips, self.cfg.rate_hz, low_latency)
        if warning:
            self.event(warning)

    def _start(self):
        cfg = self.cfg
        for sig in (*STOP_SIGNALS, PARENT_DEATH_SIGNAL):
            signal.signal(sig, self._on_signal)
        watch_for_stops()   # a stopped loop's misses are the stop's, not a lock's
        # the port process (if any) is forked here: before the loop's real-time claim, which it
        # must not inherit (it sets its own signal handling first thing), but after the loop's
        # CPU is reserved, so that it leaves the same CPU free
        if cfg.realtime:
            reserve_loop_cpu(f"{cfg.robot} on {cfg.port}")
        self.link = self._connect()
        grant = claim_realtime(cfg.realtime, cfg.keep_cpu_awake)
        self.cpu = grant.cpu
        self._release_idle, self.cpu_idle_note = grant.release, grant.cpu_idle_note
        self.cpu_at_start = cpu_times(grant.cpu)
        # other threads of this process (recorder, transactions) must hand the GIL back quickly
        sys.setswitchinterval(1e-4)
        info = self.link.info
        self.position_estimated = bool(info.capabilities & Capability.POSITION_ESTIMATED)
        self.shared.set_info(robot=cfg.robot, board=info.uid, port=cfg.port, pid=os.getpid(),
                             position_estimated=self.position_estimated, leader=self.motion.name == "teleop")
        run_card.write(self.shared.name, self.model, cfg.robot, cfg.bus, cfg.compensate, cfg.speed, cfg.strict)
        self.event(f"connected: {info.kind_name} fw {info.firmware}, {info.n_joints} joints, uid {info.uid}, "
                   f"handshake {info.handshake_ms:.1f} ms; loop {cfg.rate_hz:.0f} Hz, {grant.note}; "
                   f"port I/O {PORT_IO_NOTES[cfg.port_io]}")
        if cfg.watchdog_ms is not None:
            self.event(f"the board's command watchdog is {cfg.watchdog_ms:g} ms (--watchdog-ms or HIL_WATCHDOG_MS), set again at "
                       "every reconnect")
        if cfg.bus is not None:
            for note in bus_notes(cfg.bus, cfg.rate_hz):
                self.event(note)
        if self.static_balance_note:
            self.event(self.static_balance_note)
        if self.travel_note:
            self.event(self.travel_note)
        first = self._first_state()
        self._check_round_trip()
        self.actions = BoardActions()
        self.ctl.begin(first.q, motion_run=bool(cfg.exit_when_done and cfg.motion))
        self._board_info = info
        if cfg.record:
            self._start_recording(cfg.record)
        if cfg.enable:  # the command line's request, once: enable, and start the motion if one is given
            step = self.ctl.handle(Ev.ENABLE, start_after=bool(cfg.motion and cfg.start_motion))
            if step.refused and cfg.headless:   # nobody at a twin to put it right and try again
                self._stop(f"the enable asked for (--enable) was refused: {step.refused}", failed=True)
        self.fields["sched_fifo"][0] = 1.0 if grant.sched_fifo else 0.0
        self.fields["cpu"][0] = -1 if grant.cpu is None else grant.cpu
        self.model.load_kernels()
        freeze_heap()
        self.shared.ctrl[LoopWord.STATUS] = LoopStatus.RUNNING
        return first

    def _start_recording(self, path: str) -> None:
        info, cfg = self._board_info, self.cfg
        meta = {"robot": cfg.robot, "joints": list(self.model.joint_names), "rate_hz": cfg.rate_hz,
                "port": cfg.port, "board_uid": info.uid, "started": time.time(), "units": "SI (s, rad)",
                "board": f"{info.firmware}, {info.protocol}",
                # True: q_meas is the commanded output of open-loop servos, not a measurement
                "position_estimated": self.position_estimated,
                # what the twin's load bars divide the currents by, in a replay too
                "stall_current_mA": [float(v) for v in self._stall_mA]}
        if cfg.bus is not None:   # which servo map turned ticks into these angles (hil export --lerobot)
            meta.update(bus=cfg.bus.bus, board_config=cfg.bus.source)
        self.recorder = Recorder(path, self.n, meta)
        self.record_path = path
        self._record_failure_said = False
        self.event.record_into(self.recorder.note)

    # ------------------------------------------------------------------ run
    def run(self) -> int:
        try:
            sample = self._start()
            self._cycles(sample)
        finally:
            self._shutdown()
        return 1 if self.stop_failed or self.shared.ctrl[LoopWord.STATUS] == LoopStatus.FAILED else 0

    def _cycles(self, sample) -> None:
        cfg = self.cfg
        T = 1.0 / cfg.rate_hz
        clock = Deadlines(T, self.spin, self.stats, self.tracer, self.t0)
        # from the first cycle: a start slowed by a busy machine (connecting, compiling) does not use
        # up the run the user asked for
        self.first_cycle_at = time.monotonic()
        end_time = None if cfg.duration_s is None else self.first_cycle_at + cfg.duration_s
        draining_until = None
        last_seq = sample.seq
        last_stats = time.monotonic()
        self._warm_out = np.zeros(self.n)
        ctl, link = self.ctl, self.link
        while True:
            if self.stop_reason is not None and draining_until is None:
                draining_until = time.monotonic() + (ORPHAN_DRAIN_S if self.orphaned else DRAIN_S)
                self._end_intent()
            wake, period_us = clock.woke()
            if draining_until is not None and (wake > draining_until or self._board_settled(sample)):
                return
            if end_time is not None and wake >= end_time:
                self._stop(f"duration {cfg.duration_s:g} s reached")
            wire = 0.0
            stale = False
            connected = ctl.life.mode != DISCONNECTED
            if connected:
                t_w = time.monotonic()
                try:
                    s = link.poll()
                except LinkLostError as e:
                    s = self._lost(e)
                wire = time.monotonic() - t_w
                if s is not None:
                    sample = s
                    stale = s.seq == last_seq
                    self.stats.stale += stale
                    last_seq = s.seq
            self._requests()
            mode_before = ctl.life.mode
            out = ctl.cycle(wake, sample if ctl.life.mode != DISCONNECTED else None, clock.in_row)
            if ctl.overtaken_by:
                self._drop_overtaken()
            if ctl.life.mode == FAULT and mode_before != FAULT:  # which joint, and what to do: off this thread
                self.actions.submit("describe", self.link.describe_faults)
            if out.actions:
                self._carry_out(out.actions)
            if out.command is not None:
                t_w = time.monotonic()
                self._send(out)
                wire += time.monotonic() - t_w
            if ctl.balance.fell_at is not None and self.stop_reason is None:
                self._stop(f"the robot fell at t = {ctl.balance.fell_at - self.t0:.2f} s (its body tilted "
                           f"{math.degrees(ctl.balance.tilt):.0f}° from upright)", failed=True)
            self._check_end()
            cycle_us = (time.monotonic() - wake) * 1e6
            self._publish(wake, clock.cycle, sample, stale, out.flags)
            if self.recorder is not None:
                self._record(wake, sample, out.flags, stale, period_us, cycle_us)
                if self.recorder.failure and not self._record_failure_said:
                    self._recording_failed()
            if clock.cycle > 0:
                self.stats.add(period_us, cycle_us, cycle_us - wire * 1e6)
            clock.ended(wake)
            if self._reconnected_at is not None:
                self._reconnected_at = None
                clock.restart()
            now = time.monotonic()
            if now - last_stats > 0.5 and clock.spare() > PUBLISH_MARGIN_S:
                last_stats = now  # only in a cycle with time to spare: a late cycle does not get later
                self._publish_stats(T * 1e6)
            self._rest(clock)

    def _rest(self, clock: Deadlines) -> None:
        clock.sleep()
        life = self.ctl.life
        if life.enabled and clock.spare() > WARM_MARGIN_S:
            # Rehearse the cycle's kernels on throwaway outputs while spinning: after a sleep the
            # caches are cold (on a VM the core ran someone else), and the motion target and the
            # safety step then take several times their warm time. Both are pure: the real calls
            # recompute everything they return.
            if life.activity == MOTION:
                self.motion.target(self.ctl.motion_t)
            q = self.ctl.q_cmd
            self.safety.step(q, q, clock.T, 1.0, self._warm_out, self.ctl.q_meas)
        clock.spin_to_deadline()

    # ------------------------------------------------------------------ the cycle's parts
    def _lost(self, e: LinkLostError) -> None:
        """The link is gone: toward safety, and a reconnect started off the loop's thread."""
        self.stats.link_errors += 1
        why = e.strerror or str(e)
        self.ctl.link_lost(f"{why} — nothing is sent; the board's watchdog stops it")
        self.actions.cancel({Action.SEND_ENABLE, Action.SEND_CLEAR_FAULT})
        self.actions.submit("reconnect", lambda: self.link.reconnect(timeout_s=self.cfg.reconnect_s))

    def _requests(self) -> None:
        words = self.shared.words
        if self._jobs:
            self._jobs_done()
        if not (words[_ESTOP] or words[_STOP] or words[_HEAD] != words[_TAIL] or self._signal is not None
                or self.actions.has_done):
            return
        ctrl = self.shared.ctrl
        if ctrl[LoopWord.ESTOP]:
            by = int(ctrl[LoopWord.ESTOP])
            ctrl[LoopWord.ESTOP] = 0
            self._estop(ESTOP_BY.get(by, ESTOP_BY[1]))
        if self._signal is not None:
            sig, self._signal = self._signal, None
            name = "the parent process died" if sig == PARENT_DEATH_SIGNAL else f"{signal.Signals(sig).name}"
            self.ctl.handle(Ev.PARENT_DIED if sig == PARENT_DEATH_SIGNAL else Ev.SIGNAL, why=name)
            self.event(f"E-STOP from {name}: ESTOP sent to the board")
            self._stop(f"{name} received" if sig != PARENT_DEATH_SIGNAL else name, failed=sig == PARENT_DEATH_SIGNAL)
        if ctrl[LoopWord.STOP]:
            sig = int(ctrl[LoopWord.STOP])
            ctrl[LoopWord.STOP] = 0
            name = signal.Signals(sig).name if sig in set(STOP_SIGNALS) else "a stop request"
            self._estop(f"{name} to hil")
            self._stop(f"{name} received")
        self._drop_overtaken()
        for kind, payload, rid in self.shared.take():
            self._request(kind, payload, rid)
        for key, value, error, at in self.actions.done():
            if key == "reconnect":
                self._reconnect_done(value, error, at)
            elif key == "describe":
                if value:
                    self.event(f"board fault: {value}")
            else:
                self.ctl.completed(key, error, at)
        self._drop_overtaken()

    def _request(self, kind: LoopRequest, payload, rid: int = 0) -> None:
        """Carry out one request from the mailbox and answer it (accepted, or refused and why)."""
        if kind == LoopRequest.SHUTDOWN:
            self._stop("shutdown requested")
            self.shared.answer(rid, True, "shutdown: the run stops (the board is disabled first)")
            return
        if kind == LoopRequest.ESTOP:
            self._estop("a request", queued=True)
            self.shared.answer(rid, True, "e-stop: ESTOP sent to the board")
            return
        if kind in REMOTE_REQUESTS:
            self._remote(kind, payload, rid)
            return
        step = self.ctl.handle(REQUEST_EVENTS[kind], payload, queued=True)
        name = step.event.value
        if step.refused:
            self.shared.answer(rid, False, f"{name} refused: {step.refused}")
        else:
            moved = f" ({step.before.name} → {step.mode.name})" if step.mode != step.before else ""
            note = f"; {self.ctl.jog_note}" if kind == LoopRequest.JOG and self.ctl.jog_note else ""
            self.shared.answer(rid, True, f"{name}: accepted{moved}{note}")

    def _remote(self, kind: LoopRequest, payload, rid: int) -> None:
        """A motion to load or a recording to start or stop: begun here, answered when done."""
        busy = next((j for j in self._jobs if j.kind == kind), None)
        if busy is not None:
            self.shared.answer(rid, False, f"{kind.name.lower().replace('_', ' ')} refused: the last one is not done")
            return
        name = self.shared.name
        if kind == LoopRequest.LOAD_MOTION:
            if self.ctl.life.activity == MOTION:
                self.shared.answer(rid, False, f"load refused: motion '{self.motion.name}' is running; stop it first")
                return
            token = int(payload[0])
            self._jobs.append(remote.Job(rid, kind, lambda: remote.read_motion(name, token, self.model)))
        elif kind == LoopRequest.RECORD_START:
            if self.recorder is not None:
                self.shared.answer(rid, False, f"record refused: already recording into {self.record_path}")
                return
            token = int(payload[0])
            self._jobs.append(remote.Job(rid, kind, lambda: remote.record_target(name, token)))
        else:
            if self.recorder is None:
                self.shared.answer(rid, False, "record stop refused: not recording")
                return
            recorder, path, self.recorder = self.recorder, self.record_path, None
            self.event.record_into(None)
            self._jobs.append(remote.Job(rid, kind, lambda: (recorder.close(), recorder, path)[1:]))

    def _jobs_done(self) -> None:
        for job in [j for j in self._jobs if j.finished()]:
            self._jobs.remove(job)
            if job.error is not None:
                self.shared.answer(job.rid, False, f"{job.kind.name.lower().replace('_', ' ')} refused: {job.error}")
            elif job.kind == LoopRequest.LOAD_MOTION:
                self._install_motion(job.rid, job.result)
            elif job.kind == LoopRequest.RECORD_START:
                try:
                    self._start_recording(job.result)
                except (HilError, OSError) as e:
                    self.shared.answer(job.rid, False, f"record refused: {message(e)}")
                    continue
                self.shared.answer(job.rid, True, f"recording into {job.result}")
            else:
                recorder, path = job.result
                said = f"recording failed: {recorder.failure}" if recorder.failure else \
                    f"recording closed: {path} ({recorder.rows} cycles, reads back whole)"
                self.event(said)
                self.shared.answer(job.rid, not recorder.failure, said)

    def _install_motion(self, rid: int, motion) -> None:
        """A remote's planned motion becomes the loaded one (`hil ctl start` starts it)."""
        if self.ctl.life.activity == MOTION:
            self.shared.answer(rid, False, f"load refused: motion '{self.motion.name}' started meanwhile")
            return
        motion.attach(self.model, self.event)
        motion.reset(self.ctl.q_cmd)
        self.motion = self.ctl.motion = motion
        self.ctl.motion_t, self.ctl.motion_done = 0.0, False
        self.safety.check_static_balance(not motion.dynamic_balance_checked)
        note = f"; {motion.note}" if motion.note else ""
        said = f"motion '{motion.name}' loaded ({motion.duration:.1f} s){note}"
        self.event(said)
        self.shared.answer(rid, True, said)

    def _drop_overtaken(self) -> None:
        """Once the robot went toward safety by itself (a fault, an e-stop from outside the mailbox,
        overruns, a lost link): the requests to move that still wait in the mailbox were made
        before it, by a user who had not seen it, and are dropped; the ones toward safety
        (disable, stop, e-stop, shutdown) are carried out."""
        overtaken, self.ctl.overtaken_by = self.ctl.overtaken_by, ""
        if not overtaken or self.shared.words[LoopWord.HEAD] == self.shared.words[LoopWord.TAIL]:
            return
        dropped = 0
        for kind, payload, rid in self.shared.take(limit=MAILBOX_SLOTS):
            if kind in TOWARD_MOTION:
                dropped += 1
                self.shared.answer(rid, False, f"{REQUEST_EVENTS[kind].value} refused: {overtaken} came first; "
                                               "ask again")
            else:
                self._request(kind, payload, rid)
        if dropped:
            self.event(f"{overtaken}: {dropped} request{'s' if dropped > 1 else ''} to enable, clear a fault, jog or "
                       "start, posted before it, dropped: ask again")

    def _reconnect_done(self, info, error: str | None, at: float) -> None:
        if error is not None:
            self.event(f"reconnect failed: {error}")
            self._stop("link lost and the board did not come back", failed=True)
            return
        self._reconnected_at = at
        self.ctl.reconnected(at)
        self.event(f"reconnected to board {info.uid} (boot id {info.boot_id:08x}); it stays disabled until "
                   "you enable it")

    def _estop(self, source: str, queued: bool = False) -> None:
        self.ctl.handle(Ev.ESTOP, why=source, queued=queued)
        actions, self.ctl.pending_actions = self.ctl.pending_actions, []
        self._carry_out(actions)
        sent = "ESTOP sent to the board" if Action.SEND_ESTOP in actions else \
            "the board is not connected: ESTOP is sent as soon as it is back"
        self.event(f"E-STOP from {source}: {sent}")

    def _carry_out(self, actions) -> None:
        for action in actions:
            if action == Action.SEND_ESTOP:
                self.actions.cancel({Action.SEND_ENABLE, Action.SEND_CLEAR_FAULT})
                try:
                    self.link.estop()
                except Exception:  # noqa: BLE001 - a lost link: the board's watchdog stops it
                    pass
                continue
            fn = {Action.SEND_ENABLE: self.link.enable, Action.SEND_DISABLE: self.link.disable,
                  Action.SEND_CLEAR_FAULT: self.link.clear_faults}[action]
            if action == Action.SEND_DISABLE:
                self.actions.cancel({Action.SEND_ENABLE})
            if not self.actions.submit(action, fn):
                self.event(f"{action.value}: dropped, {QUEUE_LIMIT} board transactions are already waiting")

    def _send(self, out) -> None:
        try:
            self.link.send_positions(out.command, hold=out.hold)
        except LinkLostError as e:
            self.stats.link_errors += 1
            self.event(f"link lost while sending: {e.strerror or e}")

    def _recording_failed(self) -> None:
        """The recording cannot be written: said at once; the run stops (a failure) or, as asked
        (--on-record-error continue), goes on without it and ends as a failure all the same."""
        self._record_failure_said = True
        why = f"recording failed: {self.recorder.failure}"
        if self.cfg.record_errors == "continue":
            self.event(why + "; the run goes on without it (--on-record-error continue)")
        else:
            self.event(why)
            self._stop(why + "; the run was stopped (--on-record-error continue goes on without it)", failed=True)

    def _stop(self, reason: str, failed: bool = False) -> None:
        if self.stop_reason is None:
            self.stop_reason = reason
            self.stop_failed = failed
            self.stop_at = time.monotonic()
            if failed:
                self.shared.ctrl[LoopWord.STATUS] = LoopStatus.FAILED

    def _timeline(self) -> dict:
        """Seconds from the loop process's start to its first cycle, and from there to the stop."""
        first, stop = getattr(self, "first_cycle_at", None), getattr(self, "stop_at", None)
        return {"start_s": None if first is None else round(first - self.t0, 3),
                "ran_s": None if first is None or stop is None else round(stop - first, 3)}

    def _check_end(self) -> None:
        ctl, cfg = self.ctl, self.cfg
        if self.motion.failure is not None:
            self._stop(self.motion.failure + "; the robot stopped where it was", failed=True)
        elif cfg.exit_when_done and ctl.motion_done:
            self._stop("motion done")
        elif cfg.exit_when_done and cfg.headless and ctl.abandoned:
            self._stop(f"the motion can no longer finish: {ctl.abandoned}", failed=True)

    def _end_intent(self) -> None:
        """At a stop: no motion any more, and the board disabled unless it is already stopped."""
        life = self.ctl.life
        if life.mode not in (ESTOP, FAULT, DISCONNECTED, DISABLED):
            self.ctl.handle(Ev.DISABLE, why="the run ends")

    def _board_settled(self, sample) -> bool:
        """At a stop: nothing more to wait for (the board confirmed it stopped, or it is gone)."""
        mode = self.ctl.life.mode
        if mode == DISCONNECTED:
            return True
        # a fault's description (which joint, what to do) is the run's answer to "why": waited for
        return mode in (ESTOP, DISABLED, FAULT) and sample.state in STOPPED_BOARD and \
            not self.actions.busy_with(Action.SEND_DISABLE) and not self.actions.busy_with("describe") and \
            not self.actions.has_done

    # ------------------------------------------------------------------ publishing
    def _publish(self, wake: float, cycle: int, sample, stale: bool, flags: int) -> None:
        ctl, st = self.ctl, self.stats
        mode = ctl.life.mode
        activity = ctl.life.activity
        self.shared.begin_write()
        self._scalars[:] = (  # in the order of shared.CYCLE_SCALARS
            wake - self.t0, cycle, sample.state, sample.faults, flags, mode in ENABLED_MODES,
            mode == RAMPING, mode == ACTIVE and activity == MOTION, ctl.motion_progress,
            mode, activity, mode != DISCONNECTED, stale, st.misses, st.stale, st.link_errors,
            self.link.rejected_frames + self.shared.bad_requests, ctl.safety_total)
        self._q_cmd[:] = ctl.q_cmd
        self._q_meas[:] = sample.q
        self._q_target[:] = ctl.q_target
        self._qd_meas[:] = sample.qd
        np.divide(sample.current_mA, self._stall_mA, out=self._load)
        self.shared.end_write()

    def _record(self, wake: float, sample, flags: int, stale: bool, period_us: float, cycle_us: float) -> None:
        ctl = self.ctl
        mode = ctl.life.mode
        moving = mode == ACTIVE and ctl.life.activity == MOTION
        row_flags = loop_flags(mode in ENABLED_MODES, mode == RAMPING, moving, mode == HELD, mode)
        support = ctl.motion.support_at(ctl.motion_t) if moving else contacts.UNKNOWN
        self.recorder.append(wake - self.t0, ctl.q_cmd, sample.q, ctl.q_target, sample.state, sample.faults,
                             flags, stale, period_us, cycle_us, row_flags, support, sample.current_mA, sample.imu,
                             ctl.motion.plan_target(ctl.motion_t) if moving else None)

    def _publish_stats(self, T_us: float) -> None:
        window = int(1e6 / T_us)  # the last second only: the whole history would cost a deadline
        s = self.stats.summary(T_us, last=window)
        hist = self.stats.jitter_histogram(T_us, last=window)
        F = self.fields
        self.shared.begin_write()
        F["rate_hz"][0] = 1e6 / s["period_p50_us"] if s["period_p50_us"] > 0 else 0.0
        F["jitter_p50_us"][0] = s["jitter_p50_us"]
        F["jitter_p99_us"][0] = s["jitter_p99_us"]
        F["jitter_max_us"][0] = s["jitter_max_us"]
        F["cycle_p50_us"][0] = s["cycle_p50_us"]
        F["cycle_p99_us"][0] = s["cycle_p99_us"]
        F["jitter_hist"][:] = hist
        self.shared.end_write()

    # ------------------------------------------------------------------ the end
    def release_cpu(self) -> None:
        """Give the loop's CPU its idle states back (idempotent)."""
        self._release_idle()

    def _shutdown(self) -> None:
        link = self.link
        if self.actions is not None:
            # a transaction under way on a lost link (a reconnect waits seconds for the board) or of
            # an orphaned run is not waited for: the port process's end below ends it
            gone = self.orphaned or link is None or link.lost is not None
            self.actions.stop(timeout_s=0.05 if gone else 6.0)
        if link is not None:
            if link.lost is None and self.ctl.life.mode not in (ESTOP, FAULT):
                try:
                    link.disable()
                except Exception:  # noqa: BLE001 - the watchdog holds it anyway
                    pass
            link.close()  # a lost link too: the port process ends here, not at interpreter exit
        for job in self._jobs:   # a recording a remote stopped is closed whole
            job.join(10.0)
        self._jobs_done()
        if self.recorder is not None:
            self.recorder.close()
            if self.recorder.failure:
                if not self._record_failure_said:
                    self._record_failure_said = True
                    self.event(f"recording failed: {self.recorder.failure}")
            else:
                self.event(f"recording closed: {self.record_path} ({self.recorder.rows} cycles, reads back whole)")
        verdict = self._verdict()
        self._write_stats(verdict)
        if verdict:
            self.shared.ctrl[LoopWord.STATUS] = LoopStatus.FAILED
        elif self.shared.ctrl[LoopWord.STATUS] != LoopStatus.FAILED:
            self.shared.ctrl[LoopWord.STATUS] = LoopStatus.STOPPED
        if self.stop_reason is not None:  # (a loop that failed to start says why instead)
            self.event(f"loop stopped: {self.stop_reason}")
        if verdict:   # said once, last, by the supervisor, with a non-zero exit code
            self.shared.set_event(ERROR_PREFIX + verdict)

    def _verdict(self) -> str:
        """Why the run did not go as asked ("" when it did): its failed stop, else the first thing
        that moved the robot toward safety without a user asking (a fault, the board's own e-stop,
        a lost link, a fall, …), with when."""
        if self.stop_failed and self.stop_reason:
            return self.stop_reason
        if self.recorder is not None and self.recorder.failure:
            return f"recording failed: {self.recorder.failure}"
        # what follows a user's stop (a signal to the whole process group also stops helpers) is its
        # consequence, not news
        asked_at = self.stop_at if self.stop_reason is not None and not self.stop_failed else None
        incidents = [(t, what) for t, what in self.ctl.incidents if asked_at is None or t < asked_at]
        if not incidents:
            return ""
        t, what = incidents[0]
        more = f" (and {len(incidents) - 1} more such event{'s' if len(incidents) > 2 else ''} after it)" \
            if len(incidents) > 1 else ""
        # an enable the board refused was asked for; everything else came unasked
        asked = what.startswith((Ev.ENABLE_FAILED.value, Ev.ENABLE_TIMEOUT.value))
        return f"{what} at t = {t - self.t0:.2f} s{'' if asked else ', without anyone asking'}{more}"

    def _write_stats(self, verdict: str = "") -> None:
        cfg, st = self.cfg, self.stats
        summary = st.summary(1e6 / cfg.rate_hz)
        k = max(st.k + st.skipped, 1)  # deadlines: served or skipped
        steal = steal_fraction(getattr(self, "cpu_at_start", None), cpu_times(self.cpu))
        if steal is not None and steal > 0.01 and st.misses:
            where = f"cpu {self.cpu}" if self.cpu is not None else "this machine"
            self.event(f"the hypervisor took {100 * steal:.1f} % of {where}'s time during the run (steal): "
                       "on a virtual machine, most late wake-ups come from there")
        by_cause = self.tracer.summary_line()
        if by_cause:
            self.event(by_cause)
        for note in link_notes(self.link.rejected_frames if self.link else 0, st.stale, k, cfg.rate_hz,
                               self.round_trip_ms):
            self.event(note)
        if not cfg.stats_json:
            return
        ctl = self.ctl
        stats = {
            "robot": cfg.robot, "rate_hz": cfg.rate_hz, "cycles": st.k + 1, "stop_reason": self.stop_reason,
            **self._timeline(),
            **summary, "missed_deadlines": st.misses, "missed_fraction": st.misses / k,
            "skipped_deadlines": st.skipped, "port_io": cfg.port_io,
            "stale_states": st.stale, "link_errors": st.link_errors,
            "rejected_frames": self.link.rejected_frames if self.link else 0,
            "rejected_requests": self.shared.bad_requests,
            "sched_fifo": bool(self.fields["sched_fifo"][0]), "cpu": int(self.fields["cpu"][0]),
            "cpu_steal_fraction": steal, "cpu_idle": self.cpu_idle_note, "round_trip_ms": self.round_trip_ms,
            "spin_us": round(self.spin.seconds * 1e6, 1), "verdict": verdict or "as asked",
            "incidents": [{"t": round(t - self.t0, 3), "what": what} for t, what in ctl.incidents],
            "safety": ctl.safety_counts, "max_tracking_error_rad": ctl.max_track_err,
            "max_command_speed_rad_s": ctl.max_cmd_speed, "events": self.event.lines[-50:],
            "missed_deadlines_at": [[round(t, 6), round(us, 1)] for t, us in st.missed_at],
            **self.tracer.report(),
        }
        if ctl.balance.seen:   # a board with an IMU (the physics emulator's): what the robot's body did
            physics = ctl.balance.report()
            if physics["fell_at_s"] is not None:
                physics["fell_at_s"] = round(physics["fell_at_s"] - self.t0, 3)
            physics["stabiliser"] = "on" if ctl.stabiliser is not None and ctl.stabiliser.usable else "off"
            stats["physics"] = physics
        with open(cfg.stats_json, "w") as f:
            json.dump(stats, f, indent=1)
