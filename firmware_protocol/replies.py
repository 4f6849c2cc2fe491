"""Replies a caller waits for (ACK, PARAM_VALUE, TIME_SYNC_RESP), matched by key.

The thread that decodes frames calls `deliver(key, value)`; a waiting caller holds the slot from
`expect(key)` and waits on it. `wake_all()` releases every waiter at once when the link is lost,
so that no caller waits out its timeout on a dead port.
"""

from __future__ import annotations

import threading


class Reply:
    """One awaited reply: `wait(timeout_s)` is True once a value (or a wake-up) arrived."""

    __slots__ = ("event", "value")

    def __init__(self) -> None:
        self.event = threading.Event()
        self.value = None

    def wait(self, timeout_s: float) -> bool:
        return self.event.wait(timeout_s)


class AwaitedReplies:
    def __init__(self) -> None:
        self._slots: dict[tuple, Reply] = {}
        self._lock = threading.Lock()

    def expect(self, key: tuple) -> Reply:
        reply = Reply()
        with self._lock:
            self._slots[key] = reply
        return reply

    def forget(self, key: tuple) -> None:
        with self._lock:
            self._slots.pop(key, None)

    def deliver(self, key: tuple, value) -> None:
        with self._lock:
            reply = self._slots.get(key)
        if reply is not None:
            reply.value = value
            reply.event.set()

    def wake_all(self) -> None:
        with self._lock:
            for reply in self._slots.values():
                reply.event.set()
