"""How far a long plan has come, for the command that waits on it (`hil play`, `hil path` and
`hil ctl play` print it while they plan; `hil walk` has its own).

A planner says what it is doing with `report(stage, fraction)`; nothing listens unless a command
opened `listening()` around the plan, so a planner run from a test or a script pays one context
lookup. A sample loop reports every `EVERY` samples: a thread printing every few seconds reads the
newest."""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Iterator

EVERY = 1024   # samples between reports in a planner's loop (a report is two attribute writes)


@dataclass
class Progress:
    stage: str = ""
    fraction: float | None = None   # 0…1 of the stage, None where the stage cannot say

    def text(self) -> str:
        if not self.stage:
            return ""
        return self.stage + (f" {100 * self.fraction:.0f} %" if self.fraction is not None else "")


_listener: ContextVar[Progress | None] = ContextVar("hil_plan_progress", default=None)


def report(stage: str, fraction: float | None = None) -> None:
    p = _listener.get()
    if p is not None:
        p.stage, p.fraction = stage, fraction


def reporting_every(stage: str, total: int):
    """A function of the loop's index k that reports `stage` k/total every EVERY samples."""
    p = _listener.get()
    if p is None:
        return lambda k: None
    scale = 1.0 / max(total, 1)

    def at(k: int) -> None:
        if k % EVERY == 0:
            p.stage, p.fraction = stage, k * scale
    return at


@contextmanager
def listening() -> Iterator[Progress]:
    p = Progress()
    token = _listener.set(p)
    try:
        yield p
    finally:
        _listener.reset(token)
