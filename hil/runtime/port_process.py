"""The serial port in a process of its own, so that the control loop shares neither the GIL nor a
lock with anything that touches the port.

With the port on a thread of the loop's process, the loop waits for the GIL whenever that thread
holds it: for up to the interpreter's switch interval when all goes well, and for milliseconds when
the thread's CPU is taken from it meanwhile (a hypervisor's steal, a busy twin); the missed-deadline
breakdown (misses.py) names such waits, and benchmarks/README.md has their share.
Here the loop and the port process meet only in shared memory:

- the command slot (joint targets and the hold flag) behind a seqlock, which the loop writes each
  cycle, then wakes the port process through an eventfd (one system call that never blocks);
- the state slot (the newest STATE) behind a seqlock, which the port process writes and the loop
  reads without waiting;
- words for e-stop (a counter: the port process sends ESTOP as soon as it sees it change), the
  link's loss and its reason, the port process's heartbeat and a stop request.

Board transactions (enable, disable, clear faults, reconnect, round-trip timing, the joint map)
go over a pipe and are answered there; the loop calls them from helper threads as before.
`PortLink` is the loop's side and offers the part of `firmware_protocol.link.Link` the loop uses.
"""

from __future__ import annotations

import errno
import functools
import mmap
import os
import select
import signal
import sys
import threading
import time
from multiprocessing import get_context

import numpy as np

from firmware_protocol.board_data import Imu, StateSample
from firmware_protocol.buses.bus_board import BusConfig
from firmware_protocol.protocol_errors import LinkLostError
from hil.runtime.realtime import freeze_heap, leave_the_loop_cpu, loop_cpu_choice
from hil.seqlock import Seqlock
from hil.runtime.transport import BoardTransport, ThreadPort, connect_board

# int64 control words
K_CMD_SEQ, K_STATE_SEQ, K_STATE_COUNT, K_ESTOP, K_LOST, K_HEARTBEAT_NS, K_STOP, K_DROPPED = range(8)
PORT_WORDS = K_DROPPED + 1
REASON_BYTES = 512


@functools.lru_cache(maxsize=None)
def state_record(n: int) -> np.dtype:
    """The state slot's one record, every field a float64 (the seqlock copies the slot as floats);
    made once per joint count (a dtype takes longer to build than a STATE to pack)."""
    return np.dtype([("t_host", "f8"), ("t_board_us", "f8"), ("seq", "f8"), ("echo_seq", "f8"), ("state", "f8"),
                     ("faults", "f8"), ("supply_mV", "f8"), ("imu_valid", "f8"), ("quat", "f8", 4),
                     ("gyro", "f8", 3), ("acc", "f8", 3), ("q", "f8", n), ("qd", "f8", n),
                     ("current_mA", "f8", n), ("jflags", "f8", n)])


def _state_floats(n: int) -> int:
    return state_record(n).itemsize // 8


class StateSlots:
    """Where each field of `state_record(n)` lies in the slot's floats: a scalar's index, an array's
    slice (plain indexing: a structured view costs the loop's poll three times as much)."""

    def __init__(self, n: int) -> None:
        for name, (dt, offset) in state_record(n).fields.items():
            at = offset // 8
            setattr(self, name, at if dt.shape == () else slice(at, at + dt.shape[0]))


def _block_offsets(n: int) -> tuple[int, int, int]:
    """(offset of the command floats, of the state floats, total bytes)."""
    cmd = PORT_WORDS * 8
    state = cmd + (1 + n) * 8
    reason = state + _state_floats(n) * 8
    return cmd, state, reason + REASON_BYTES


class _Block:
    """Views over the shared block: ctrl words, command slot, state slot, loss reason."""

    def __init__(self, buf, n: int) -> None:
        cmd, state, total = _block_offsets(n)
        self.n = n
        self.ctrl = np.frombuffer(buf, dtype=np.int64, count=PORT_WORDS, offset=0)
        self.cmd = np.frombuffer(buf, dtype=np.float64, count=1 + n, offset=cmd)
        self.state = np.frombuffer(buf, dtype=np.float64, count=_state_floats(n), offset=state)
        self.reason = np.frombuffer(buf, dtype=np.uint8, count=REASON_BYTES, offset=total - REASON_BYTES)
        self.locks = {K_CMD_SEQ: Seqlock(self.ctrl, K_CMD_SEQ), K_STATE_SEQ: Seqlock(self.ctrl, K_STATE_SEQ)}

    def write(self, seq_word: int, area: np.ndarray, values: np.ndarray) -> None:
        """One writer per area (hil.seqlock)."""
        lock = self.locks[seq_word]
        lock.begin_write()
        area[:] = values
        lock.end_write()

    def read(self, seq_word: int, area: np.ndarray, out: np.ndarray) -> int:
        """A whole copy of `area` into `out`: the sequence word it read (even), or -1 when none came
        (`out` is then garbage; the loop never spins on a stopped writer)."""
        seq = self.locks[seq_word].read(lambda: np.copyto(out, area))
        return -1 if seq is None else seq

    def set_reason(self, text: str) -> None:
        raw = text.encode()[:REASON_BYTES - 1]
        self.reason[:] = 0
        self.reason[:len(raw)] = np.frombuffer(raw, dtype=np.uint8)

    def get_reason(self) -> str:
        raw = self.reason.tobytes()
        return raw[:raw.index(0) if 0 in raw else len(raw)].decode(errors="replace")


# ------------------------------------------------------------------------ the port process side
def _serve(port: str, baud: int, link_timeout_s: float, n: int, realtime: bool, buf, conn, efd: int,
           parent: int, bus=None, watchdog_ms: int | None = None) -> None:
    """The port process: connect, then move commands out and states in until told to stop, the
    loop's process is gone, or the link is lost (then wait for a reconnect request)."""
    # Ctrl-C, or a SIGTERM/SIGHUP to the whole process group (`timeout`, a service manager), is the
    # loop's to handle: it e-stops the board through us, then stops us; we also end when it dies
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    block = _Block(buf, n)
    # before the link exists, so that any thread it starts runs at the same priority
    if realtime:  # forked before the loop's claim: its CPU is the one the claim will choose
        leave_the_loop_cpu(loop_cpu_choice(), fifo=True)
    try:
        link = connect_board(port, baud, link_timeout_s, n, bus, watchdog_ms)
    except BaseException as e:  # noqa: BLE001 - handed to the loop, which reports it
        conn.send(("error", e))
        return
    block.ctrl[K_HEARTBEAT_NS] = time.monotonic_ns()
    freeze_heap(collect=False)   # (forked from the loop)
    conn.send(("info", link.info))
    server = _PortServer(link, block, conn, n)
    orphaned = False
    try:
        while not block.ctrl[K_STOP] and os.getppid() == parent:
            ready = server.wait(efd)
            server.estop_if_asked()
            if conn in ready and not server.take_request():
                orphaned = not block.ctrl[K_STOP]   # its end closed: the loop is gone, or closing us
                break
            block.ctrl[K_HEARTBEAT_NS] = time.monotonic_ns()
            server.exchange()
        if (orphaned or os.getppid() != parent) and not block.ctrl[K_LOST]:
            # the loop's process died without stopping us: nothing drives the robot any more
            try:
                link.estop()
                print("hil: the loop's process is gone; its port process sent ESTOP to the board", file=sys.stderr,
                      flush=True)
            except Exception:  # noqa: BLE001 - the board's watchdog is the fallback
                pass
    except BaseException as e:  # a bug here: say so where the loop looks, rather than only on stderr
        block.set_reason(f"the port process failed: {e!r}")
        block.ctrl[K_LOST] = 1
        raise
    finally:
        link.close()


class _PortServer:
    """The port process's side of the link between its passes: the requests the loop sends (each
    answered from a thread of its own), the newest command out, the newest state in."""

    def __init__(self, link, block: "_Block", conn, n: int) -> None:
        self.link, self.block, self.conn, self.n = link, block, conn, n
        self.send_lock = threading.Lock()
        self.exclusive = threading.Lock()  # held by calls that drive the port themselves (reconnect, timing)
        self.cmd = np.zeros(1 + n)
        self.state = np.zeros(_state_floats(n))
        self.last_cmd_seq = int(block.ctrl[K_CMD_SEQ])
        self.seen_estop = int(block.ctrl[K_ESTOP])
        self.published = None

    def wait(self, efd: int) -> list:
        """Until the loop sends a request or wakes us (its eventfd), the port has bytes, or 2 ms."""
        link, block = self.link, self.block
        fds = [self.conn, efd]
        if link.fileno() is not None and not block.ctrl[K_LOST] and not self.exclusive.locked():
            fds.append(link.fileno())
        try:
            ready = select.select(fds, [], [], 0.002)[0]
        except (OSError, ValueError):  # the port's fd closed under us by a reconnect
            ready = []
        if efd in ready:
            try:
                os.eventfd_read(efd)
            except BlockingIOError:
                pass
        return ready

    def estop_if_asked(self) -> None:
        if int(self.block.ctrl[K_ESTOP]) != self.seen_estop:
            self.seen_estop = int(self.block.ctrl[K_ESTOP])
            try:
                self.link.estop()
            except Exception:  # noqa: BLE001 - lost link: the board's watchdog stops it
                pass

    def take_request(self) -> bool:
        """The loop's next request, started on a thread of its own; False when the loop's end of the
        pipe has closed."""
        try:
            _, req_id, name, args = self.conn.recv()
        except EOFError:
            return False
        if name in ("reconnect", "round_trips_ms", "set_joint_map"):
            def exclusive_call(req_id=req_id, name=name, args=args):
                with self.exclusive:
                    self._call(req_id, name, args)
            threading.Thread(target=exclusive_call, daemon=True).start()
        else:  # enable, disable, clear_faults: they wait for an ACK that `exchange` delivers
            threading.Thread(target=self._call, args=(req_id, name, args), daemon=True).start()
        return True

    def _call(self, req_id: int, name: str, args: tuple) -> None:
        try:
            if name == "set_joint_map":
                self.link.joint_map = args[0]
                value = None
            else:
                value = getattr(self.link, name)(*args)
            if name == "reconnect":
                self.block.ctrl[K_LOST] = 0
            self._reply(req_id, True, value)
        except BaseException as e:  # noqa: BLE001
            self._reply(req_id, False, e)

    def _reply(self, req_id: int, ok: bool, value) -> None:
        with self.send_lock:
            try:
                self.conn.send(("reply", req_id, ok, value))
            except (OSError, ValueError):
                pass

    def exchange(self) -> None:
        """The loop's newest command to the board, the board's newest state to the loop (unless the
        link is lost, or a call that drives the port itself holds it)."""
        block = self.block
        if block.ctrl[K_LOST] or not self.exclusive.acquire(blocking=False):
            return
        try:
            s = int(block.ctrl[K_CMD_SEQ])
            if s != self.last_cmd_seq:
                got = block.read(K_CMD_SEQ, block.cmd, self.cmd)
                if got < 0:  # the loop died while writing: the parent check in `_serve` ends us
                    return
                self.last_cmd_seq = got
                self.link.send_positions(self.cmd[1:], hold=bool(self.cmd[0]))
            sample = self.link.poll()
            if sample is not None and sample is not self.published:
                self.published = sample
                _pack(sample, self.state, self.n)
                block.write(K_STATE_SEQ, block.state, self.state)
                block.ctrl[K_STATE_COUNT] += 1
            block.ctrl[K_DROPPED] = self.link.rejected_frames
        except LinkLostError as e:
            block.set_reason(e.strerror or str(e))
            block.ctrl[K_LOST] = 1
            self.published = None
        finally:
            self.exclusive.release()


def _pack(sample: StateSample, state: np.ndarray, n: int) -> None:
    """A state into the block's words (the loop's `poll` unpacks them)."""
    r = state.view(state_record(n))[0]   # the port process's side: once a STATE, not in the loop's cycle
    for name in ("t_host", "t_board_us", "seq", "echo_seq", "state", "faults", "supply_mV", "q", "qd",
                 "current_mA", "jflags"):
        r[name] = getattr(sample, name)
    imu = sample.imu
    r["imu_valid"] = imu is not None
    if imu is not None:
        r["quat"], r["gyro"], r["acc"] = imu.quat, imu.gyro, imu.acc


# ---------------------------------------------------------------------------- the loop's side
class PortLink:
    """The loop's handle on the port process: `poll`, `send_positions` and `estop` touch only
    shared memory (and an eventfd), the transactions wait for the port process's answer."""

    def __init__(self, port: str, baud: int, link_timeout_s: float, expect_joints: int, realtime: bool,
                 connect_timeout_s: float = 10.0, bus=None, watchdog_ms: int | None = None) -> None:
        n = expect_joints
        self.port = port
        self.n = n
        self._slots, self._floats = StateSlots(n), _state_floats(n)
        self.link_timeout_s = link_timeout_s
        self._buf = mmap.mmap(-1, _block_offsets(n)[2])
        self._block = _Block(self._buf, n)
        self._words = memoryview(self._buf).cast("q")[:PORT_WORDS]  # plain ints: faster than NumPy scalars
        self._efd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        ctx = get_context("fork")  # the loop's imports and models are already here; no re-import
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve, name="hil-port", daemon=True,
                                 args=(port, baud, link_timeout_s, n, realtime, self._buf, child, self._efd,
                                       os.getpid(), bus, watchdog_ms))
        self._proc.start()
        child.close()
        self._lock = threading.Lock()
        self._req = 0
        self._cmd = np.zeros(1 + n)
        self._count = 0  # states published so far: none yet, and poll() must not invent one
        self._latest: StateSample | None = None
        if not self._conn.poll(connect_timeout_s):
            self._kill()
            raise LinkLostError(errno.ETIMEDOUT, f"{port}: the port process did not connect within "
                                                 f"{connect_timeout_s:.0f} s")
        try:
            kind, value = self._conn.recv()
        except EOFError:
            self._kill()
            raise LinkLostError(errno.EIO, f"{port}: the port process ended while connecting") from None
        if kind == "error":
            self._kill()
            raise value
        self.info = value
        self._joint_map = None

    # -------------------------------------------------------------- every cycle: shared memory only
    @property
    def lost(self) -> str | None:
        """Why the link was lost, or None while it works (a stalled port process counts as lost)."""
        if self._words[K_LOST]:
            return self._block.get_reason() or "lost"
        age = time.monotonic_ns() - self._words[K_HEARTBEAT_NS]
        if age > self.link_timeout_s * 1e9:
            return f"the port process has not run for {age / 1e6:.0f} ms"
        return None

    @property
    def rejected_frames(self) -> int:
        """Incoming frames the port process dropped (see `Link.rejected_frames`)."""
        return int(self._words[K_DROPPED])

    def _check(self) -> None:
        why = self.lost
        if why is not None:
            if not why.startswith("link to"):
                why = f"link to {self.port} lost: {why}"
            raise LinkLostError(errno.EIO, why)

    def poll(self) -> StateSample | None:
        """The newest STATE the port process has (the same object until a newer one arrives)."""
        words = self._words
        count = words[K_STATE_COUNT]
        if count == self._count:
            self._check()  # nothing new: is the port process still there, is the link?
            return self._latest
        if words[K_LOST]:
            self._check()
        s = np.empty(self._floats)  # one array per sample: its fields are views of it
        if self._block.read(K_STATE_SEQ, self._block.state, s) < 0:
            # the port process is inside a write: keep the last state (stale for this cycle) and
            # try again next cycle; only a port process that stopped running is a lost link
            self._check()
            return self._latest
        self._count = count
        f = self._slots
        imu = Imu(s[f.quat], s[f.gyro], s[f.acc]) if s[f.imu_valid] else None
        self._latest = StateSample(float(s[f.t_host]), int(s[f.t_board_us]), int(s[f.seq]), int(s[f.echo_seq]),
                                   int(s[f.state]), int(s[f.faults]), s[f.q], s[f.qd], s[f.current_mA], s[f.jflags],
                                   int(s[f.supply_mV]), imu)
        return self._latest

    def send_positions(self, q: np.ndarray, hold: bool = False) -> None:
        """Hand the newest joint targets (rad, joint frame) to the port process."""
        if self._words[K_LOST]:
            self._check()
        self._cmd[0] = 1.0 if hold else 0.0
        self._cmd[1:] = q
        self._block.write(K_CMD_SEQ, self._block.cmd, self._cmd)
        os.eventfd_write(self._efd, 1)

    def estop(self, reason: int = 0) -> None:
        """ESTOP at once: the port process sends it as soon as it sees the counter move."""
        self._block.ctrl[K_ESTOP] += 1
        os.eventfd_write(self._efd, 1)

    # ------------------------------------------------------------- transactions, off the loop thread
    def _call(self, name: str, *args, timeout_s: float = 5.0):
        with self._lock:
            self._req += 1
            req = self._req
            try:
                self._conn.send(("call", req, name, args))
                while True:
                    if not self._conn.poll(timeout_s):
                        raise LinkLostError(errno.ETIMEDOUT, f"{self.port}: the port process did not answer "
                                                             f"{name} within {timeout_s:.0f} s")
                    kind, rid, ok, value = self._conn.recv()
                    if rid == req:
                        break
            except (EOFError, OSError) as e:
                if isinstance(e, LinkLostError):
                    raise
                raise LinkLostError(errno.EIO, f"{self.port}: the port process is gone ({e or 'closed'})") from None
        if not ok:
            raise value
        return value

    def enable(self, joint_mask: int = 0xFFFFFFFF) -> None:
        self._call("enable", joint_mask)

    def disable(self, joint_mask: int = 0xFFFFFFFF) -> None:
        self._call("disable", joint_mask)

    def clear_faults(self, fault_mask: int = 0xFFFFFFFF) -> None:
        self._call("clear_faults", fault_mask)

    def round_trips_ms(self, count: int = 5) -> list[float]:
        return self._call("round_trips_ms", count)

    def describe_faults(self) -> str:
        return self._call("describe_faults")

    def reconnect(self, timeout_s: float = 5.0):
        info = self._call("reconnect", None, timeout_s, timeout_s=timeout_s + 2.0)
        self.info = info
        self._count = self._words[K_STATE_COUNT]  # only states from the new connection count
        self._latest = None
        return info

    @property
    def joint_map(self):
        return self._joint_map

    @joint_map.setter
    def joint_map(self, jm) -> None:
        self._call("set_joint_map", jm)
        self._joint_map = jm

    # ---------------------------------------------------------------------------------- closing
    def _kill(self) -> None:
        if self._proc.is_alive():
            self._proc.kill()  # it ignores the stop signals (see _serve)
        self._proc.join(timeout=2.0)
        self._conn.close()
        os.close(self._efd)

    def close(self) -> None:
        """Stop the port process (it closes the port; the board's watchdog holds the robot)."""
        if self._conn.closed:
            return
        self._block.ctrl[K_STOP] = 1
        os.eventfd_write(self._efd, 1)
        self._proc.join(timeout=2.0)
        self._kill()


def open_transport(port_io: str, port: str, baud: int, link_timeout_s: float, n: int,
                   realtime: bool, bus: BusConfig | None = None, watchdog_ms: int | None = None) -> BoardTransport:
    """Connect to the board on `port` with its serial I/O where `port_io` says. A servo bus waits
    for its servos inside every poll: never on the loop's own thread."""
    if port_io == "process":
        return PortLink(port, baud, link_timeout_s, n, realtime, bus=bus, watchdog_ms=watchdog_ms)
    link = connect_board(port, baud, link_timeout_s, n, bus, watchdog_ms)
    return ThreadPort(link) if port_io == "thread" or bus is not None else link
