"""Processes that end with the run that started them.

Linux delivers a chosen signal to a process when its parent dies (`prctl(PR_SET_PDEATHSIG)`),
even when the parent was SIGKILLed and ran no cleanup. Each helper process of a run (the loop,
the board emulator, the twin) asks for it first thing, then checks that the parent it was
started by is still there (it may have died before the request was made).
"""

from __future__ import annotations

import _io
import atexit
import gc
import io
import multiprocessing as mp
import os
import signal
import sys
import threading
from typing import Callable, NoReturn

PR_SET_PDEATHSIG = 1
JOIN_WAKE_S = 0.1   # how soon a process ending sees a Ctrl-C delivered to a thread it waits for
PR_SET_NAME = 15

# A command's process imports some 750 modules and keeps over a hundred thousand objects; at
# Python's default (700 allocations) the collector's passes walk them again and again while the
# command loads and plans. Rarer passes hold only what a few thousand more allocations leave.
COMMAND_GC_THRESHOLD = (20_000, 10, 10)


def die_with_parent(sig: int = signal.SIGTERM, parent_pid: int | None = None) -> bool:
    """Ask for `sig` when the parent dies; True if `parent_pid` (when given) is already gone.
    Off Linux nothing is asked and False is returned."""
    import ctypes   # lazy: the command line imports this module before anything heavy

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
            return False
    except (OSError, AttributeError):
        return False
    return parent_pid is not None and os.getppid() != parent_pid


def name_this_process(name: str) -> None:
    """What `ps`, `top` and /proc/PID/comm call this process (at most 15 bytes; Linux only)."""
    import ctypes   # lazy: as above

    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_NAME, name.encode()[:15], 0, 0, 0)
    except (OSError, AttributeError):
        pass


def start_command_process() -> None:
    """First thing in a command's process (the `hil` script, a helper): rarer garbage collections.
    A real-time process sets its own (`hil.runtime.realtime.freeze_heap`)."""
    gc.set_threshold(*COMMAND_GC_THRESHOLD)


def real_time_gc() -> None:
    """A process about to run in real time collects as Python does by default: each young pass
    walks few objects (a command's rarer passes walk more at once)."""
    gc.set_threshold(700, 10, 10)


def end_command_process(code: int) -> NoReturn:
    """End this process as `sys.exit(code)` does, less the interpreter's teardown of its modules,
    slow with Numba's compiled kernels loaded and coming after the command has said everything
    (benchmarks/README.md, "Start-up cost of a run"). What teardown would keep is kept first:
    threads that are not daemons are waited for, the `atexit` handlers run (children joined,
    temporary folders removed, logs flushed), what only a reference cycle holds is finalised, every
    file still open is closed (its buffer written), and the standard streams are flushed (a reader
    gone away is exit status 120, as Python says it). A Ctrl-C meanwhile ends it at once (130)."""
    try:
        main = threading.main_thread()
        for thread in threading.enumerate():
            if thread is not main and not thread.daemon:
                while thread.is_alive():   # awake now and then: a Ctrl-C the kernel gave that thread is
                    thread.join(JOIN_WAKE_S)   # seen here only between waits
        atexit._run_exitfuncs()
        gc.collect()
        _close_open_files()
    except KeyboardInterrupt:   # asked twice: what is left goes with the process, without a traceback
        code = 130
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            code = code or 120
    os._exit(code)


def _close_open_files() -> None:
    """Close what teardown would close as it freed it: each open file object but the standard
    streams, a text file before the buffer under it before the raw file under that (closed in
    another order, a wrapper's buffer is lost)."""
    streams = (sys.stdin, sys.stdout, sys.stderr, sys.__stdin__, sys.__stdout__, sys.__stderr__)
    kept = {id(layer) for s in streams if s is not None for layer in (s, *_layers(s))}
    # _io's concrete base: io.IOBase is an ABC, whose isinstance over every object is far slower
    files = [f for f in gc.get_objects() if isinstance(f, _io._IOBase) and id(f) not in kept]
    for kind in (io.TextIOBase, io.BufferedIOBase, io.IOBase):
        for f in files:
            try:
                if isinstance(f, kind) and not f.closed:
                    f.close()
            except (OSError, ValueError) as e:   # a full disk, a file gone: said, as teardown would
                print(f"hil: could not finish writing {getattr(f, 'name', f)!s}: {e}", file=sys.stderr)


def _layers(stream) -> list:
    """A standard stream's buffer and raw file under it (they stay open for the exit's last words)."""
    buffer = getattr(stream, "buffer", None)
    return [x for x in (buffer, getattr(buffer, "raw", None)) if x is not None]


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
    start_command_process()
    end_command_process(int(target(*args) or 0))
