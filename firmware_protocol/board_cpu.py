"""How an emulator is scheduled on the host: like the processor it stands in for.

A board's or a servo's processor has its own CPU: no other job on the host holds it up. An emulator
shares the host's CPUs with everything else, and starved by a busy machine it stops answering, or
stops moving its servos, exactly as a failing board does — the host would rightly fault. So an
emulator that sleeps between requests (our board model, the C firmware's host build, the servo
bus emulators) runs at SCHED_FIFO `BOARD_FIFO`: ahead of ordinary work,
behind the loop (SCHED_FIFO 50) and its port process (40, hil.runtime.realtime), whose wake-ups it
must not delay. A processor that never sleeps (QEMU's, whose firmware polls, and the launcher that
relays its bytes) gets a raised share of the CPU instead (`BOARD_NICE`): at a real-time priority
it would take a whole CPU from the host, and the relay, ahead of QEMU, would starve it.
Whatever the host refuses (no root, no real-time budget) is left as it was.
"""

from __future__ import annotations

import os

BOARD_FIFO = 30
BOARD_NICE = -10   # about nine times an ordinary process's share of a busy CPU


def as_a_board_cpu(pid: int, sleeps: bool = True) -> str:
    """Schedule process `pid` (and the threads it starts later) as a board's processor; returns
    what it got: "fifo", "nice" or "" (nothing permitted)."""
    try:
        os.sched_setscheduler(pid, os.SCHED_FIFO if sleeps else os.SCHED_OTHER,
                              os.sched_param(BOARD_FIFO if sleeps else 0))
        if sleeps:
            return "fifo"
    except (AttributeError, OSError):
        pass
    return "nice" if _raise_share(pid) else ""


def _raise_share(pid: int) -> bool:
    try:
        os.setpriority(os.PRIO_PROCESS, pid, min(os.getpriority(os.PRIO_PROCESS, pid), BOARD_NICE))
        return True
    except (AttributeError, OSError):
        return False
