"""Loaded by every Python that `bench_suite.py`'s test run starts (this folder is on its
PYTHONPATH): each interpreter appends its command line when it starts and its own CPU time when it
exits to files in $HIL_SUITE_CPU_DIR. Processes that end by a signal or `os._exit` (forked loops,
killed emulators) write no exit line; their CPU is counted in the parent that waited for them."""

import atexit
import os
import sys

_DIR = os.environ.get("HIL_SUITE_CPU_DIR")


def _append(name: str, line: str) -> None:
    try:
        with open(os.path.join(_DIR, name), "a") as f:
            f.write(line + "\n")
    except OSError:
        pass


def _at_exit() -> None:
    t = os.times()
    _append("exits.tsv", f"{os.getpid()}\t{t.user + t.system:.3f}\t{t.children_user + t.children_system:.3f}")


if _DIR:
    _append("starts.tsv", f"{os.getpid()}\t{' '.join(sys.orig_argv)[:300]!r}")
    atexit.register(_at_exit)
