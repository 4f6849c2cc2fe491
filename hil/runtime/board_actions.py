"""Board transactions off the loop's thread: one worker thread, a short queue, answers collected.

A transaction (enable, disable, clear faults, reconnect) waits up to ~150 ms for the board's
answer, longer for a reconnect; the cycle must never wait. The loop queues them here and, every
cycle, takes the finished ones (`done`). One thread serves them in order, whatever the number
of requests: the same action already waiting is not queued twice, and the queue is bounded, so
a flood of requests changes neither the thread count nor the cycle.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Callable

QUEUE_LIMIT = 8


class BoardActions:
    def __init__(self) -> None:
        self._queue: deque[tuple[object, Callable[[], object]]] = deque()
        self._done: deque[tuple[object, object, str | None, float]] = deque()
        self._cond = threading.Condition()
        self._running = True
        self._busy: object | None = None
        self._thread = threading.Thread(target=self._serve, name="hil-board-actions", daemon=True)
        self._thread.start()

    def submit(self, key, fn: Callable[[], object]) -> bool:
        """Queue `fn` under `key` (an action). True when queued, or when the same key already
        waits (it will do the same); False when the queue is full (dropped: the caller says so)."""
        with self._cond:
            if any(k == key for k, _ in self._queue):
                return True
            if len(self._queue) >= QUEUE_LIMIT:
                return False
            self._queue.append((key, fn))
            self._cond.notify()
            return True

    def cancel(self, keys) -> None:
        """Drop queued actions with these keys (an e-stop makes a queued enable meaningless)."""
        with self._cond:
            kept = [(k, fn) for k, fn in self._queue if k not in keys]
            self._queue.clear()
            self._queue.extend(kept)

    def busy_with(self, key) -> bool:
        with self._cond:
            return self._busy == key or any(k == key for k, _ in self._queue)

    @property
    def has_done(self) -> bool:
        """Whether a finished transaction waits for `done` (cheap: the cycle asks every time)."""
        return bool(self._done)

    def done(self) -> list[tuple[object, object, str | None, float]]:
        """Finished transactions since the last call: (key, value, error text or None, time)."""
        out = []
        while self._done:
            out.append(self._done.popleft())
        return out

    def _serve(self) -> None:
        while True:
            with self._cond:
                while self._running and not self._queue:
                    self._cond.wait()
                if not self._running:
                    return
                key, fn = self._queue.popleft()
                self._busy = key
            value, error = None, None
            try:
                value = fn()
            except Exception as e:  # noqa: BLE001 - reported to the cycle as the action's outcome
                error = str(getattr(e, "strerror", None) or e)
            with self._cond:
                self._busy = None
            self._done.append((key, value, error, time.monotonic()))

    def stop(self, timeout_s: float = 6.0) -> None:
        with self._cond:
            self._running = False
            self._queue.clear()
            self._cond.notify()
        if self._thread.is_alive():
            self._thread.join(timeout=timeout_s)
