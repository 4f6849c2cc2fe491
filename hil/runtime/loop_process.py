"""The loop's process, started as soon as a command knows it will run a loop: while the command
loads the robot, checks and plans its motion and starts the emulator, the new process loads the
loop's compiled kernels (it is forked once the command has imported the loop and started Numba,
which both need), then waits for the run's configuration. Given none (the command refused its
input, was interrupted, or ended), it ends without having touched anything: it opens no port and
holds no CPU until it has a configuration.

Light to import: the command line imports it before it has loaded anything else.
"""

from __future__ import annotations

import atexit
import multiprocessing as mp
import os
import signal
import sys


class LoopProcess:
    """The `hil-loop` process: started at once, told what to run later (`start`), or not (`cancel`,
    or the end of this process, which closes the pipe it waits on). The supervisor watches `proc`."""

    def __init__(self, early: bool = False) -> None:
        # Early (the command's arguments just parsed: nothing heavy loaded, no thread started) it is
        # forked, and ignores Ctrl-C from its first line; a new Python started there instead would
        # take a Ctrl-C of its first 0.3 s mid-start and print Python's fatal error. Later (a
        # command's second run) it is spawned: by then the command may hold threads and LLVM.
        ctx = mp.get_context("fork" if early else "spawn")
        waiting_end, self._send = ctx.Pipe(duplex=False)
        self.proc = ctx.Process(target=_wait_for_config, args=(waiting_end, self._send if early else None),
                                name="hil-loop")
        self.proc.start()
        waiting_end.close()
        self.started = False
        atexit.register(self.cancel)   # before multiprocessing's own exit handler waits for its children

    def start(self, cfg) -> None:
        """Run the loop with `cfg` (a LoopConfig) in the waiting process."""
        self._send.send(cfg)
        self._send.close()
        self.started = True

    def cancel(self) -> None:
        """No run after all: the waiting process ends (at once: it sees its pipe close)."""
        if self.started or self._send.closed:
            return
        self._send.close()
        self.proc.join(timeout=5)
        if self.proc.is_alive():   # still importing on a very busy machine: it has nothing to lose
            self.proc.kill()
            self.proc.join(timeout=5)


_early: LoopProcess | None = None


def start_early() -> None:
    """Start this command's loop process now (it waits for its configuration)."""
    global _early
    if _early is None:
        _early = LoopProcess(early=True)


def take() -> LoopProcess:
    """The loop process started early, or a new one."""
    global _early
    proc, _early = (_early or LoopProcess()), None
    return proc


def cancel_early() -> None:
    """The command ends without having run its loop: the waiting process ends too."""
    global _early
    if _early is not None:
        _early.cancel()
        _early = None


def _wait_for_config(conn, inherited_send=None) -> None:
    # Ctrl-C in the terminal reaches the whole process group: the command decides, this process
    # only ends when its pipe closes (its own handlers come with its configuration)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if inherited_send is not None:   # forked: its copy of the parent's end would keep the pipe open
        inherited_send.close()
    # the command imported the loop before forking this process; loading the loop's kernels is
    # this process's first work. lazy: this module is imported before the loop is
    from hil.runtime.loop import run_loop
    from hil.warmup import compile_all   # lazy: as above

    compile_all(loop_only=True)   # loaded from the cache (the command compiled a cold one before starting this)
    try:
        cfg = conn.recv()
    except (EOFError, OSError):
        os._exit(0)
    conn.close()
    # Ctrl-C stays ignored until the loop sets its own handler (Loop._start): one that comes while
    # the loop builds its robot reaches it through the supervisor, which sets the block's stop word
    code = run_loop(cfg)   # its board stopped, its files closed, its block gone or handed back
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    # out at once: finalising an interpreter with LLVM (Numba) loaded takes a few hundred ms, by which
    # an orphaned loop and the helpers waiting on it would outlive their run
    os._exit(code)
