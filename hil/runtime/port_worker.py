"""The serial port's reads and writes on their own thread, so that the control cycle never waits
in a system call (on a pty a write costs ~40 µs and sometimes stalls for hundreds of µs).

The control thread hands over the newest command (`submit`) and takes the newest state
(`latest`); the worker writes, then reads and decodes what arrived, and sleeps on a condition
variable until the next command (or 2 ms, to keep reading). The GIL is released inside the
system calls, so a stalled write delays only this thread.
"""

from __future__ import annotations

import threading

import numpy as np


class PortWorker(threading.Thread):
    def __init__(self, link) -> None:
        super().__init__(name="hil-port", daemon=True)
        self.link = link
        self._cond = threading.Condition()
        self._cmd: np.ndarray | None = None
        self._running = True
        self.latest = None
        self.error: BaseException | None = None

    def submit(self, q_cmd: np.ndarray) -> None:
        """Queue the newest command (an older one not yet written is replaced: it is stale)."""
        with self._cond:
            self._cmd = q_cmd.copy()
            self._cond.notify()

    def _leave_the_loop_core(self) -> None:
        """Threads inherit the loop's SCHED_FIFO and CPU pinning; a FIFO thread of equal priority
        stuck in a system call on the same core would delay the control thread's wake-up. So this
        thread moves to the other cores, one real-time priority below the loop where permitted: it
        holds the GIL while it decodes, and if an ordinary process could preempt it there, the
        control thread would wait for the GIL behind it (priority inversion)."""
        import os

        try:
            prio = os.sched_getparam(0).sched_priority
            if os.sched_getscheduler(0) == os.SCHED_FIFO and prio > 1:
                os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(prio - 10))
        except (AttributeError, OSError):
            pass
        try:
            all_cpus = set(range(os.cpu_count() or 1))
            mine = os.sched_getaffinity(0)
            others = all_cpus - mine
            if others:
                os.sched_setaffinity(0, others)
        except (AttributeError, OSError):
            pass

    def run(self) -> None:
        self._leave_the_loop_core()
        link = self.link
        while self._running:
            with self._cond:
                if self._cmd is None and self._running:
                    self._cond.wait(0.002)
                q, self._cmd = self._cmd, None
            try:
                if q is not None:
                    link.send_positions(q)
                s = link.poll()
                if s is not None:
                    self.latest = s
            except BaseException as e:  # LinkLostError and friends: the control thread decides
                self.error = e
                return

    def stop(self) -> None:
        with self._cond:
            self._running = False
            self._cond.notify()
        if self.is_alive() and self is not threading.current_thread():
            self.join(timeout=1.0)
