"""How an emulator is scheduled on the host: like the processor it stands in for, as far as a
shared host allows.

A board's or a servo's processor has its own CPU: no other job on the host holds it up. An emulator
shares the host's CPUs with everything else, and starved by a busy machine it stops answering, or
stops moving its servos, exactly as a failing board does — the host would rightly fault. So every
emulator (our board model, the C firmware's host build, the servo bus emulators, QEMU and the
launcher that relays its bytes) gets a raised share of the CPU (`BOARD_NICE`), at ordinary
scheduling. Not a real-time priority: the bytes between the host and an emulator cross a pty,
which the kernel delivers in worker threads of ordinary priority; emulators ahead of them (tried:
SCHED_FIFO 30) starved that delivery whenever they were busy, and the links of every run on the
machine stalled for hundreds of milliseconds. Whatever the host refuses (no root) is left as it was.

Where the kernel groups processes by session for its fair share (autogroup, on by default in
Debian's and most desktop kernels), a process's nice value only orders it against the processes of
its own session; against every other session it counts as its session's group, at the group's own
nice value. An emulator runs in a session of its own, so its group is raised too: left at 0, the
emulator was measured runnable and not run for 231 ms beside two CPU-bound jobs and a QEMU board,
and its servos' bus went silent. Where the kernel does not group a process by its session
(/proc/PID/autogroup prints nothing, as on the CI machines), the write is refused and the nice
value alone orders the emulator, as it then should.
"""

from __future__ import annotations

import os

BOARD_NICE = -10   # about nine times an ordinary process's share of a busy CPU


def as_a_board_cpu(pid: int) -> bool:
    """Schedule process `pid` (and the threads and processes it starts later) as a board's processor:
    ordinary scheduling (not a real-time policy its starter may have), a raised share. True when
    the share was raised."""
    try:
        os.sched_setscheduler(pid, os.SCHED_OTHER, os.sched_param(0))
    except (AttributeError, OSError):
        pass
    try:
        os.setpriority(os.PRIO_PROCESS, pid, min(os.getpriority(os.PRIO_PROCESS, pid), BOARD_NICE))
    except (AttributeError, OSError):
        return False
    _raise_its_session(pid)
    return True


def _raise_its_session(pid: int) -> None:
    """The autogroup's share of a process that leads its own session (nothing else is in it)."""
    try:
        if os.getsid(pid) != (pid or os.getpid()):
            return      # a session shared with its starter: raising it would raise the starter's too
        with open(f"/proc/{pid or 'self'}/autogroup", "w") as f:
            f.write(str(BOARD_NICE))
    except OSError:
        pass        # no autogroup in this kernel, or not allowed: the nice value above is what there is
