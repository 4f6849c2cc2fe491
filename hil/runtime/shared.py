"""Shared state between the loop process and everyone else (twin, CLI, tests).

One POSIX shared-memory block per running loop, named `hil_<robot>_<pid>`:

- a control area of int64 words: the e-stop request word (any process sets it; the loop checks
  it every cycle), the loop's pid and status, the mailbox head/tail;
- a snapshot area behind a **seqlock**: the loop increments the sequence word to an odd value,
  writes, and increments it to even; a reader copies the area and retries if the word was odd or
  changed meanwhile, so it never sees a torn snapshot and never blocks the loop;
- a mailbox: a ring of fixed-size request slots; writers (rare, user-paced) serialise on an
  `flock`ed lock file, the loop alone reads.

`LoopClient` is the small API the twin, the CLI and the tests use.
"""

from __future__ import annotations

import fcntl
import glob
import os
import time
from dataclasses import dataclass
from enum import IntEnum
from multiprocessing import resource_tracker, shared_memory

import numpy as np

from hil.errors import HilError

BOARD_STATES = {0: "BOOT", 1: "DISABLED", 2: "ENABLED", 3: "FAULT", 4: "ESTOP", 5: "HOMING"}


def progress_text(progress: float) -> str:
    """Motion progress for displays: "37.5%", or "endless" for motions without an end (negative)."""
    return "endless" if progress < 0 else f"{100 * progress:.1f}%"


MAGIC = 0x48494C31  # "HIL1"
CTRL_WORDS = 16
C_MAGIC, C_ESTOP, C_PID, C_N, C_STATUS, C_HEAD, C_TAIL, C_SEQ, C_EVENTS = range(9)
MAILBOX_SLOTS = 64
SLOT_FLOATS = 40          # [kind, payload...]
EVENT_BYTES = 240
EVENT_SLOTS = 32          # the last events, so a reader polling slowly still sees every one


class LoopStatus(IntEnum):
    STARTING = 0
    RUNNING = 1
    STOPPED = 2
    FAILED = 3


class Request(IntEnum):
    """Mailbox request kinds (payload in radians / SI)."""

    ESTOP = 1
    ENABLE = 2
    DISABLE = 3
    CLEAR_FAULT = 4
    JOG = 5            # payload: q target (n)
    START_MOTION = 6
    STOP_MOTION = 7    # hold where the command is
    SHUTDOWN = 8


# snapshot fields: name -> (offset in float64 words, length); built per joint count
def _layout(n: int) -> dict[str, tuple[int, int]]:
    fields = [("t", 1), ("cycle", 1), ("q_cmd", n), ("q_meas", n), ("q_target", n), ("qd_meas", n),
              ("T_tool", 16), ("board_state", 1), ("faults", 1), ("safety_flags", 1), ("enabled", 1),
              ("ramping", 1), ("motion_running", 1), ("motion_progress", 1), ("link_ok", 1), ("stale", 1),
              ("rate_hz", 1), ("period_p50_us", 1), ("period_p99_us", 1), ("period_max_us", 1),
              ("cycle_p50_us", 1), ("cycle_p99_us", 1), ("misses", 1), ("stale_total", 1), ("link_errors", 1),
              ("decoder_drops", 1), ("sched_fifo", 1), ("cpu", 1), ("event_seq", 1), ("com", 3),
              ("safety_total", 1), ("jitter_hist", 20)]
    out, off = {}, 0
    for name, size in fields:
        out[name] = (off, size)
        off += size
    out["_size"] = (off, 0)
    return out


@dataclass
class Snapshot:
    """A consistent copy of the loop's published state (SI units)."""

    values: dict
    event: str

    def __getattr__(self, name: str):
        try:
            return self.values[name]
        except KeyError:
            raise AttributeError(name) from None


class SharedState:
    """The shared block; `create=True` in the loop's parent, attach by name elsewhere."""

    def __init__(self, name: str, n: int | None = None, create: bool = False) -> None:
        self.name = name
        if create:
            if n is None:
                raise ValueError("n is required to create the block")
            self.n = n
            self.layout = _layout(n)
            size = self._size(n)
            self.shm = shared_memory.SharedMemory(name=name, create=True, size=size)
            self.owner = True
        else:
            # attaching must not register the block with Python's resource tracker (before 3.13 it
            # does, and the tracker would then unlink the owner's block when this process exits)
            register = resource_tracker.register
            resource_tracker.register = lambda *a, **k: None
            try:
                self.shm = shared_memory.SharedMemory(name=name, create=False)
            except FileNotFoundError:
                raise HilError(f"no running hil loop named {name!r}; start one with `hil run`") from None
            finally:
                resource_tracker.register = register
            self.owner = False
        buf = self.shm.buf
        self.ctrl = np.ndarray((CTRL_WORDS,), dtype=np.int64, buffer=buf, offset=0)
        if create:
            self.ctrl[:] = 0
            self.ctrl[C_MAGIC] = MAGIC
            self.ctrl[C_N] = n
        else:
            if self.ctrl[C_MAGIC] != MAGIC:
                raise HilError(f"shared block {name!r} is not a hil loop")
            self.n = int(self.ctrl[C_N])
            self.layout = _layout(self.n)
        nf = self.layout["_size"][0]
        off = CTRL_WORDS * 8
        self.data = np.ndarray((nf,), dtype=np.float64, buffer=buf, offset=off)
        off += nf * 8
        self.event_buf = np.ndarray((EVENT_SLOTS, EVENT_BYTES), dtype=np.uint8, buffer=buf, offset=off)
        off += EVENT_SLOTS * EVENT_BYTES
        self.mailbox = np.ndarray((MAILBOX_SLOTS, SLOT_FLOATS), dtype=np.float64, buffer=buf, offset=off)
        self._scratch = np.empty(nf)
        self._view = {k: (o, s) for k, (o, s) in self.layout.items() if not k.startswith("_")}
        self.lock_path = f"/dev/shm/{name}.lock" if os.path.isdir("/dev/shm") else f"/tmp/{name}.lock"

    @staticmethod
    def _size(n: int) -> int:
        return (CTRL_WORDS * 8 + _layout(n)["_size"][0] * 8 + EVENT_SLOTS * EVENT_BYTES
                + MAILBOX_SLOTS * SLOT_FLOATS * 8)

    # ------------------------------------------------------------- writer side
    def field(self, name: str) -> np.ndarray:
        """A view of one field in the snapshot area (the loop writes through these views)."""
        o, s = self.layout[name]
        return self.data[o:o + s]

    def begin_write(self) -> None:
        self.ctrl[C_SEQ] += 1  # odd: writing

    def end_write(self) -> None:
        self.ctrl[C_SEQ] += 1  # even: consistent

    def set_event(self, text: str) -> None:
        """Publish an event line (kept in a ring of the last EVENT_SLOTS)."""
        raw = text.encode("utf-8", "replace")[:EVENT_BYTES - 1]
        self.begin_write()
        k = int(self.ctrl[C_EVENTS]) + 1
        slot = self.event_buf[k % EVENT_SLOTS]
        slot[:] = 0
        slot[:len(raw)] = np.frombuffer(raw, dtype=np.uint8)
        self.ctrl[C_EVENTS] = k
        self.end_write()

    def events_since(self, seen: int) -> tuple[int, list[str]]:
        """(newest event number, texts of the events after `seen`), oldest first."""
        for _ in range(100):
            s1 = int(self.ctrl[C_SEQ])
            if s1 & 1:
                continue
            k = int(self.ctrl[C_EVENTS])
            first = max(seen + 1, k - EVENT_SLOTS + 1, 1)
            texts = [bytes(self.event_buf[i % EVENT_SLOTS]).split(b"\x00", 1)[0].decode("utf-8", "replace")
                     for i in range(first, k + 1)]
            if int(self.ctrl[C_SEQ]) == s1:
                return k, texts
        return seen, []

    # ------------------------------------------------------------- reader side
    def read(self, timeout_s: float = 0.1) -> Snapshot:
        """A consistent snapshot (retries while the loop is mid-write)."""
        deadline = time.monotonic() + timeout_s
        while True:
            s1 = int(self.ctrl[C_SEQ])
            if not s1 & 1:
                np.copyto(self._scratch, self.data)
                k = int(self.ctrl[C_EVENTS])
                ev = bytes(self.event_buf[k % EVENT_SLOTS]).split(b"\x00", 1)[0] if k else b""
                if int(self.ctrl[C_SEQ]) == s1:
                    break
            if time.monotonic() > deadline:
                raise HilError("could not read a consistent snapshot (loop stuck mid-write?)")
        vals = {}
        for k, (o, s) in self._view.items():
            vals[k] = float(self._scratch[o]) if s == 1 else self._scratch[o:o + s].copy()
        return Snapshot(vals, ev.decode("utf-8", "replace"))

    # ---------------------------------------------------------------- mailbox
    def post(self, kind: int, payload=()) -> None:
        """Append a request to the mailbox (any process)."""
        p = np.asarray(payload, dtype=np.float64).reshape(-1)
        if p.size > SLOT_FLOATS - 1:
            raise ValueError("request payload too long")
        with open(self.lock_path, "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                head = int(self.ctrl[C_HEAD])
                if head - int(self.ctrl[C_TAIL]) >= MAILBOX_SLOTS:
                    raise HilError("the loop's mailbox is full (is the loop running?)")
                slot = self.mailbox[head % MAILBOX_SLOTS]
                slot[:] = 0.0
                slot[0] = kind
                slot[1:1 + p.size] = p
                self.ctrl[C_HEAD] = head + 1
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def take(self) -> list[tuple[int, np.ndarray]]:
        """Requests posted since the last call (loop only)."""
        head = int(self.ctrl[C_HEAD])
        tail = int(self.ctrl[C_TAIL])
        out = []
        while tail < head:
            slot = self.mailbox[tail % MAILBOX_SLOTS]
            out.append((int(slot[0]), slot[1:].copy()))
            tail += 1
        self.ctrl[C_TAIL] = tail
        return out

    def close(self) -> None:
        # views into the buffer must go before the mapping can close
        for attr in ("ctrl", "data", "event_buf", "mailbox", "_scratch"):
            if hasattr(self, attr):
                delattr(self, attr)
        self.shm.close()
        if self.owner:
            try:
                self.shm.unlink()
            except FileNotFoundError:
                pass
            try:
                os.unlink(self.lock_path)
            except FileNotFoundError:
                pass


def running_loops() -> list[str]:
    """Names of the hil loop blocks present on this machine."""
    return sorted(os.path.basename(p) for p in glob.glob("/dev/shm/hil_*") if not p.endswith(".lock"))


class LoopClient:
    """Talk to a running loop: read snapshots, post requests, e-stop."""

    def __init__(self, name: str | None = None) -> None:
        if name is None:
            names = running_loops()
            if not names:
                raise HilError("no running hil loop found; start one with `hil run --robot R --dry-run`")
            name = names[-1]
        self.state = SharedState(name)
        self.n = self.state.n

    @property
    def name(self) -> str:
        return self.state.name

    def snapshot(self) -> Snapshot:
        return self.state.read()

    def status(self) -> LoopStatus:
        return LoopStatus(int(self.state.ctrl[C_STATUS]))

    @property
    def pid(self) -> int:
        """The loop process's id."""
        return int(self.state.ctrl[C_PID])

    def estop(self) -> None:
        """Set the e-stop word: the loop sends ESTOP in its next cycle."""
        self.state.ctrl[C_ESTOP] = 1

    def enable(self) -> None:
        self.state.post(Request.ENABLE)

    def disable(self) -> None:
        self.state.post(Request.DISABLE)

    def clear_fault(self) -> None:
        self.state.post(Request.CLEAR_FAULT)

    def jog(self, q: np.ndarray) -> None:
        q = np.asarray(q, dtype=np.float64)
        if q.shape != (self.n,) or not np.all(np.isfinite(q)):
            raise HilError(f"jog target must be {self.n} finite joint angles (radians)")
        self.state.post(Request.JOG, q)

    def start_motion(self) -> None:
        self.state.post(Request.START_MOTION)

    def stop_motion(self) -> None:
        self.state.post(Request.STOP_MOTION)

    def shutdown(self) -> None:
        self.state.post(Request.SHUTDOWN)

    def wait(self, predicate, timeout_s: float = 2.0, poll_s: float = 0.002):
        """Poll snapshots until predicate(snapshot) is true; returns it, or None on timeout."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            s = self.snapshot()
            if predicate(s):
                return s
            time.sleep(poll_s)
        return None

    def close(self) -> None:
        self.state.close()
