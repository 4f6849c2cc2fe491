"""Processes that end with the run that started them.

Linux delivers a chosen signal to a process when its parent dies (`prctl(PR_SET_PDEATHSIG)`),
even when the parent was SIGKILLed and ran no cleanup. Each helper process of a run (the loop,
the board emulator, the twin) asks for it first thing, then checks that the parent it was
started by is still there (it may have died before the request was made).
"""

from __future__ import annotations

import ctypes
import os
import signal

PR_SET_PDEATHSIG = 1
ENV_PARENT = "HIL_EXIT_WITH_PARENT"  # pid of the process a child must not outlive


def die_with_parent(sig: int = signal.SIGTERM, parent_pid: int | None = None) -> bool:
    """Ask for `sig` when the parent dies; True if `parent_pid` (when given) is already gone.
    Off Linux nothing is asked and False is returned."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
            return False
    except (OSError, AttributeError):
        return False
    return parent_pid is not None and os.getppid() != parent_pid


def exit_with_parent_from_env() -> None:
    """For a child started with ENV_PARENT set (the twin): SIGTERM when that parent dies."""
    value = os.environ.pop(ENV_PARENT, None)
    if not value:
        return
    try:
        parent = int(value)
    except ValueError:
        return
    if die_with_parent(signal.SIGTERM, parent):
        os.kill(os.getpid(), signal.SIGTERM)
