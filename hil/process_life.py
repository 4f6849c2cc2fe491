"""Processes that end with the run that started them.

Linux delivers a chosen signal to a process when its parent dies (`prctl(PR_SET_PDEATHSIG)`),
even when the parent was SIGKILLed and ran no cleanup. Each helper process of a run (the loop,
the board emulator, the twin) asks for it first thing, then checks that the parent it was
started by is still there (it may have died before the request was made).
"""

from __future__ import annotations

import ctypes
import multiprocessing as mp
import os
import signal
from typing import Callable

PR_SET_PDEATHSIG = 1
PR_SET_NAME = 15


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


def name_this_process(name: str) -> None:
    """What `ps`, `top` and /proc/PID/comm call this process (at most 15 bytes; Linux only)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_NAME, name.encode()[:15], 0, 0, 0)
    except (OSError, AttributeError):
        pass


def start_helper(target: Callable[..., int | None], args: tuple, name: str):
    """`target(*args)` in a process of its own that ends with this one (the twin, the shadow): a new
    interpreter (spawn: none of this process's threads or locks come along; its scheduling does),
    SIGTERM when this process dies, however it dies. Its exit code is what `target` returns.
    Returns the started `multiprocessing.Process`."""
    proc = mp.get_context("spawn").Process(target=_helper_main, args=(target, args, os.getpid(), name),
                                           name=name, daemon=True)
    proc.start()
    return proc


def _helper_main(target: Callable[..., int | None], args: tuple, parent_pid: int, name: str) -> None:
    name_this_process(name)
    if die_with_parent(signal.SIGTERM, parent_pid):
        raise SystemExit(0)
    raise SystemExit(int(target(*args) or 0))
