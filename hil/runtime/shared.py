"""Shared state between the loop process and everyone else (twin, CLI, tests).

One block of shared memory per running loop, named `hil_<robot>_<pid>`: a file in a folder only
its user can enter (`runtime_dir()`: /dev/shm/hil-<uid>, or the folder `HIL_RUNTIME_DIR` names; mode
0700, checked and opened without following symlinks), mapped by every process that attaches:

- a control area of int64 words: the e-stop request word (any process sets it; the loop checks
  it every cycle), the stop word (a signal the supervisor received), the loop's pid and status,
  the mailbox head/tail;
- a snapshot area behind a **seqlock**: the loop increments the sequence word to an odd value,
  writes, and increments it to even; a reader copies the area and retries if the word was odd or
  changed meanwhile, so it never sees a torn snapshot and never blocks the loop;
- a mailbox: a bounded ring of request slots, each [kind, payload length, request id, payload…];
  requests are checked when posted and again when the loop takes them; writers (rare, user-paced)
  serialise on an `flock` of the block itself, the loop alone reads;
- an answer ring: the loop's answer to each request (its id, accepted or refused, a sentence),
  which the poster waits for (`LoopClient` returns it as an `Answer`);
- a short JSON description (robot, board id, port, pid) for listing the loops that run.

`LoopClient` is the small API the twin, the CLI and the tests use.
"""

from __future__ import annotations

import fcntl
import json
import math
import mmap
import os
import re
import time
from dataclasses import dataclass
from enum import IntEnum

import numpy as np

from firmware_protocol.messages import BoardState
from hil.errors import HilError, InputError, message
from hil.runtime.lifecycle import Activity, Mode
from hil.runtime.realtime import private_folder, user_folder
from hil.seqlock import Seqlock

BOARD_STATES = {int(s): s.name for s in BoardState}   # a published board_state as a word


def progress_text(progress: float) -> str:
    """Motion progress for displays: "37.5%", or "endless" for motions without an end (negative)."""
    return "endless" if progress < 0 else f"{100 * progress:.1f}%"


MAGIC = 0x48494C34  # "HIL4"


class LoopWord(IntEnum):
    """The block's int64 control words, in order: each read and written by its name."""

    MAGIC = 0      # MAGIC once the block is laid out
    ESTOP = 1      # set by whoever presses E-STOP (ESTOP_BY), cleared by the loop as it acts
    PID = 2        # the loop's process
    N = 3          # joints
    STATUS = 4     # LoopStatus
    HEAD = 5       # the mailbox: requests posted …
    TAIL = 6       # … and taken
    SEQ = 7        # the snapshot's seqlock
    EVENTS = 8     # events written
    STOP = 9       # a signal the supervisor passes on (the loop e-stops, naming it)
    ANSWERS = 10   # answers written
    # a replay's block (hil replay): its rows, the row shown, and the twin's time controls (seek to
    # row + 1, 0: none; paused; speed in thousandths, 0: as started)
    REPLAY_ROWS = 11
    REPLAY_ROW = 12
    REPLAY_SEEK = 13
    REPLAY_PAUSE = 14
    REPLAY_SPEED = 15


CTRL_WORDS = len(LoopWord)
# who set the e-stop word (its value): the loop names them in its event
ESTOP_BY = {1: "a client (the twin, hil ctl or a script)", 2: "a remote peer over Zenoh (through the bridge)"}
ESTOP_LOCAL, ESTOP_REMOTE = 1, 2
MAILBOX_SLOTS = 64
ANSWER_SLOTS = 64
ANSWER_BYTES = 240
ANSWER_WAIT_S = 2.0       # how long a poster waits for the loop's answer (it answers within a cycle or two)
EVENT_BYTES = 480
EVENT_SLOTS = 32          # the last events, so a reader polling slowly still sees every one
INFO_BYTES = 512
ERROR_PREFIX = "error: "  # an event line that says why the loop could not run (printed once, by the supervisor)
POST_WAIT_S = 0.2         # a full mailbox: how long a request waits for room before it is refused


def slot_floats(n: int) -> int:
    """Floats per mailbox slot: kind, payload length, request id, and room for one pose of `n` joints."""
    return max(40, n + 3)


class Answer(str):
    """The loop's answer to a request: the sentence itself (a str), and `ok` whether it was
    accepted. A request the loop did not answer within ANSWER_WAIT_S is not ok, and says so."""

    ok: bool

    def __new__(cls, text: str, ok: bool) -> "Answer":
        a = super().__new__(cls, text)
        a.ok = ok
        return a


def runtime_dir() -> str:
    """This user's private folder for loop blocks (created 0700; refused if anyone else could
    enter it or it is not a real folder). `HIL_RUNTIME_DIR` sets another one: loops started with
    it are seen only by `hil ctl`, twins and scripts that have it too (benches on one machine kept
    apart, test runs side by side)."""
    path = os.environ.get("HIL_RUNTIME_DIR")
    if not path:
        return user_folder()
    path = os.path.abspath(path)
    return private_folder(path, f"{path} (HIL_RUNTIME_DIR)", "set HIL_RUNTIME_DIR to a new folder, or unset it")


class LoopStatus(IntEnum):
    STARTING = 0
    RUNNING = 1
    STOPPED = 2
    FAILED = 3


class LoopRequest(IntEnum):
    """Mailbox request kinds (payload in radians / SI)."""

    ESTOP = 1
    ENABLE = 2
    DISABLE = 3
    CLEAR_FAULT = 4
    JOG = 5            # payload: q target (n)
    START_MOTION = 6
    STOP_MOTION = 7    # hold where the command is
    SHUTDOWN = 8
    LOAD_MOTION = 9    # payload: the token of a planned motion's attachment (`attachment_path`)
    RECORD_START = 10  # payload: the token of an attachment naming the file to record into
    RECORD_STOP = 11


# requests whose one value is an attachment's token: what they carry does not fit a mailbox slot
ATTACHED = frozenset({LoopRequest.LOAD_MOTION, LoopRequest.RECORD_START})
TOKEN_MAX = 2 ** 52   # tokens are whole numbers a float64 holds exactly


# The loop writes these every cycle, in this order, with one slice assignment (`CYCLE_SCALARS`)
CYCLE_SCALARS = ("t", "cycle", "board_state", "faults", "safety_flags", "enabled", "ramping", "motion_running",
                 "motion_progress", "mode", "activity", "link_ok", "stale", "misses", "stale_total", "link_errors",
                 "decoder_drops", "safety_total")


# snapshot fields: name -> (offset in float64 words, length); built per joint count
def _snapshot_layout(n: int) -> dict[str, tuple[int, int]]:
    fields = [*((name, 1) for name in CYCLE_SCALARS), ("q_cmd", n), ("q_meas", n), ("q_target", n), ("qd_meas", n),
              ("rate_hz", 1), ("jitter_p50_us", 1), ("jitter_p99_us", 1), ("jitter_max_us", 1),
              ("cycle_p50_us", 1), ("cycle_p99_us", 1), ("sched_fifo", 1), ("cpu", 1), ("event_seq", 1), ("com", 3),
              ("jitter_hist", 20), ("estimated", 1),
              # each joint's measured load: its current as a signed fraction of its servo's stall current
              ("load", n)]
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


def loop_name(robot_name: str, pid: int) -> str:
    """The block's name for a loop: hil_<robot>_<pid>, the robot's name kept to letters, digits and '-'."""
    return f"hil_{re.sub(r'[^A-Za-z0-9-]+', '-', robot_name).strip('-')[:40] or 'robot'}_{pid}"


class SharedState:
    """The shared block; `create=True` in the loop's parent, attach by name elsewhere."""

    def __init__(self, name: str, n: int | None = None, create: bool = False) -> None:
        if not name or "/" in name or name.startswith("."):
            raise InputError(f"{name!r} is not a loop name (hil_<robot>_<pid>; `hil ctl status` lists them)")
        self.name = name
        self.path = os.path.join(runtime_dir(), name)
        flags = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC
        if create:
            if n is None or n < 1:
                raise ValueError("n is required to create the block")
            size = self._size(n)
            self.fd = os.open(self.path, flags | os.O_CREAT | os.O_EXCL, 0o600)
            os.ftruncate(self.fd, size)
        else:
            try:
                self.fd = os.open(self.path, flags)
            except FileNotFoundError:
                raise HilError(f"no running hil loop named {name!r}; start one with `hil run`") from None
            except OSError as e:
                raise HilError(f"cannot open the loop {name!r}: {e.strerror}") from None
            size = os.fstat(self.fd).st_size
            if size < CTRL_WORDS * 8:
                os.close(self.fd)
                raise HilError(f"shared block {name!r} is not a hil loop")
        self.owner = create
        self.mm = mmap.mmap(self.fd, size)
        buf = self.mm
        self.ctrl = np.ndarray((CTRL_WORDS,), dtype=np.int64, buffer=buf, offset=0)
        self.lock = Seqlock(self.ctrl, LoopWord.SEQ)
        if create:
            self.ctrl[:] = 0
            self.ctrl[LoopWord.N] = n
            self.ctrl[LoopWord.MAGIC] = MAGIC
        elif self.ctrl[LoopWord.MAGIC] != MAGIC or not 0 < self.ctrl[LoopWord.N] <= 4096 or size != self._size(int(self.ctrl[LoopWord.N])):
            self._unmap()
            raise HilError(f"shared block {name!r} is not a hil loop of this version")
        self.n = int(self.ctrl[LoopWord.N])
        self.layout = _snapshot_layout(self.n)
        self.slot = slot_floats(self.n)
        nf = self.layout["_size"][0]
        off = CTRL_WORDS * 8
        self.data = np.ndarray((nf,), dtype=np.float64, buffer=buf, offset=off)
        off += nf * 8
        self.event_buf = np.ndarray((EVENT_SLOTS, EVENT_BYTES), dtype=np.uint8, buffer=buf, offset=off)
        off += EVENT_SLOTS * EVENT_BYTES
        self.mailbox = np.ndarray((MAILBOX_SLOTS, self.slot), dtype=np.float64, buffer=buf, offset=off)
        off += MAILBOX_SLOTS * self.slot * 8
        self.answer_ids = np.ndarray((ANSWER_SLOTS, 2), dtype=np.int64, buffer=buf, offset=off)
        off += ANSWER_SLOTS * 2 * 8
        self.answer_text = np.ndarray((ANSWER_SLOTS, ANSWER_BYTES), dtype=np.uint8, buffer=buf, offset=off)
        off += ANSWER_SLOTS * ANSWER_BYTES
        self.info_buf = np.ndarray((INFO_BYTES,), dtype=np.uint8, buffer=buf, offset=off)
        self._scratch = np.empty(nf)
        self._view = {k: (o, s) for k, (o, s) in self.layout.items() if not k.startswith("_")}
        # the control words as plain ints, for readers that poll them every cycle (NumPy's scalars
        # cost several times more per read)
        self._mv = memoryview(self.mm)
        self._mv_q = self._mv.cast("q")
        self.words = self._mv_q[:CTRL_WORDS]
        self.bad_requests = 0

    @staticmethod
    def _size(n: int) -> int:
        return (CTRL_WORDS * 8 + _snapshot_layout(n)["_size"][0] * 8 + EVENT_SLOTS * EVENT_BYTES
                + MAILBOX_SLOTS * slot_floats(n) * 8 + ANSWER_SLOTS * (16 + ANSWER_BYTES) + INFO_BYTES)

    def set_info(self, **info) -> None:
        """The loop's description for listings (robot, board id, port, pid): JSON, truncated to fit."""
        raw = json.dumps(info).encode()[:INFO_BYTES - 1]
        self.info_buf[:] = 0
        self.info_buf[:len(raw)] = np.frombuffer(raw, dtype=np.uint8)

    def info(self) -> dict:
        raw = bytes(self.info_buf).split(b"\x00", 1)[0]
        try:
            value = json.loads(raw.decode()) if raw else {}
        except (UnicodeDecodeError, ValueError):
            return {}
        return value if isinstance(value, dict) else {}

    # ------------------------------------------------------------- writer side
    def field(self, name: str) -> np.ndarray:
        """A view of one field in the snapshot area (the loop writes through these views)."""
        o, s = self.layout[name]
        return self.data[o:o + s]

    def begin_write(self) -> None:
        self.lock.begin_write()

    def end_write(self) -> None:
        self.lock.end_write()

    def set_event(self, text: str) -> None:
        """Publish an event line (kept in a ring of the last EVENT_SLOTS)."""
        raw = text.encode("utf-8", "replace")[:EVENT_BYTES - 1]
        self.begin_write()
        k = int(self.ctrl[LoopWord.EVENTS]) + 1
        slot = self.event_buf[k % EVENT_SLOTS]
        slot[:] = 0
        slot[:len(raw)] = np.frombuffer(raw, dtype=np.uint8)
        self.ctrl[LoopWord.EVENTS] = k
        self.end_write()

    def events_since(self, seen: int) -> tuple[int, list[str]]:
        """(newest event number, texts of the events after `seen`), oldest first."""
        got: list = []

        def copy() -> None:
            k = int(self.ctrl[LoopWord.EVENTS])
            first = max(seen + 1, k - EVENT_SLOTS + 1, 1)
            got[:] = [k, [bytes(self.event_buf[i % EVENT_SLOTS]).split(b"\x00", 1)[0].decode("utf-8", "replace")
                          for i in range(first, k + 1)]]
        return (got[0], got[1]) if self.lock.read(copy) is not None else (seen, [])

    # ------------------------------------------------------------- reader side
    def read(self, timeout_s: float = 0.1) -> Snapshot:
        """A consistent snapshot (asked again while the loop is mid-write, up to `timeout_s`)."""
        deadline = time.monotonic() + timeout_s
        last: list = [b""]

        def copy() -> None:
            np.copyto(self._scratch, self.data)
            k = int(self.ctrl[LoopWord.EVENTS])
            last[0] = bytes(self.event_buf[k % EVENT_SLOTS]).split(b"\x00", 1)[0] if k else b""
        while self.lock.read(copy) is None:
            if time.monotonic() > deadline:
                raise HilError("could not read a consistent snapshot (loop stuck mid-write?)")
            time.sleep(0.0005)
        vals = {}
        for k, (o, s) in self._view.items():
            vals[k] = float(self._scratch[o]) if s == 1 else self._scratch[o:o + s].copy()
        return Snapshot(vals, last[0].decode("utf-8", "replace"))

    # ---------------------------------------------------------------- mailbox
    def check_request(self, kind, payload) -> np.ndarray:
        """The payload of a valid request as floats; InputError naming what is wrong otherwise."""
        try:
            kind = LoopRequest(int(kind))
        except (ValueError, TypeError, OverflowError):
            raise InputError(f"unknown request kind {kind!r}; kinds: {', '.join(r.name for r in LoopRequest)}") from None
        try:
            p = np.asarray(payload, dtype=np.float64).reshape(-1)
        except (ValueError, TypeError):
            raise InputError(f"{kind.name}: the payload is not numbers") from None
        want = self.n if kind == LoopRequest.JOG else 1 if kind in ATTACHED else 0
        if p.size != want:
            raise InputError(f"{kind.name}: takes no values, got {p.size}" if not want else
                             f"{kind.name}: needs one value (the attachment's token), got {p.size}"
                             if kind in ATTACHED else f"{kind.name}: needs {want} values (one per joint, radians), "
                             f"got {p.size}")
        if not np.all(np.isfinite(p)):
            raise InputError(f"{kind.name}: values must be finite (no NaN or inf)")
        if kind in ATTACHED and not (1 <= p[0] < TOKEN_MAX and p[0] == np.floor(p[0])):
            raise InputError(f"{kind.name}: the attachment's token must be a whole number in [1, 2**52)")
        return p

    def post(self, kind: int, payload=()) -> int:
        """Append a request to the mailbox (any process); its id, which the loop's answer names
        (`wait_answer`). Refused when invalid, or when the loop has not made room within
        POST_WAIT_S (it takes a bounded number per cycle)."""
        p = self.check_request(kind, payload)
        deadline = time.monotonic() + POST_WAIT_S
        while True:
            fcntl.flock(self.fd, fcntl.LOCK_EX)
            try:
                head = int(self.ctrl[LoopWord.HEAD])
                if head - int(self.ctrl[LoopWord.TAIL]) < MAILBOX_SLOTS:
                    slot = self.mailbox[head % MAILBOX_SLOTS]
                    slot[:] = 0.0
                    slot[0] = int(kind)
                    slot[1] = p.size
                    slot[2] = head + 1
                    slot[3:3 + p.size] = p
                    self.ctrl[LoopWord.HEAD] = head + 1
                    return head + 1
            finally:
                fcntl.flock(self.fd, fcntl.LOCK_UN)
            if time.monotonic() > deadline:
                raise HilError("the loop's mailbox is full: it takes requests every cycle, so it is not "
                               "running or too many requests came at once")
            time.sleep(0.002)

    def answer(self, request_id: int, ok: bool, text: str) -> None:
        """The loop's answer to a request (loop only: the one writer of the ring)."""
        k = int(self.ctrl[LoopWord.ANSWERS])
        i = k % ANSWER_SLOTS
        raw = text.encode("utf-8", "replace")[:ANSWER_BYTES - 1]
        self.answer_ids[i, 0] = -1   # being written
        self.answer_text[i, :] = 0
        self.answer_text[i, :len(raw)] = np.frombuffer(raw, dtype=np.uint8)
        self.answer_ids[i, 1] = 1 if ok else 0
        self.answer_ids[i, 0] = request_id
        self.ctrl[LoopWord.ANSWERS] = k + 1

    def wait_answer(self, request_id: int, timeout_s: float = ANSWER_WAIT_S) -> Answer:
        """The loop's answer to request `request_id`, waited for up to `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while True:
            ids = self.answer_ids
            for i in range(ANSWER_SLOTS):
                if int(ids[i, 0]) == request_id:
                    ok = bool(ids[i, 1])
                    text = bytes(self.answer_text[i]).split(b"\x00", 1)[0].decode("utf-8", "replace")
                    if int(ids[i, 0]) == request_id:   # not overwritten while read
                        return Answer(text, ok)
            if time.monotonic() > deadline:
                status = LoopStatus(int(self.ctrl[LoopWord.STATUS])) if 0 <= int(self.ctrl[LoopWord.STATUS]) <= 3 else None
                why = "it is not running" if status in (LoopStatus.STOPPED, LoopStatus.FAILED) else "it may be stuck"
                return Answer(f"no answer from the loop within {timeout_s:g} s ({why})", False)
            time.sleep(0.002)

    def take(self, limit: int = 16) -> list[tuple[LoopRequest, np.ndarray, int]]:
        """Up to `limit` requests posted since the last call (loop only), each (kind, payload, id),
        checked again: the block is writable by any process of this user. Invalid ones are counted
        and dropped."""
        head = int(self.ctrl[LoopWord.HEAD])
        tail = int(self.ctrl[LoopWord.TAIL])
        if not 0 <= head - tail <= MAILBOX_SLOTS:  # a scribbled index: start afresh
            self.bad_requests += 1
            self.ctrl[LoopWord.TAIL] = head
            return []
        out = []
        while tail < head and len(out) < limit:
            slot = self.mailbox[tail % MAILBOX_SLOTS]
            tail += 1
            size, rid = slot[1], slot[2]
            if not (math.isfinite(size) and 0 <= size <= self.slot - 3 and math.isfinite(rid)):
                self.bad_requests += 1
                continue
            try:
                p = self.check_request(slot[0], slot[3:3 + int(size)].copy())
            except InputError as e:
                self.bad_requests += 1
                self.answer(int(rid), False, f"refused: {message(e)}")
                continue
            out.append((LoopRequest(int(slot[0])), p, int(rid)))
        self.ctrl[LoopWord.TAIL] = tail
        return out

    def _unmap(self) -> None:
        # views into the buffer must go before the mapping can close
        for attr in ("words", "_mv_q", "_mv"):
            view = self.__dict__.pop(attr, None)
            if view is not None:
                view.release()
        for attr in ("ctrl", "data", "event_buf", "mailbox", "info_buf", "_scratch", "answer_ids", "answer_text"):
            if hasattr(self, attr):
                delattr(self, attr)
        self.mm.close()
        os.close(self.fd)

    def close(self) -> None:
        if not hasattr(self, "ctrl"):
            return
        self._unmap()
        if self.owner:
            unlink_block(self.name)


def unlink_block(name: str) -> None:
    """Remove a loop's block and its attachments left unread (its owner does at the end; the loop
    does when its owner died)."""
    try:
        folder = runtime_dir()
        os.unlink(os.path.join(folder, name))
    except (FileNotFoundError, HilError):
        return
    prefix = f".att-{name}-"
    for left in os.listdir(folder):
        if left.startswith(prefix):
            try:
                os.unlink(os.path.join(folder, left))
            except OSError:
                pass


def attachment_path(loop: str, token: int, suffix: str) -> str:
    """Where what a request carries beyond its slot (a planned motion, a file name) waits for the
    loop: in this user's private runtime folder, named for the loop and the request's token (a
    dot file: never taken for a loop's block)."""
    return os.path.join(runtime_dir(), f".att-{loop}-{int(token)}{suffix}")


def _owner_alive(name: str) -> bool:
    try:
        pid = int(name.rsplit("_", 1)[1])
        os.kill(pid, 0)
        return True
    except (ValueError, IndexError, ProcessLookupError):
        return False
    except PermissionError:
        return True


def running_loops() -> list[str]:
    """Names of this user's running hil loops (blocks left by a run that was killed are removed)."""
    folder = runtime_dir()
    names = []
    for name in sorted(os.listdir(folder)):
        if not name.startswith("hil_"):
            continue
        if _owner_alive(name):
            names.append(name)
        else:
            unlink_block(name)
    return names


def describe_loops() -> list[str]:
    """One line per running loop: name, robot, board id, port, loop pid."""
    lines = []
    for name in running_loops():
        try:
            st = SharedState(name)
        except HilError:
            continue
        info = st.info()
        pid = int(st.ctrl[LoopWord.PID])
        st.close()
        lines.append(f"{name}: robot {info.get('robot', '?')}, board {info.get('board', '?')}, "
                     f"port {info.get('port', '?')}, loop pid {pid}")
    return lines


class LoopClient:
    """Talk to a running loop: read snapshots, post requests, e-stop."""

    def __init__(self, name: str | None = None) -> None:
        if name is None:
            names = running_loops()
            if not names:
                raise HilError("no running hil loop found; start one with `hil run --robot R --dry-run`")
            if len(names) > 1:
                raise HilError("more than one hil loop is running; name one (`--loop NAME`, "
                               "LoopClient(NAME)):\n  " + "\n  ".join(describe_loops()))
            name = names[0]
        self.state = SharedState(name)
        self.n = self.state.n

    @property
    def name(self) -> str:
        return self.state.name

    def snapshot(self) -> Snapshot:
        return self.state.read()

    def status(self) -> LoopStatus:
        return LoopStatus(int(self.state.ctrl[LoopWord.STATUS]))

    def info(self) -> dict:
        """What the loop says of its run: robot, board, port, and whether positions are estimates."""
        return self.state.info()

    @property
    def pid(self) -> int:
        """The loop process's id."""
        return int(self.state.ctrl[LoopWord.PID])

    # ------------------------------------------------------------- a replay's time
    @property
    def replay_rows(self) -> int:
        """How many rows the replay has (0: this is a live loop, not a replay)."""
        return int(self.state.ctrl[LoopWord.REPLAY_ROWS])

    @property
    def replay_row(self) -> int:
        return int(self.state.ctrl[LoopWord.REPLAY_ROW])

    def replay_seek(self, row: int) -> None:
        self.state.ctrl[LoopWord.REPLAY_SEEK] = max(0, min(int(row), self.replay_rows - 1)) + 1

    def replay_pause(self, paused: bool) -> None:
        self.state.ctrl[LoopWord.REPLAY_PAUSE] = int(bool(paused))

    def replay_speed(self, speed: float) -> None:
        self.state.ctrl[LoopWord.REPLAY_SPEED] = int(round(speed * 1000))

    def estop(self, timeout_s: float = 1.0, by: int = ESTOP_LOCAL) -> Answer:
        """Set the e-stop word: the loop sends ESTOP in its next cycle (nothing queues before it),
        naming who asked (`by`: a key of ESTOP_BY). Returns once the loop is in ESTOP (or says why
        not within `timeout_s`)."""
        self.state.ctrl[LoopWord.ESTOP] = by
        s = self.wait(lambda s: int(s.mode) == Mode.ESTOP, timeout_s)
        if s is not None:
            return Answer("e-stop: ESTOP sent to the board", True)
        return Answer(f"e-stop asked for; the loop did not show ESTOP within {timeout_s:g} s (is it running?)", False)

    def _ask(self, kind: LoopRequest, payload=()) -> Answer:
        return self.state.wait_answer(self.state.post(kind, payload))

    def enable(self) -> Answer:
        """Ask for torque on; the loop's answer (accepted: it ramps in from the measured pose)."""
        return self._ask(LoopRequest.ENABLE)

    def disable(self) -> Answer:
        return self._ask(LoopRequest.DISABLE)

    def clear_fault(self) -> Answer:
        return self._ask(LoopRequest.CLEAR_FAULT)

    def jog(self, q: np.ndarray) -> Answer:
        """Ask the loop to move to joint angles q (rad); refused, with the reason, when the pose
        fails a safety check (collision, balance, workspace, floor) or the robot is not enabled."""
        q = np.asarray(q, dtype=np.float64)
        if q.shape != (self.n,) or not np.all(np.isfinite(q)):
            raise InputError(f"jog target must be {self.n} finite joint angles (radians), got shape {q.shape}")
        return self._ask(LoopRequest.JOG, q)

    def start_motion(self) -> Answer:
        return self._ask(LoopRequest.START_MOTION)

    def stop_motion(self) -> Answer:
        return self._ask(LoopRequest.STOP_MOTION)

    def shutdown(self) -> Answer:
        return self._ask(LoopRequest.SHUTDOWN)

    def wait_until(self, predicate, what: str, timeout_s: float = 10.0):
        """The first snapshot for which predicate(snapshot) is true; HilError saying what was waited
        for, for how long, where the loop is (its mode, activity, board state) and its last words
        when none comes within `timeout_s`, or when the loop stops meanwhile."""
        seen, _ = self.state.events_since(0)
        deadline = time.monotonic() + timeout_s
        while True:
            s = self.snapshot()
            if predicate(s):
                return s
            stopped = self.status() in (LoopStatus.STOPPED, LoopStatus.FAILED)
            if stopped or time.monotonic() > deadline:
                _, said = self.state.events_since(max(0, seen - 3))
                where = (f"{Mode(int(s.mode)).name} {Activity(int(s.activity)).name}, board "
                         f"{BOARD_STATES.get(int(s.board_state), '?')}")
                last = f"; its last words: {' | '.join(said[-3:])}" if said else ""
                why = "the loop stopped" if stopped else f"not within {timeout_s:g} s"
                raise HilError(f"waited for {what}: {why}; the loop is {where}{last}")
            time.sleep(0.005)

    def wait(self, predicate, timeout_s: float = 2.0, poll_s: float = 0.002):
        """Poll snapshots until predicate(snapshot) is true; returns it, or None on timeout
        (`wait_until` says what was waited for and why it ended)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            s = self.snapshot()
            if predicate(s):
                return s
            time.sleep(poll_s)
        return None

    def close(self) -> None:
        self.state.close()
