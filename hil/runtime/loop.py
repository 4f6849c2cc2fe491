"""The real-time loop, in its own process (`run_loop(config)` is the process entry).

One cycle (ARCHITECTURE.md):
1. take the newest STATE from the link (non-blocking; count it stale if none arrived);
2. handle the e-stop word and the mailbox; ask the motion source for the next target;
3. safety: one Numba call clamps into the ranges and to the velocity limit (the ramp speed while
   ramping in from the measured pose), and checks floor, workspace, self-collision and balance,
   holding the previous command with a named reason if one fails;
4. send one CMD_POS for all joints (never wait for the reply);
5. publish to shared memory, hand the row to the recorder;
6. account timing; sleep, then spin to the next deadline.

Policies: a lost link holds (nothing is sent; the board's watchdog latches within 50 ms), then the
loop tries to reconnect to the same board for `reconnect_s`; it comes back disabled and is never
re-enabled by the loop. More than `hold_after_misses` consecutive missed deadlines pause the motion
(the command is held); more than `disable_after_misses` disable the board. SIGINT/SIGTERM send
ESTOP at once, then the loop disables the board, closes the recording and exits.
"""

from __future__ import annotations

import json
import math
import os
import signal
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from hil.runtime.misses import MissTracer
from hil.safety import HELD, RATE, flag_names
from hil.safety._kernel import I_STEP, I_TO_TARGET, I_TRACK

# The cache warm-up before a cycle (see `run`) is skipped when less than this is left before the
# deadline: a late wake-up must not be made later.
WARM_MARGIN_S = 100e-6
# The live statistics (twice a second, ~40 µs) wait for a cycle that leaves at least this much
# before the next deadline.
PUBLISH_MARGIN_S = 300e-6
# Missed deadlines listed one by one in the statistics file (which, how late): a period in their
# times points at whatever recurs (the live statistics did, every 0.5 s, before they were made cheap).
MISSES_KEPT = 1000


@dataclass(frozen=True)
class LoopConfig:
    robot: str
    port: str
    shm_name: str
    rate_hz: float = 500.0
    duration_s: float | None = None
    baud: int = 1_000_000
    record: str | None = None
    stats_json: str | None = None
    motion: str | None = None
    enable: bool = False
    start_motion: bool = True
    exit_when_done: bool = False
    realtime: bool = True
    keep_cpu_awake: bool = True  # with realtime: no idle states on the loop's CPU (see cpu_idle.py)
    spin_us: float = 500.0
    ramp_fraction: float = 0.25
    link_timeout_s: float = 0.25
    reconnect_s: float = 3.0
    hold_after_misses: int = 5
    disable_after_misses: int = 50
    calibration: str | None = None
    # where the serial port's reads and writes run: "process" (port_process.py: the loop shares no
    # GIL and no lock with them), "thread" (port_worker.py) or "inline" (on the loop's own thread)
    port_io: str = "process"
    extra: dict = field(default_factory=dict)


PORT_IO_NOTES = {"process": "in its own process", "thread": "on a thread of the loop's process",
                 "inline": "on the loop's thread"}


class _Stats:
    def __init__(self, size: int = 16384) -> None:
        self.periods = np.zeros(size)
        self.cycles = np.zeros(size)
        self.compute = np.zeros(size)  # cycle time minus the time in the serial port's read and write
        self.k = 0
        self.count = 0
        self.misses = 0
        self.skipped = 0  # deadlines a stall or an overrun passed over, served by no cycle (also in misses)
        # (the deadline, s since start; how late it was served, µs), the first MISSES_KEPT, in time order
        self.missed_at: list[tuple[float, float]] = []
        self.stale = 0
        self.link_errors = 0
        self.safety_counts: dict[str, int] = {}
        self.max_track_err = 0.0
        self.max_cmd_speed = 0.0
        self.events: list[str] = []

    def add(self, period_us: float, cycle_us: float, compute_us: float) -> None:
        i = self.k % self.periods.size
        self.periods[i] = period_us
        self.cycles[i] = cycle_us
        self.compute[i] = compute_us
        self.k += 1

    def window(self, last: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(periods, cycles, compute) of all kept samples, or of the `last` ones, oldest first (µs)."""
        size = self.periods.size
        n = min(self.k, size) if last is None else min(self.k, size, last)
        start = (self.k - n) % size
        if start + n <= size:
            pick = slice(start, start + n)
            return self.periods[pick], self.cycles[pick], self.compute[pick]
        idx = np.arange(start, start + n) % size
        return self.periods[idx], self.cycles[idx], self.compute[idx]

    def summary(self, T_us: float, last: int | None = None) -> dict:
        """Timing statistics (µs) over all kept samples, or over the `last` ones.

        Percentiles are nearest-rank (the sample at rank ⌈p·n⌉), found by one partial sort per
        series: the live display runs this between two cycles every half second, where NumPy's
        interpolating `percentile` took 0.85 ms warm and 1.3–1.9 ms inside the loop, a missed
        deadline at 1 kHz each time; this takes ~40 µs."""
        p, c, comp = self.window(last)
        n = len(p)
        keys = ("jitter_p50_us", "jitter_p99_us", "jitter_max_us", "period_p50_us", "cycle_p50_us",
                "cycle_p99_us", "cycle_max_us", "compute_p50_us", "compute_p99_us")
        if n == 0:
            return dict.fromkeys(keys, 0.0)
        r50, r99 = max(math.ceil(0.5 * n) - 1, 0), max(math.ceil(0.99 * n) - 1, 0)
        jit = np.partition(np.abs(p - T_us), (r50, r99, n - 1))
        cyc = np.partition(c, (r50, r99, n - 1))
        comp = np.partition(comp, (r50, r99))
        per = np.partition(p, r50)
        values = (jit[r50], jit[r99], jit[n - 1], per[r50], cyc[r50], cyc[r99], cyc[n - 1], comp[r50], comp[r99])
        return {k: float(v) for k, v in zip(keys, values)}

    def jitter_histogram(self, T_us: float, last: int | None = None) -> np.ndarray:
        """Counts of |period − T| in 20 bins of 100 µs; the last bin holds everything from 1.9 ms up."""
        bins = (np.minimum(np.abs(self.window(last)[0] - T_us), 1999.0) * 0.01).astype(np.intp)
        return np.bincount(bins, minlength=20)


def next_deadline_after(deadline: float, now: float, period: float,
                        woke: float | None = None) -> tuple[float, int, float]:
    """After serving `deadline` (s, monotonic clock; the cycle woke at `woke` and ends at `now`):
    the next deadline on the loop's grid, how many grid deadlines are skipped, and the time to
    wake for it — the deadline, but never sooner than half a period after `woke`.

    Cycles never follow each other closer than half a period, and the loop never catches up by
    serving passed deadlines back to back: that sent the board a burst of commands (up to ten
    within a few hundred µs after a stall), each a full period's step of the motion, so the
    motion briefly ran several times its planned speed. A deadline that could only be served
    more than half a period late — a miss either way — is skipped instead (counted as missed; the
    motion pauses for it); none other is."""
    earliest = now if woke is None else max(now, woke + period / 2)
    passed = max(int((earliest - period / 2 - deadline) / period), 0)  # grid deadlines too far behind
    following = deadline + (passed + 1) * period
    return following, passed, max(following, earliest)


def sleep_before(wake_at: float, spin_s: float, tracer: MissTracer) -> None:
    """Sleep until `spin_s` before `wake_at` (s, monotonic clock; the caller spins the rest),
    telling `tracer` what was asked and when the sleep ended. The loop and rt-check's floor both
    use it, so the floor measures the loop's own sleep."""
    start = time.monotonic()
    sleep_for = wake_at - start - spin_s
    tracer.sleeping(start, sleep_for)
    if sleep_for > 0:
        time.sleep(sleep_for)
    tracer.awake(time.monotonic())


def round_trip_warning(port: str, trips_ms: list[float], rate_hz: float, low_latency: bool | None) -> str | None:
    """The warning for command → STATE round trips (ms) longer than a cycle at `rate_hz` (and than
    5 ms), naming the likely cause and its fix; None when they are short enough."""
    trips = sorted(trips_ms)
    median = trips[len(trips) // 2]
    period_ms = 1e3 / rate_hz
    if median <= max(5.0, period_ms):
        return None
    dev = os.path.basename(os.path.realpath(port))
    if dev.startswith("ttyUSB"):
        fix = (f"if it is an FTDI adapter its latency timer is probably at the default 16 ms: "
               f"echo 1 | sudo tee /sys/bus/usb-serial/devices/{dev}/latency_timer "
               f"(or setserial {port} low_latency)")
    else:
        fix = "the adapter or the board buffers its replies; a USB CDC-ACM board or an adapter with a 1 ms latency timer avoids it"
    if low_latency is False:
        fix += "; hil could not switch this port to low-latency mode itself"
    return (f"warning: round trip to the board is {median:.1f} ms (median of {len(trips)}, "
            f"{trips[0]:.1f}–{trips[-1]:.1f} ms), longer than one {rate_hz:.0f} Hz cycle "
            f"({period_ms:.1f} ms): measured states will lag the commands. {fix}")


def cpu_times(cpu: int | None) -> tuple[int, int] | None:
    """(steal, total) clock ticks of one CPU (None: all CPUs) from /proc/stat, or None off Linux.

    Steal is time the hypervisor ran something else while this virtual CPU wanted to run: on a
    VM it shows up as late wake-ups no scheduling policy inside the guest can prevent."""
    key = "cpu" if cpu is None else f"cpu{cpu}"
    try:
        with open("/proc/stat") as f:
            for line in f:
                parts = line.split()
                if parts and parts[0] == key:
                    ticks = [int(x) for x in parts[1:9]]  # user nice system idle iowait irq softirq steal
                    return ticks[7], sum(ticks)
    except (OSError, ValueError, IndexError):
        pass
    return None


def steal_fraction(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    """Share of the CPU's time taken by the hypervisor between two `cpu_times` readings."""
    if before is None or after is None or after[1] <= before[1]:
        return None
    return (after[0] - before[0]) / (after[1] - before[1])


@dataclass
class RealtimeGrant:
    """What the calling process obtained: SCHED_FIFO, the CPU it is pinned to, a note for the user
    saying all of it, and `release` giving the CPU its idle states back (idempotent)."""
    sched_fifo: bool
    cpu: int | None
    note: str
    cpu_idle_note: str
    release: Callable[[], None]


def loop_cpu_choice() -> int | None:
    """The CPU `claim_realtime` pins the loop to: the last one this process may use (None with one)."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except (OSError, AttributeError):
        return None
    return cpus[-1] if len(cpus) > 1 else None


def leave_the_loop_cpu(loop_cpu: int | None, fifo: bool) -> None:
    """For a helper of the loop (the port thread or process), in the calling thread: SCHED_FIFO 40
    when `fifo` (one step below the loop: it holds the port, and an ordinary process preempting it
    there would hold the loop up behind it), and every CPU but the loop's — a helper of equal
    priority stuck in a system call on the loop's CPU would delay the loop's wake-up. What is
    refused is left as it was."""
    if fifo:
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(40))
        except (PermissionError, OSError, AttributeError):
            pass
    if loop_cpu is not None:
        try:
            others = set(range(os.cpu_count() or 1)) - {loop_cpu}
            if others:
                os.sched_setaffinity(0, others)
        except (OSError, AttributeError):
            pass


def claim_realtime(realtime: bool, keep_cpu_awake: bool = True) -> RealtimeGrant:
    """Ask for what the loop runs with: SCHED_FIFO 50, pinning to the last allowed CPU, and that CPU
    kept out of idle states (see cpu_idle.py). Whatever is refused is said in the note; nothing
    raises. Changes the calling process's scheduling: call it in the process that will run."""
    notes = []
    fifo = False
    cpu = None
    if realtime:
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(50))
            fifo = True
            notes.append("SCHED_FIFO 50 granted")
        except (PermissionError, OSError, AttributeError) as e:
            notes.append(f"SCHED_FIFO not permitted ({e.__class__.__name__}); normal scheduling")
        try:
            cpu = loop_cpu_choice()
            if cpu is not None:
                os.sched_setaffinity(0, {cpu})
                notes.append(f"pinned to cpu {cpu}")
        except (OSError, AttributeError):
            cpu = None
            notes.append("cpu affinity not permitted")
    else:
        notes.append("realtime scheduling not requested")
    release, idle_note = (lambda: None), "idle states allowed (not requested)"
    if realtime and keep_cpu_awake:
        from hil.runtime.cpu_idle import hold_cpu_awake

        release, idle_note = hold_cpu_awake(cpu)
        notes.append(idle_note)
    return RealtimeGrant(fifo, cpu, ", ".join(notes), idle_note, release)


def run_loop(cfg: LoopConfig) -> int:
    """Process entry point. Returns 0 on a normal stop, 1 on failure."""
    os.environ.setdefault("NUMBA_CACHE_DIR", os.path.join(os.path.expanduser("~"), ".cache", "hil", "numba"))
    from hil.runtime.shared import SharedState, LoopStatus, C_STATUS, C_PID

    shared = SharedState(cfg.shm_name)
    shared.ctrl[C_PID] = os.getpid()
    loop = None
    try:
        loop = Loop(cfg, shared)
        return loop.run()
    except BaseException as e:  # report anything, then fail
        from hil.errors import HilError
        from firmware_protocol.errors import ProtocolLibError

        shared.set_event(f"loop failed: {e}")
        shared.ctrl[C_STATUS] = LoopStatus.FAILED
        if isinstance(e, (HilError, ProtocolLibError)):
            print(f"hil run: {e}", file=sys.stderr)  # an expected failure: the message says it all
        elif not isinstance(e, SystemExit):
            traceback.print_exc()
        return 1
    finally:
        if loop is not None:
            loop.release_cpu()
        shared.close()


class Loop:
    def __init__(self, cfg: LoopConfig, shared) -> None:
        from firmware_protocol import messages as M
        from firmware_protocol.link import Link
        from hil import robots
        from hil.runtime.motion import Jog, make_motion
        from hil.safety import SafetyChecker

        self.M = M
        self.cfg = cfg
        self.shared = shared
        self.model = robots.load(cfg.robot)
        self.safety = SafetyChecker(self.model)
        self.motion = make_motion(cfg.motion, self.model)
        self.jog_cls = Jog
        self.n = self.model.n
        self.stats = _Stats()
        self.tracer = MissTracer(MISSES_KEPT)
        self.stop_flag = False
        self.stop_reason = "stopped"
        self.link: Link | None = None
        self._worker_lock = threading.Lock()
        self._pending: list = []
        self.recorder = None
        self._release_idle = lambda: None
        self.cpu_idle_note = "idle states allowed (not requested)"
        self.fields = {k: shared.field(k) for k in shared.layout if not k.startswith("_")}
        self.connect_info = ""
        self.Link = Link
        if getattr(self.motion, "dynamic_balance_checked", False):
            # a walk leaves the static support polygon by design; its ZMP was checked at plan time
            self.safety.bal[0] = 0.0
            self.static_balance_note = "static balance check off for this motion: its ZMP was checked when planned"
        else:
            self.static_balance_note = ""
        # compile (or load from the cache) every kernel the cycle uses now, not in the first cycle
        q = self.model.home.copy()
        self.safety.step(q, q.copy(), 0.001, 1.0, q.copy(), q.copy())
        self.motion.reset(q)
        self.motion.target(0.0)

    # ------------------------------------------------------------------ events
    def event(self, text: str) -> None:
        stamp = f"[{time.monotonic() - self.t0:8.3f} s] {text}" if hasattr(self, "t0") else text
        self.stats.events.append(stamp)
        self.shared.set_event(text)

    # ----------------------------------------------------------------- helpers
    def _in_worker(self, what: str, fn) -> None:
        """Run a board transaction off the loop thread (it may wait up to ~150 ms for an ACK)."""

        def work():
            try:
                fn()
                self.event(f"{what}: done")
            except Exception as e:  # noqa: BLE001 - reported as an event
                self.event(f"{what} failed: {e}")

        threading.Thread(target=work, name=f"hil-{what}", daemon=True).start()

    def _check_round_trip(self) -> None:
        """Time a few command → STATE round trips before the loop starts; warn when they take longer
        than a cycle (journey: an FTDI adapter at its default 16 ms latency timer)."""
        trips = sorted(self.link.round_trips_ms(5))
        self.round_trip_ms = trips
        low_latency = self.link.info.low_latency if self.link.info is not None else None
        warning = round_trip_warning(self.cfg.port, trips, self.cfg.rate_hz, low_latency)
        if warning:
            self.event(warning)

    def _estop(self, source: str) -> None:
        if self.link is not None:
            try:
                self.link.estop()
            except Exception:  # noqa: BLE001 - the board's watchdog is the fallback
                pass
        self.motion_running = False
        self.event(f"E-STOP from {source}: ESTOP sent to the board")

    def _connect(self):
        from hil import calibration_io

        if self.cfg.port_io == "process":
            from hil.runtime.port_process import PortLink

            link = PortLink(self.cfg.port, self.cfg.baud, self.cfg.link_timeout_s, self.n, self.cfg.realtime)
        else:
            link = self.Link.connect(self.cfg.port, self.cfg.baud, self.cfg.link_timeout_s,
                                     expect_joints=self.n, threaded=False)
        jm = calibration_io.joint_map_for(self.model, link.info, self.cfg.calibration, self.event)
        if jm is not None:
            link.joint_map = jm
        return link

    # --------------------------------------------------------------------- run
    def run(self) -> int:
        from hil.runtime.recorder import Recorder
        from hil.runtime.shared import C_ESTOP, C_STATUS, LoopStatus

        cfg, M = self.cfg, self.M
        shared = self.shared
        self.t0 = time.monotonic()

        def on_signal(signum, frame):
            self._estop(signal.Signals(signum).name)
            self.stop_flag = True
            self.stop_reason = f"{signal.Signals(signum).name} received"

        signal.signal(signal.SIGINT, on_signal)
        signal.signal(signal.SIGTERM, on_signal)

        # the port process (if any) is forked here: before the loop's real-time claim, which it
        # must not inherit (it sets its own signal handling first thing)
        self.link = self._connect()
        grant = claim_realtime(cfg.realtime, cfg.keep_cpu_awake)
        fifo, cpu, sched_note = grant.sched_fifo, grant.cpu, grant.note
        self.cpu = cpu
        self._release_idle, self.cpu_idle_note = grant.release, grant.cpu_idle_note
        self.cpu_at_start = cpu_times(cpu)
        # other threads of this process (recorder, transactions) must hand the GIL back quickly
        sys.setswitchinterval(1e-4)

        info = self.link.info
        self.event(f"connected: {info.kind_name} fw {info.firmware}, {info.n_joints} joints, uid {info.uid}, "
                   f"handshake {info.handshake_ms:.1f} ms; loop {cfg.rate_hz:.0f} Hz, {sched_note}; "
                   f"port I/O {PORT_IO_NOTES[cfg.port_io]}")
        if self.static_balance_note:
            self.event(self.static_balance_note)
        first = None
        deadline = time.monotonic() + 1.0
        while first is None and time.monotonic() < deadline:
            self.link.send_positions(np.zeros(self.n), hold=True)  # any command frame gets a STATE back
            time.sleep(0.005)
            first = self.link.poll()
        if first is None:
            raise RuntimeError(f"no STATE from the board on {cfg.port} within 1 s")
        self._check_round_trip()
        self.worker = None
        if cfg.port_io == "thread":
            from hil.runtime.port_worker import PortWorker

            self.worker = PortWorker(self.link)
            self.worker.latest = first
            self.worker.start()
        q_meas = first.q.copy()
        q_cmd = q_meas.copy()
        q_prev = q_cmd.copy()
        q_target = q_cmd.copy()
        self.motion.reset(q_meas)
        motion_t = 0.0
        self.motion_running = False
        want_motion = bool(cfg.start_motion and cfg.motion)
        ramping = False
        enabled = False
        last_seq = -1
        consecutive_misses = 0  # missed deadlines in a row, the skipped ones included
        skipped = 0
        held_reason = 0
        T = 1.0 / cfg.rate_hz
        T_us = T * 1e6
        spin = cfg.spin_us * 1e-6
        if cfg.record:
            meta = {"robot": cfg.robot, "joints": list(self.model.joint_names), "rate_hz": cfg.rate_hz,
                    "port": cfg.port, "board_uid": info.uid, "started": time.time(), "units": "SI (s, rad)"}
            self.recorder = Recorder(cfg.record, self.n, meta)
        if cfg.enable:
            self._in_worker("enable", self.link.enable)
        F = self.fields
        F["sched_fifo"][0] = 1.0 if fifo else 0.0
        F["cpu"][0] = -1 if cpu is None else cpu
        shared.ctrl[C_STATUS] = LoopStatus.RUNNING
        last_stats = time.monotonic()
        next_deadline = time.monotonic() + T
        last_wake = time.monotonic()
        cycle = 0
        end_time = None if cfg.duration_s is None else self.t0 + cfg.duration_s
        link_ok = True
        sample = first
        warm_out = np.zeros(self.model.n)
        tracer = self.tracer
        try:
            draining_until = None
            while True:
                if self.stop_flag and draining_until is None:
                    # keep cycling briefly (no motion) so the board's answer to the stop is seen and recorded
                    draining_until = time.monotonic() + 0.3
                    want_motion = False
                    self.motion_running = False
                wake = time.monotonic()
                if draining_until is not None and (wake > draining_until or sample.state in (
                        M.BoardState.ESTOP, M.BoardState.DISABLED, M.BoardState.FAULT)):
                    break
                period_us = (wake - last_wake) * 1e6
                last_wake = wake
                late = wake - next_deadline  # how late this wake-up is against its deadline
                tracer.woke(wake, next_deadline - self.t0, late, cycle > 0 and late > T / 2, T)
                if cycle > 0 and late > T / 2:
                    self.stats.misses += 1
                    if len(self.stats.missed_at) < MISSES_KEPT:
                        self.stats.missed_at.append((next_deadline - self.t0, late * 1e6))
                    consecutive_misses += 1
                elif not skipped:  # on time, and the cycle before skipped nothing
                    consecutive_misses = 0
                if end_time is not None and wake >= end_time and not self.stop_flag:
                    self.stop_reason = f"duration {cfg.duration_s:g} s reached"
                    self.stop_flag = True

                # 1. newest state
                wire = 0.0
                stale = False
                if link_ok:
                    try:
                        t_w = time.monotonic()
                        if self.worker is not None:
                            if self.worker.error is not None:
                                raise self.worker.error
                            s = self.worker.latest
                        else:
                            s = self.link.poll()
                        wire = time.monotonic() - t_w
                        if s is not None:
                            sample = s
                        if sample.seq == last_seq:
                            stale = True
                            self.stats.stale += 1
                        last_seq = sample.seq
                    except Exception as e:  # LinkLostError
                        link_ok = False
                        self.stats.link_errors += 1
                        self.motion_running = False
                        self.event(f"link lost: {e} — holding; the board's watchdog has stopped it")
                if not link_ok:
                    if self.worker is not None:
                        self.worker.stop()
                    if not self._reconnect():
                        self.stop_reason = "link lost and the board did not come back"
                        shared.ctrl[C_STATUS] = LoopStatus.FAILED
                        raise SystemExit(1)
                    link_ok = True
                    sample = self.link.poll() or sample
                    if self.worker is not None:
                        from hil.runtime.port_worker import PortWorker

                        self.worker = PortWorker(self.link)
                        self.worker.latest = sample
                        self.worker.start()
                    q_meas = sample.q.copy()
                    q_cmd = q_meas.copy()
                    enabled = False
                    next_deadline = time.monotonic() + T
                    skipped = consecutive_misses = 0  # a new start: the reconnect's wait was no overrun
                    continue
                q_meas = sample.q
                board_enabled = sample.state == M.BoardState.ENABLED

                # 2. requests
                if shared.ctrl[C_ESTOP]:
                    shared.ctrl[C_ESTOP] = 0
                    self._estop("the twin or CLI")
                for kind, payload in shared.take():
                    self._request(kind, payload)
                if self._pending:
                    with self._worker_lock:
                        pend, self._pending = self._pending, []
                    for what, arg in pend:
                        if what == "jog":
                            if not isinstance(self.motion, self.jog_cls):
                                self.motion = self.jog_cls()
                                self.motion.reset(q_cmd)
                            self.motion.set(arg)
                            want_motion = True
                            ramping = True  # a jog is a jump asked for at once: always ramp to it
                        elif what == "start":
                            want_motion = True
                            ramping = True
                        elif what == "stop":
                            want_motion = False
                            self.motion_running = False

                # 3. targets and safety
                if board_enabled and not enabled:
                    enabled = True
                    ramping = True  # ramp in from the measured pose
                    q_cmd = q_meas.copy()
                    self.event("board enabled: ramping in from the measured pose")
                elif not board_enabled and enabled:
                    enabled = False
                    self.motion_running = False
                    self.event(f"board left ENABLED (state {M.BoardState(sample.state).name}, "
                               f"faults {sample.faults:#x}); holding")
                flags = 0
                if enabled:
                    if consecutive_misses > cfg.disable_after_misses:
                        self._in_worker("disable (deadline overruns)", self.link.disable)
                        consecutive_misses = 0
                    if want_motion and not self.motion_running and not ramping:
                        ramping = True
                    if want_motion:
                        q_target = self.motion.target(motion_t)
                    else:
                        q_target = q_cmd
                    paused = consecutive_misses > cfg.hold_after_misses
                    if paused:
                        q_target = q_cmd
                    np.copyto(q_prev, q_cmd)
                    flags = self.safety.step(q_target, q_prev, T, cfg.ramp_fraction if ramping else 1.0, q_cmd, q_meas)
                    info = self.safety.info
                    if ramping and not paused and not flags & HELD and info[I_TO_TARGET] < 1e-4:
                        ramping = False
                        if want_motion and not self.motion_running:
                            self.motion_running = True
                            self.event(f"ramp-in done; motion '{self.motion.name}' running")
                    if flags & HELD:
                        self.motion_running = False
                        if flags != held_reason:
                            reasons = self.safety.explain(flags, np.ascontiguousarray(q_target, dtype=np.float64))
                            self.event("safety: " + "; ".join(reasons or flag_names(flags)) + " — command held")
                            for name in flag_names(flags):
                                self.stats.safety_counts[name] = self.stats.safety_counts.get(name, 0) + 1
                    elif flags & ~RATE and flags != held_reason:
                        for name in flag_names(flags):
                            self.stats.safety_counts[name] = self.stats.safety_counts.get(name, 0) + 1
                        self.event("safety: " + ", ".join(flag_names(flags)) + " — clamped")
                    held_reason = flags
                    if self.motion_running and not paused and not flags & HELD:
                        motion_t += T
                        if self.motion.done(motion_t):
                            want_motion = False
                            self.motion_running = False
                            self.event(f"motion '{self.motion.name}' done")
                            if cfg.exit_when_done:
                                self.stop_reason = "motion done"
                                self.stop_flag = True
                    speed = info[I_STEP] / T
                    if speed > self.stats.max_cmd_speed:
                        self.stats.max_cmd_speed = speed
                    if info[I_TRACK] > self.stats.max_track_err:
                        self.stats.max_track_err = info[I_TRACK]
                else:
                    np.copyto(q_cmd, q_meas)  # follow the measured pose: the next enable ramps from here
                    q_target = q_cmd
                    ramping = False

                # 4. send (even when disabled: the board answers with a fresh STATE every cycle)
                try:
                    t_w = time.monotonic()
                    if self.worker is not None:
                        self.worker.submit(q_cmd)
                    else:
                        self.link.send_positions(q_cmd)
                    wire += time.monotonic() - t_w
                except Exception as e:
                    link_ok = False
                    self.stats.link_errors += 1
                    self.event(f"link lost while sending: {e}")

                # 5. publish and record
                cycle_us = (time.monotonic() - wake) * 1e6
                shared.begin_write()
                F["t"][0] = wake - self.t0
                F["cycle"][0] = cycle
                F["q_cmd"][:] = q_cmd
                F["q_meas"][:] = q_meas
                F["q_target"][:] = q_target
                F["qd_meas"][:] = sample.qd
                F["board_state"][0] = sample.state
                F["faults"][0] = sample.faults
                F["safety_flags"][0] = flags
                F["enabled"][0] = 1.0 if enabled else 0.0
                F["ramping"][0] = 1.0 if ramping else 0.0
                F["motion_running"][0] = 1.0 if self.motion_running else 0.0
                dur = self.motion.duration
                # -1 marks an endless motion (demo, jog) so displays do not show a progress stuck at 0 %.
                if not math.isfinite(dur):
                    F["motion_progress"][0] = -1.0
                else:
                    F["motion_progress"][0] = min(1.0, motion_t / dur) if dur > 0 else 0.0
                F["link_ok"][0] = 1.0 if link_ok else 0.0
                F["stale"][0] = 1.0 if stale else 0.0
                F["misses"][0] = self.stats.misses
                F["stale_total"][0] = self.stats.stale
                F["link_errors"][0] = self.stats.link_errors
                F["decoder_drops"][0] = self.link.decoder.stats.dropped
                F["safety_total"][0] = sum(self.stats.safety_counts.values())
                shared.end_write()
                if self.recorder is not None:
                    self.recorder.append(wake - self.t0, q_cmd, q_meas, q_target, sample.state, sample.faults,
                                         flags, stale, period_us, cycle_us,
                                         (1 if enabled else 0) | (2 if ramping else 0) | (4 if self.motion_running else 0))

                # 6. timing
                if cycle > 0:
                    self.stats.add(period_us, cycle_us, cycle_us - wire * 1e6)
                cycle += 1
                now = time.monotonic()
                served = next_deadline
                next_deadline, skipped, wake_at = next_deadline_after(served, now, T, woke=wake)
                if skipped:  # never served: missed as well
                    self.stats.skipped += skipped
                    self.stats.misses += skipped
                    consecutive_misses += skipped
                    tracer.passed(now, served + T - self.t0, served + T, skipped)
                    for k in range(1, min(skipped, MISSES_KEPT - len(self.stats.missed_at)) + 1):
                        # how late it could have been served at best: after this cycle, and half a
                        # period after its wake-up (more than T/2, or it would not be skipped)
                        at_best = max(now, wake + T / 2)
                        self.stats.missed_at.append((served + k * T - self.t0, (at_best - served - k * T) * 1e6))
                if now - last_stats > 0.5 and wake_at - now > PUBLISH_MARGIN_S:
                    # only in a cycle with time to spare: a late cycle does not get later
                    last_stats = now
                    self._publish_stats(T_us)
                sleep_before(wake_at, spin, tracer)
                if enabled and wake_at - time.monotonic() > WARM_MARGIN_S:
                    # Rehearse the cycle's Python and kernels on throwaway outputs while spinning:
                    # after a sleep the caches are cold (on a VM the core ran someone else), and the
                    # motion target and safety step then took 5× their warm time (compute p50
                    # 49 → 38 µs at 1 kHz with this, benchmarks/README.md). Both are pure: the real
                    # calls below recompute everything they return.
                    if want_motion:
                        self.motion.target(motion_t)
                    self.safety.step(q_cmd, q_cmd, T, 1.0, warm_out, q_meas)
                while time.monotonic() < wake_at:
                    pass
        finally:
            self._shutdown()
        return 0 if shared.ctrl[C_STATUS] != LoopStatus.FAILED else 1

    def _request(self, kind: int, payload: np.ndarray) -> None:
        from hil.runtime.shared import Request

        if kind == Request.ESTOP:
            self._estop("the mailbox")
        elif kind == Request.ENABLE:
            self._in_worker("enable", self.link.enable)
        elif kind == Request.DISABLE:
            self._in_worker("disable", self.link.disable)
        elif kind == Request.CLEAR_FAULT:
            self._in_worker("clear faults", self.link.clear_faults)
        elif kind == Request.JOG:
            with self._worker_lock:
                self._pending.append(("jog", payload[:self.n].copy()))
        elif kind == Request.START_MOTION:
            with self._worker_lock:
                self._pending.append(("start", None))
        elif kind == Request.STOP_MOTION:
            with self._worker_lock:
                self._pending.append(("stop", None))
        elif kind == Request.SHUTDOWN:
            self.stop_flag = True
            self.stop_reason = "shutdown requested"

    def _reconnect(self) -> bool:
        try:
            info = self.link.reconnect(timeout_s=self.cfg.reconnect_s)
        except Exception as e:  # noqa: BLE001
            self.event(f"reconnect failed: {e}")
            return False
        self.event(f"reconnected to board {info.uid} (boot id {info.boot_id:08x}); it stays disabled until "
                   "you enable it")
        return True

    def _publish_stats(self, T_us: float) -> None:
        # the last second only: over the whole 16k-sample history this cost ~2.5 ms, a missed
        # deadline twice a second at 1 kHz
        window = int(1e6 / T_us)
        s = self.stats.summary(T_us, last=window)
        hist = self.stats.jitter_histogram(T_us, last=window)
        F = self.fields
        self.shared.begin_write()
        F["rate_hz"][0] = 1e6 / s["period_p50_us"] if s["period_p50_us"] > 0 else 0.0
        F["period_p50_us"][0] = s["jitter_p50_us"]
        F["period_p99_us"][0] = s["jitter_p99_us"]
        F["period_max_us"][0] = s["jitter_max_us"]
        F["cycle_p50_us"][0] = s["cycle_p50_us"]
        F["cycle_p99_us"][0] = s["cycle_p99_us"]
        F["jitter_hist"][:] = hist
        self.shared.end_write()

    def release_cpu(self) -> None:
        """Give the loop's CPU its idle states back (idempotent; the supervisor checks again)."""
        self._release_idle()

    def _shutdown(self) -> None:
        from hil.runtime.shared import C_STATUS, LoopStatus

        cfg = self.cfg
        link = self.link
        if getattr(self, "worker", None) is not None:
            self.worker.stop()
        if link is not None:
            if link.lost is None:
                try:
                    link.disable()
                except Exception:  # noqa: BLE001 - the watchdog holds it anyway
                    pass
            link.close()  # a lost link too: the port process ends here, not at interpreter exit
        if self.recorder is not None:
            self.recorder.close()
            self.event(f"recording closed: {cfg.record} ({self.recorder.rows} cycles)")
        T_us = 1e6 / cfg.rate_hz
        summary = self.stats.summary(T_us)
        k = max(self.stats.k + self.stats.skipped, 1)  # deadlines: served or skipped
        steal = steal_fraction(getattr(self, "cpu_at_start", None), cpu_times(getattr(self, "cpu", None)))
        if steal is not None and steal > 0.01 and self.stats.misses:
            where = f"cpu {self.cpu}" if getattr(self, "cpu", None) is not None else "this machine"
            self.event(f"the hypervisor took {100 * steal:.1f} % of {where}'s time during the run (steal): "
                       "on a virtual machine, most late wake-ups come from there")
        by_cause = self.tracer.summary_line()
        if by_cause:
            self.event(by_cause)
        stats = {
            "robot": cfg.robot, "rate_hz": cfg.rate_hz, "cycles": self.stats.k + 1, "stop_reason": self.stop_reason,
            **summary, "missed_deadlines": self.stats.misses, "missed_fraction": self.stats.misses / k,
            "skipped_deadlines": self.stats.skipped, "port_io": cfg.port_io,
            "stale_states": self.stats.stale, "link_errors": self.stats.link_errors,
            "decoder_drops": link.decoder.stats.dropped if link else 0,
            "sched_fifo": bool(self.fields["sched_fifo"][0]), "cpu": int(self.fields["cpu"][0]),
            "cpu_steal_fraction": steal, "cpu_idle": self.cpu_idle_note, "round_trip_ms": getattr(self, "round_trip_ms", None),
            "safety": self.stats.safety_counts, "max_tracking_error_rad": self.stats.max_track_err,
            "max_command_speed_rad_s": self.stats.max_cmd_speed, "events": self.stats.events[-50:],
            "missed_deadlines_at": [[round(t, 6), round(us, 1)] for t, us in self.stats.missed_at],
            **self.tracer.report(),
        }
        if cfg.stats_json:
            with open(cfg.stats_json, "w") as f:
                json.dump(stats, f, indent=1)
        if self.shared.ctrl[C_STATUS] != LoopStatus.FAILED:
            self.shared.ctrl[C_STATUS] = LoopStatus.STOPPED
        self.event(f"loop stopped: {self.stop_reason}")
