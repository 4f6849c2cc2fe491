"""Why a deadline was missed: each late wake-up of the loop taken apart into what the loop's own
thread was doing in the cycle before it.

A missed deadline is a wake-up more than half a period late. Between the previous wake-up and the
late one the loop thread works, sleeps until just before the deadline, then spins; the tracer
reads the thread's CPU time (~0.8 µs) at the wake-up and before the sleep and its context switches
(getrusage(RUSAGE_THREAD), ~1 µs) at the wake-up, so each miss is split into:

- **work**: CPU time the cycle itself used (its kinematics, safety, I/O hand-over, Python);
- **taken**: wall time while the thread was runnable but not running. The kernel leaves time the
  hypervisor ran someone else out of a thread's CPU time where it accounts steal
  (CONFIG_PARAVIRT_TIME_ACCOUNTING, usual on KVM guests), so on a VM this is mostly steal; a
  context switch in the same stretch names another cause: an involuntary one, a task of higher
  priority on the loop's CPU; a voluntary one beyond the sleep, a wait for the GIL or a lock;
- **late wake-up**: how much longer the sleep lasted than asked (the timer's interrupt came late,
  or the thread then waited for the GIL);
- **inherited**: how far past this deadline the previous wake-up already was.

A process stopped (SIGSTOP, SIGTSTP, a debugger) is neither running nor runnable, as a thread
waiting for the GIL is not: the two are told apart by SIGCONT, which a stopped process receives
when it goes on (`watch_for_stops`); a miss over a stretch that held one is the stop's.

The largest part names the cause; a miss whose largest part is inherited is a catch-up and
counts under the cause of the miss before it, so the counts add up to root causes. Deadlines a
stall passed over, which the loop skips (`passed`), count under the stall's cause too: the
late wake-up's when the stall came before it, else what the cycle did since its wake-up. Interrupt
handlers are charged to the thread they interrupt unless the kernel accounts IRQ time, so there
they show as work; so does time the hypervisor spends on the guest's behalf (its exits).
"""

from __future__ import annotations

import resource
import signal
import time

# the causes, in the order reports list them
WORK = "the cycle's own work ran long"
TAKEN = "the CPU was taken from the running loop (on a VM: the hypervisor's steal)"
PREEMPTED = "a higher-priority task ran on the loop's CPU"
BLOCKED = "the loop waited for the GIL or a lock"
LATE_WAKE = "the wake-up from sleep came late"
LATE_WAKE_BLOCKED = "after its sleep the loop waited for the GIL or a lock"
STOPPED = "the loop's process was stopped (SIGSTOP, Ctrl-Z, a debugger) and went on later"
CAUSES = (TAKEN, LATE_WAKE, WORK, PREEMPTED, BLOCKED, LATE_WAKE_BLOCKED, STOPPED)

_continued = [0]   # SIGCONTs this process has received (the handler below counts them)


def _on_continue(signum, frame) -> None:
    _continued[0] += 1


def watch_for_stops() -> None:
    """Count the SIGCONTs this process receives (from its main thread): each follows a stop."""
    signal.signal(signal.SIGCONT, _on_continue)


def _sample() -> tuple[float, int, int]:
    """(this thread's CPU time s, voluntary switches, involuntary switches). The CPU time comes
    from clock_gettime: getrusage's lags by up to a scheduler tick (it is brought up to date
    only at ticks and switches), which hid whole cycles of work."""
    r = resource.getrusage(resource.RUSAGE_THREAD)
    return time.thread_time(), r.ru_nvcsw, r.ru_nivcsw


def attribute(work_wall_s: float, work_cpu_s: float, slept_s: float, planned_sleep_s: float,
              spin_wall_s: float, spin_cpu_s: float, voluntary: int, involuntary: int,
              inherited_s: float = 0.0, previous_cause: str | None = None) -> dict:
    """Split one late interval (previous wake-up → this wake-up) into its parts, in µs, and name
    the cause. `work_*`: from the previous wake-up to the sleep; `slept_s`/`planned_sleep_s`: the
    sleep as it lasted and as asked (0 and 0 when the cycle did not sleep); `spin_*`: from the
    sleep's end to the wake-up; the switch counts over the whole interval. `inherited_s`: how far
    past this deadline the previous wake-up already was (a stall of several periods makes the
    following cycles late too, while the loop catches up); when that is the largest part the
    miss is a catch-up and takes `previous_cause`."""
    taken = max(work_wall_s - work_cpu_s, 0.0) + max(spin_wall_s - spin_cpu_s, 0.0)
    late_wake = max(slept_s - planned_sleep_s, 0.0) if planned_sleep_s > 0 else 0.0
    extra_voluntary = voluntary - (1 if planned_sleep_s > 0 else 0)
    work = work_cpu_s
    inherited = max(inherited_s, 0.0)
    largest = max(taken, late_wake, work, inherited)
    catching_up = previous_cause is not None and largest == inherited
    if catching_up:
        cause = previous_cause
    elif largest == taken:
        cause = PREEMPTED if involuntary > 0 else BLOCKED if extra_voluntary > 0 else TAKEN
    elif largest == late_wake:
        cause = LATE_WAKE_BLOCKED if extra_voluntary > 0 else LATE_WAKE
    else:
        cause = WORK
    return {"work_us": work * 1e6, "taken_us": taken * 1e6, "late_wake_us": late_wake * 1e6,
            "inherited_us": inherited * 1e6, "voluntary_switches": voluntary,
            "involuntary_switches": involuntary, "catching_up": catching_up, "cause": cause}


class MissTracer:
    """Per-cycle bookkeeping for `attribute`; the loop calls `woke` at each wake-up (after the
    spin), `sleeping` just before its sleep and `awake` just after it: a few clock reads a cycle;
    the work happens only for a missed deadline."""

    def __init__(self, keep: int = 1000) -> None:
        self.keep = keep
        self.missed: list[tuple[float, float, dict]] = []  # (deadline s, late µs, attribute(...))
        self.counts: dict[str, int] = {}
        self._wake = self._sleep_start = self._sleep_end = 0.0
        self._planned = 0.0
        self._at_wake = self._at_sleep = (0.0, 0, 0)
        self._slept = False
        self._previous_late = 0.0  # s, of the previous wake-up; its cause when it was a miss
        self._previous_cause: str | None = None
        self._continued = _continued[0]

    def _stopped_since(self) -> bool:
        """Whether the process was stopped (and continued) since the last call."""
        went_on, self._continued = _continued[0] != self._continued, _continued[0]
        return went_on

    def started(self, now: float) -> None:
        """The timing starts at `now`: a first wake-up that is already late is taken apart from here."""
        self._at_wake = _sample()
        self._wake = now

    def sleeping(self, now: float, planned_s: float) -> None:
        self._at_sleep = (time.thread_time(), 0, 0)
        self._sleep_start = now
        self._planned = planned_s
        self._slept = planned_s > 0

    def awake(self, now: float) -> None:
        self._sleep_end = now

    def woke(self, wake: float, deadline: float, late_s: float, missed: bool, period_s: float) -> None:
        """At a wake-up `wake` (s, monotonic), `late_s` after its deadline (`deadline`: s since
        the start, for the report); when `missed`, attribute it."""
        sample = _sample()
        cause = None
        stopped = self._stopped_since()
        if missed and self._wake > 0:
            before, mid = self._at_wake, self._at_sleep
            inherited = self._previous_late - period_s
            if self._slept:
                part = attribute(self._sleep_start - self._wake, mid[0] - before[0],
                                 self._sleep_end - self._sleep_start, self._planned,
                                 wake - self._sleep_end, sample[0] - mid[0],
                                 sample[1] - before[1], sample[2] - before[2], inherited, self._previous_cause)
            else:  # no sleep: the whole interval was work and spin
                part = attribute(wake - self._wake, sample[0] - before[0], 0.0, 0.0, 0.0, 0.0,
                                 sample[1] - before[1], sample[2] - before[2], inherited, self._previous_cause)
            if stopped:
                part["cause"] = STOPPED
            cause = part["cause"]
            part["deadlines"] = 1
            self.counts[cause] = self.counts.get(cause, 0) + 1
            if len(self.missed) < self.keep:
                self.missed.append((deadline, late_s * 1e6, part))
        self._previous_late, self._previous_cause = late_s, cause
        self._at_wake = sample
        self._wake = wake
        self._slept = False
        self._planned = 0.0

    def passed(self, now: float, first_deadline: float, first_deadline_at: float, count: int) -> None:
        """`count` deadlines, the first at `first_deadline_at` (s, monotonic; `first_deadline`: s
        since the start, for the report), passed while the cycle that woke last ran; the loop
        skips them. They share the wake-up's own miss when it was already that late (a stall
        before the wake-up), else the cause is what the cycle did since its wake-up."""
        sample = _sample()
        before = self._at_wake
        ran = now - self._wake
        part = attribute(ran, sample[0] - before[0], 0.0, 0.0, 0.0, 0.0, sample[1] - before[1],
                         sample[2] - before[2], self._previous_late, self._previous_cause)
        if self._stopped_since():
            part["cause"] = STOPPED
        part["deadlines"] = count
        self.counts[part["cause"]] = self.counts.get(part["cause"], 0) + count
        if len(self.missed) < self.keep:
            self.missed.append((first_deadline, (now - first_deadline_at) * 1e6, part))
        # what the cycle did up to here is accounted for: a late next wake-up is judged on what
        # comes after, not charged this work again
        self._at_wake, self._wake = sample, now
        self._previous_late, self._previous_cause = 0.0, part["cause"]

    def report(self) -> dict:
        """For the statistics file: counts per cause (every missed deadline, skipped ones too) and
        each kept miss, µs; an entry with `deadlines` > 1 stands for deadlines a stall passed over."""
        return {
            "missed_deadline_causes": {c: self.counts[c] for c in CAUSES if c in self.counts},
            "missed_deadlines_explained": [
                {"deadline_s": round(t, 6), "late_us": round(late, 1), **{k: (round(v, 1) if isinstance(v, float) else v)
                                                                          for k, v in part.items()}}
                for t, late, part in self.missed],
        }

    def summary_line(self) -> str | None:
        """One sentence for the end of a run, or None without misses."""
        if not self.counts:
            return None
        parts = [f"{self.counts[c]} {c}" for c in CAUSES if c in self.counts]
        return "missed deadlines by cause: " + "; ".join(parts)
