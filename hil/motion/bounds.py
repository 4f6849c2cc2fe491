"""How large a motion hil plans in one go: a stated bound on each thing a file or an option can make
large, checked before the work it would cause, so that every planning command answers — plans or
refuses in one line naming the bound and how to split the work — within seconds and within a
bounded amount of memory, whatever it is given.

A motion longer than these is split into several files (or programs) run one after another.
"""

from __future__ import annotations

import math

from hil.errors import InputError

MAX_MOTION_S = 600.0          # a planned motion's duration, as it will run (after --speed and any slowing)
MAX_SAMPLES = 600_000         # samples of one motion: 600 s at 1 kHz
MAX_KEYFRAMES = 10_000        # keyframes of one motion file
MAX_MOVES = 50_000            # moves (G0 G1 G2 G3) of one G-code program
MAX_PATH_POINTS = 100_000     # points a G-code program is cut into along its path


def check_duration(seconds: float, where: str, split: str = "split it into several files run one after another") -> float:
    """`seconds`, or InputError when a motion would last longer than MAX_MOTION_S (or forever)."""
    if not (math.isfinite(seconds) and seconds <= MAX_MOTION_S):
        shown = f"{seconds:.4g} s" if math.isfinite(seconds) else "forever"
        raise InputError(f"{where}: it would last {shown}, more than the {MAX_MOTION_S:g} s hil plans in one go; "
                         f"{split}")
    return seconds


def check_count(count: int, bound: int, what: str, where: str, split: str) -> int:
    """`count`, or InputError naming the bound when it is larger."""
    if count > bound:
        raise InputError(f"{where}: {count} {what}, more than the {bound} hil plans in one go; {split}")
    return count
