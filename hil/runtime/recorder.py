"""Recording of every loop cycle to a file that NumPy alone can read.

The file is a standard `.npy` array of records (`np.load(path)`), one row per cycle:
`t` (s), `q_cmd`, `q_meas`, `q_target` (rad, n each), `board_state`, `faults`, `safety_flags`,
`stale`, `loop_flags` (1 enabled, 2 ramping in, 4 motion running, 8 held; the mode from bit 4), `period_us`, `cycle_us`, `support` (the
foot the running motion stands on: 0 both, 1 left, 2 right, 3 not said), `current_mA` (n: each
servo's current, its load), `imu_quat` (w, x, y, z) and `imu_gyro` (rad/s) of a board with an IMU
(NaN without one), `q_plan` (n: where the motion wants the joints; `q_target` is that plus the
compliance compensation and the stabiliser's lean). Robot, joint names and rate are in `<path>.json` beside it,
the run's event lines in `<path>.events.jsonl` (one `{"t": s, "text": …}` per line, same clock as `t`).

A writer thread appends rows in chunks (every 0.1 s or 512 rows) and, after each chunk, rewrites
the fixed-size header with the new row count and flushes, so the file is always a valid `.npy`
of everything written so far. What can be lost: nothing on Ctrl-C, SIGTERM or an exception in the
loop (the loop closes the recorder in `finally`); at most the last chunk interval (0.1 s) if the
loop process is killed outright (SIGKILL) or the machine loses power. A write that fails (a full
disk, a removed drive) stops the recording where the file is still whole: `failure` says why and
how many rows it keeps, and the loop ends the run (or goes on without recording, as asked).
"""

from __future__ import annotations

import json
import math
import os
import queue
import threading
import time

import numpy as np

from hil import robots
from hil.errors import InputError
from hil.inputs import MAX_ARRAY_BYTES, load_npy, open_regular, parse_json, read_text

# the bits of a row's `loop_flags` (the lifecycle's mode number above them, from bit 4)
LOOP_ENABLED, LOOP_RAMPING, LOOP_MOTION, LOOP_HELD = 1, 2, 4, 8
LOOP_MODE_SHIFT = 4


def loop_flags(enabled: bool, ramping: bool, motion: bool, held: bool, mode: int) -> int:
    """A row's `loop_flags` from what the loop was doing."""
    return (LOOP_ENABLED * enabled | LOOP_RAMPING * ramping | LOOP_MOTION * motion | LOOP_HELD * held
            | int(mode) << LOOP_MODE_SHIFT)


def motion_rows(data: np.ndarray, where: str) -> np.ndarray:
    """The rows from the motion's first running cycle to its last (ramped in, following it): what a
    run did, without the connect and ramp before it or the stop after. InputError when it never ran."""
    running = np.flatnonzero(data["loop_flags"] & LOOP_MOTION)
    if len(running) < 2:
        raise InputError(f"{where}: the run's motion never ran (it was not enabled and ramped in): nothing to "
                         "make an episode of")
    return data[running[0]:running[-1] + 1]


def record_dtype(n: int) -> np.dtype:
    return np.dtype([("t", "<f8"), ("q_cmd", "<f8", (n,)), ("q_meas", "<f8", (n,)), ("q_target", "<f8", (n,)),
                     ("board_state", "u1"), ("faults", "<u4"), ("safety_flags", "<u4"), ("stale", "u1"),
                     ("loop_flags", "u1"), ("period_us", "<f4"), ("cycle_us", "<f4"), ("support", "u1"),
                     ("current_mA", "<f4", (n,)), ("imu_quat", "<f4", (4,)), ("imu_gyro", "<f4", (3,)),
                     ("q_plan", "<f8", (n,))])


def _header_len(dtype: np.dtype) -> int:
    """Bytes reserved for the .npy header, enough for any row count, a multiple of 64."""
    d = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": (10**15,)}
    return (len(repr(d)) + 12 + 63) // 64 * 64


def _header(dtype: np.dtype, rows: int) -> bytes:
    d = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": (rows,)}
    text = repr(d).encode("latin1")
    magic = b"\x93NUMPY\x01\x00"
    body_len = _header_len(dtype) - len(magic) - 2
    text = text + b" " * (body_len - len(text) - 1) + b"\n"
    if len(text) != body_len:
        raise ValueError("record header too long")
    return magic + len(text).to_bytes(2, "little") + text


class Recorder:
    """Append-only cycle recorder with a background writer thread."""

    CHUNK_ROWS = 512
    CHUNK_S = 0.1

    def __init__(self, path: str, n: int, meta: dict) -> None:
        self.path = path
        self.dtype = record_dtype(n)
        self.rows = 0
        # columns filled per cycle (cheap slice writes), packed into records per chunk
        C = self.CHUNK_ROWS
        self._cols = {"t": np.zeros(C), "q_cmd": np.zeros((C, n)), "q_meas": np.zeros((C, n)),
                      "q_target": np.zeros((C, n)), "board_state": np.zeros(C, np.uint8),
                      "faults": np.zeros(C, np.uint32), "safety_flags": np.zeros(C, np.uint32),
                      "stale": np.zeros(C, np.uint8), "loop_flags": np.zeros(C, np.uint8), "period_us": np.zeros(C, np.float32),
                      "cycle_us": np.zeros(C, np.float32), "support": np.zeros(C, np.uint8),
                      "current_mA": np.zeros((C, n), np.float32), "imu_quat": np.full((C, 4), np.nan, np.float32),
                      "imu_gyro": np.full((C, 3), np.nan, np.float32), "q_plan": np.zeros((C, n))}
        self._fill = 0
        self._last_handoff = time.monotonic()
        self._q: queue.Queue = queue.Queue()
        self._f = open(path, "wb")
        self._f.write(_header(self.dtype, 0))
        self._f.flush()
        with open(path + ".json", "w") as f:
            json.dump(meta, f, indent=1)
        self._events = open(path + ".events.jsonl", "w", encoding="utf-8")
        self.failure = ""      # set (once) by the writer when a write fails: why, and the rows kept
        self._thread = threading.Thread(target=self._writer, name="hil-recorder", daemon=True)
        self._thread.start()
        self.closed = False

    def append(self, t: float, q_cmd, q_meas, q_target, board_state: int, faults: int, safety_flags: int,
               stale: bool, period_us: float, cycle_us: float, loop_flags: int = 0, support: int = 3,
               current_mA=0.0, imu=None, q_plan=None) -> None:
        """Add one cycle's row (called by the loop; a few slice writes, no allocation)."""
        if self.failure:
            return
        c = self._cols
        i = self._fill
        c["t"][i] = t
        c["q_cmd"][i] = q_cmd
        c["q_meas"][i] = q_meas
        c["q_target"][i] = q_target
        c["board_state"][i] = board_state
        c["faults"][i] = faults
        c["safety_flags"][i] = safety_flags
        c["stale"][i] = stale
        c["loop_flags"][i] = loop_flags
        c["period_us"][i] = period_us
        c["cycle_us"][i] = cycle_us
        c["support"][i] = support
        c["current_mA"][i] = current_mA
        c["q_plan"][i] = q_target if q_plan is None else q_plan
        if imu is not None:
            c["imu_quat"][i] = imu.quat
            c["imu_gyro"][i] = imu.gyro
        else:
            c["imu_quat"][i] = np.nan
            c["imu_gyro"][i] = np.nan
        self._fill = i + 1
        now = time.monotonic()
        if self._fill >= self.CHUNK_ROWS or now - self._last_handoff >= self.CHUNK_S:
            self._handoff(now)

    def note(self, t: float, text: str) -> None:
        """An event line at loop time t (written by the writer thread, with the next chunk)."""
        self._q.put((t, text))

    def _handoff(self, now: float) -> None:
        k = self._fill
        if k:
            rec = np.empty(k, dtype=self.dtype)
            for name, col in self._cols.items():
                rec[name] = col[:k]
            self._q.put(rec)
            self._fill = 0
        self._last_handoff = now

    def _writer(self) -> None:
        while True:
            chunk = self._q.get()
            if chunk is None:
                return
            if self.failure:
                continue   # drained, not written: the file stays as it was when the write failed
            try:
                if isinstance(chunk, tuple):
                    self._events.write(json.dumps({"t": round(chunk[0], 6), "text": chunk[1]}) + "\n")
                    self._events.flush()
                    continue
                self._f.seek(0, os.SEEK_END)
                self._f.write(chunk.tobytes())
                self._f.flush()
                self.rows += len(chunk)
                self._f.seek(0)
                self._f.write(_header(self.dtype, self.rows))
                self._f.flush()
            except OSError as e:
                self._failed(e)

    def _failed(self, e: OSError) -> None:
        """A write failed: the file is cut back to the rows its header counts (a torn chunk after
        them is dropped), so that it reads whole; `failure` says why."""
        try:
            self._f.seek(0)
            self._f.write(_header(self.dtype, self.rows))
            self._f.truncate(len(_header(self.dtype, 0)) + self.rows * self.dtype.itemsize)
            self._f.flush()
        except (OSError, ValueError):
            pass   # (a closed file: what it holds is what its header says, checked when read)
        self.failure = (f"{e.strerror or e} (writing {self.path}): the recording stopped there; the file keeps "
                        f"{self.rows} rows, readable")

    def close(self) -> None:
        """Write everything still buffered and close the file (idempotent)."""
        if self.closed:
            return
        self.closed = True
        self._handoff(time.monotonic())
        self._q.put(None)
        self._thread.join(timeout=5.0)
        for close in (lambda: self._f.flush(), lambda: os.fsync(self._f.fileno()), self._f.close, self._events.close):
            try:
                close()
            except OSError as e:
                if not self.failure:
                    self._failed(e)
        if not self.failure:
            self._check_readable()

    def _check_readable(self) -> None:
        """The closed file reads back to its last row: its header counts the rows written, and the
        bytes after the header hold them all."""
        try:
            with open(self.path, "rb") as f:
                np.lib.format.read_magic(f)
                shape, _, dtype = np.lib.format.read_array_header_1_0(f)
                body = os.fstat(f.fileno()).st_size - f.tell()
        except (OSError, ValueError) as e:
            self.failure = f"{self.path} does not read back ({e})"
            return
        if shape != (self.rows,) or body < self.rows * dtype.itemsize:
            self.failure = (f"{self.path} reads back {shape} rows in {body} bytes, of the {self.rows} rows "
                            "written: it was changed while it was being written")


REQUIRED_FIELDS = ("t", "q_cmd", "q_meas", "q_target", "board_state", "loop_flags")


def load_recording(path: str) -> tuple[np.ndarray, dict]:
    """(records, metadata) of a recording; plain `np.load(path)` gives the same records. ValueError
    (naming what is wrong) for a file that is not one."""
    with open_regular(path, "recording", MAX_ARRAY_BYTES) as f:
        head = f.read(4)
    if head.startswith(b"PK"):
        raise ValueError("an .npz archive (a planned trajectory?), not a recording: `hil run --record FILE.npy` "
                         "writes those; `hil play FILE.npz --dry-run` runs a trajectory")
    try:
        data = load_npy(path, "recording")
    except InputError as e:
        raise ValueError(str(e).removeprefix(f"recording {path}: ")
                         + " (hil run --record FILE.npy writes a recording)") from None
    if not isinstance(data, np.ndarray) or data.ndim != 1 or data.dtype.names is None \
            or any(f not in data.dtype.names for f in REQUIRED_FIELDS):
        raise ValueError(f"not a table of cycles with the fields {', '.join(REQUIRED_FIELDS)}")
    q, t = data["q_cmd"], data["t"]
    if q.ndim != 2 or q.shape[1] < 1 or not np.all(np.isfinite(t)) or not np.all(np.isfinite(q)):
        raise ValueError("its times or joint columns are malformed or not finite")
    if len(t) and not (np.all(np.diff(t) >= 0) and -1.0 <= t[0] and t[-1] - t[0] <= MAX_RECORDING_S):
        raise ValueError(f"its times go backwards or span more than {MAX_RECORDING_S:g} s: not a run's clock")
    meta = {}
    if os.path.lexists(path + ".json"):
        try:
            meta = parse_json(read_text(path + ".json", "recording's metadata"), path + ".json")
        except InputError as e:
            raise ValueError(str(e)) from None
        if not isinstance(meta, dict):
            raise ValueError(f"its {path}.json is not a table of keys (robot, joints, rate_hz, …)")
        _check_meta(meta, path + ".json")
    return data, meta


MAX_RECORDING_S = 1e7   # a run's clock (115 days): a recording's times beyond it are not a run's


def _check_meta(meta: dict, where: str) -> None:
    """The keys of a recording's .json that the tools reading it use: of the kind they need."""
    rate = meta.get("rate_hz")
    if rate is not None and not (isinstance(rate, (int, float)) and not isinstance(rate, bool)
                                 and 1.0 <= rate <= 1e5):
        raise ValueError(f"{where}: rate_hz = {rate!r}; a loop rate is a number of Hz, 1 … 100000")
    for key in ("robot", "port", "board_uid", "board", "bus", "board_config"):
        if key in meta and meta[key] is not None and not isinstance(meta[key], str):
            raise ValueError(f"{where}: {key} = {meta[key]!r} is not a string")
    started = meta.get("started", 0.0)
    if not (isinstance(started, (int, float)) and not isinstance(started, bool) and 0.0 <= started < 1e11):
        raise ValueError(f"{where}: started = {started!r}; the start is a time in seconds since 1970")
    stall = meta.get("stall_current_mA")
    if stall is not None and not (isinstance(stall, list) and all(isinstance(v, (int, float)) and
                                                                  not isinstance(v, bool) and 0 < v < 1e6
                                                                  for v in stall)):
        raise ValueError(f"{where}: stall_current_mA must be a list of positive currents (mA)")
    joints = meta.get("joints")
    if joints is not None and not (isinstance(joints, list) and all(isinstance(j, str) for j in joints)):
        raise ValueError(f"{where}: joints must be a list of joint names")


def load_events(path: str) -> list[tuple[float, str]]:
    """The event lines of a recording, (t, text) in loop time; lines that do not parse are skipped
    (a run killed mid-write leaves at most a torn last line)."""
    out: list[tuple[float, str]] = []
    try:
        with open(path + ".events.jsonl", encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    e = json.loads(line)
                    t, text = float(e["t"]), str(e["text"])
                except (ValueError, KeyError, TypeError):
                    continue
                if math.isfinite(t):
                    out.append((t, text))
    except OSError:
        pass
    return out


def open_run(path: str, robot: str | None = None):
    """(records, metadata, model) of a recording, for the tools that read one back (replay, export,
    plot); InputError naming the file and what is wrong. `robot` overrides the one its .json names."""

    try:
        data, meta = load_recording(path)
    except (OSError, ValueError) as e:
        raise InputError(f"{path}: not a hil recording ({e})") from e
    if len(data) == 0:
        raise InputError(f"{path}: the recording is empty")
    robot = robot or meta.get("robot")
    if not isinstance(robot, str):
        raise InputError(f"{path}: no {path}.json beside it naming the robot (give --robot)")
    model = robots.load(robot)
    if data["q_cmd"].shape[1] != model.n:
        raise InputError(f"{path}: {data['q_cmd'].shape[1]} joints recorded, {model.name} has {model.n}")
    return data, meta, model
