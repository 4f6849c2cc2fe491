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
        """Threads inherit the loop's SCHED_FIFO and CPU pinning: move to the other CPUs, one
        priority below the loop (see `leave_the_loop_cpu`)."""
        import os

        from hil.runtime.loop import leave_the_loop_cpu

        try:
            mine = os.sched_getaffinity(0)
            fifo = os.sched_getscheduler(0) == os.SCHED_FIFO
        except (AttributeError, OSError):
            return
        leave_the_loop_cpu(next(iter(mine)) if len(mine) == 1 else None, fifo)

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
