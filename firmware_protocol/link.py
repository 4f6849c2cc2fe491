"""The host side of the serial link: open, handshake, stream commands, read the newest state.

    link = Link.connect("/dev/ttyACM0")          # or a pty path, or a pyserial URL
    link.enable()                                # board seeds its targets from the measured pose
    link.send_positions(q_rad)                   # one CMD_POS for all joints, never waits
    sample = link.latest()                       # newest STATE, or None; never blocks
    link.estop()                                 # sent at once, three times

A reader thread decodes incoming bytes, keeps the newest STATE, answers transactions and sends a
HEARTBEAT at 10 Hz while no commands flow. The link is declared lost on an I/O error (EIO,
termios errors, a vanished device) or after `link_timeout_s` of silence; every call after that
raises `LinkLostError` naming the port. `reconnect()` finds the same board again (by its unique
id, trying the old path, a stable symlink and USB ports with the same serial number) and never
re-enables torque: after a reconnect or a board reboot the board is disabled until `enable()`.

This module is the one place where joint positions change units and frames: wire µrad in the
board's frame ↔ radians in the joint frame, through `JointMap` (calibration offsets and direction
signs). Nothing else applies them.
"""

from __future__ import annotations

import errno
import glob
import os
import random
import select as _select
import termios
import threading
import time
from collections import deque
from dataclasses import dataclass, field

import numpy as np
import serial
import serial.tools.list_ports

from firmware_protocol import messages as M
from firmware_protocol.errors import (CommandRejectedError, DeviceError, HandshakeError, LinkLostError,
                                      ReplyTimeoutError)
from firmware_protocol.frame import FLAG_RETX, PROTOCOL_MAJOR, PROTOCOL_MINOR, FrameDecoder

_IO_ERRORS = (OSError, termios.error, serial.SerialException)


@dataclass(frozen=True)
class BoardInfo:
    """What the board said in the handshake, plus where it was found."""

    port: str
    kind: int
    n_joints: int
    firmware: str
    uid: str
    boot_id: int
    schema_hash: int
    capabilities: int
    protocol: str
    handshake_ms: float
    usb_serial: str | None = None
    low_latency: bool | None = None

    @property
    def kind_name(self) -> str:
        try:
            return M.BoardKind(self.kind).name
        except ValueError:
            return f"kind {self.kind}"


@dataclass
class JointMap:
    """Board frame ↔ joint frame (radians). Measurements: q = sign · (b − offset); commands:
    b = q + offset. `offset` is the board's zero error; `sign` −1 marks a joint whose measurement
    runs against its command (a reversed encoder or a servo mounted the other way round)."""

    offset: np.ndarray
    sign: np.ndarray

    @classmethod
    def identity(cls, n: int) -> "JointMap":
        return cls(np.zeros(n), np.ones(n))

    def to_joint(self, b: np.ndarray) -> np.ndarray:
        """A board reading (rad) as a joint angle."""
        return self.sign * (b - self.offset)

    def to_board(self, q: np.ndarray) -> np.ndarray:
        """A joint target as the board's command (rad)."""
        return q + self.offset

    def reading(self, q: np.ndarray) -> np.ndarray:
        """What the board reads with the joint at q: the inverse of `to_joint`."""
        return self.sign * q + self.offset

    def velocity_to_joint(self, v_board: np.ndarray) -> np.ndarray:
        """A board velocity reading (rad/s) in the joint frame."""
        return self.sign * v_board


@dataclass(frozen=True, slots=True)
class StateSample:
    """One measured state, in the joint frame (radians, rad/s); `t_host` is time.monotonic() at
    reception, `t_board_us` the board's sample instant."""

    t_host: float
    t_board_us: int
    seq: int
    echo_seq: int
    state: int
    faults: int
    q: np.ndarray
    qd: np.ndarray
    current_mA: np.ndarray
    jflags: np.ndarray
    supply_mV: int


@dataclass
class LinkStats:
    tx_frames: int = 0
    tx_commands: int = 0
    rx_states: int = 0
    rx_frames: int = 0
    seq_gaps: int = 0
    board_resets: int = 0
    retries: int = 0
    tx_dropped: int = 0  # frames not sent because the port's buffer was full (non-threaded mode)
    bad_states: int = 0  # STATEs that framed and passed the CRC but not validation (wrong joint count)
    logs: deque = field(default_factory=lambda: deque(maxlen=50))


def _is_url(port: str) -> bool:
    return "://" in port


def _holders(port: str) -> list[str]:
    """Processes holding `port` open (Linux /proc), as 'name (pid)'."""
    try:
        target = os.path.realpath(port)
    except OSError:
        return []
    out = []
    for fd in glob.glob("/proc/[0-9]*/fd/*"):
        try:
            if os.readlink(fd) == target:
                pid = fd.split("/")[2]
                if int(pid) == os.getpid():
                    continue
                with open(f"/proc/{pid}/comm") as f:
                    out.append(f"{f.read().strip()} ({pid})")
        except OSError:
            continue
    return sorted(set(out))


def open_serial(port: str, baud: int = 1_000_000, timeout_s: float = 0.005) -> serial.SerialBase:
    """Open a port (device path or pyserial URL) exclusively, with errors that say what to do."""
    try:
        if _is_url(port):
            ser = serial.serial_for_url(port, baudrate=baud, timeout=timeout_s)
        else:
            ser = serial.Serial(port, baudrate=baud, timeout=timeout_s, exclusive=True)
    except serial.SerialException as e:
        err = getattr(e, "errno", None)
        text = str(e)
        if err == errno.EACCES or "Permission denied" in text:
            raise DeviceError(errno.EACCES,
                              f"cannot open {port}: permission denied. Add yourself to the `dialout` group "
                              "(sudo usermod -aG dialout $USER, then log in again) or install the udev rule "
                              "from the README") from e
        if err == errno.ENOENT or "No such file" in text or "could not open port" in text and "[Errno 2]" in text:
            raise DeviceError(errno.ENOENT, f"cannot open {port}: no such port. Run `hil ports` to list serial "
                                            "ports, or `hil run --dry-run` to use the built-in emulator") from e
        if "exclusively lock" in text or err in (errno.EBUSY, errno.EAGAIN):
            who = _holders(port)
            held = f" (held by {', '.join(who)})" if who else ""
            raise DeviceError(errno.EBUSY, f"cannot open {port}: the port is busy{held}. Close the other "
                                           "program (or `hil` instance) using it") from e
        raise DeviceError(err or errno.EIO, f"cannot open {port}: {text}") from e
    return ser


class Link:
    """A connected board. Use `Link.connect(port)`; see the module docstring."""

    def __init__(self, port: str, baud: int = 1_000_000, link_timeout_s: float = 0.25,
                 heartbeat_s: float = 0.1, threaded: bool = True) -> None:
        self.port = port
        self.threaded = threaded
        self.baud = baud
        self.link_timeout_s = link_timeout_s
        self.heartbeat_s = heartbeat_s
        self.info: BoardInfo | None = None
        self.joint_map: JointMap | None = None
        self.stats = LinkStats()
        self.decoder = FrameDecoder()
        self.decode_stats = M.DecodeStats()
        self._ser: serial.SerialBase | None = None
        self._seq = random.randrange(0x10000)
        self._wlock = threading.Lock()
        self._latest: StateSample | None = None
        self._lost: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._waiters: dict[tuple, list] = {}
        self._wait_lock = threading.Lock()
        self._last_rx = 0.0
        self._last_cmd_tx = 0.0
        self._last_hb_tx = 0.0
        self._last_state_seq: int | None = None
        self._last_board_t = -1
        self._boot_id: int | None = None
        self._state_listeners: list = []
        self._fd: int | None = None
        self._tx_backlog = b""

    # ------------------------------------------------------------------ opening
    @classmethod
    def connect(cls, port: str, baud: int = 1_000_000, link_timeout_s: float = 0.25,
                handshake_timeout_s: float = 2.0, expect_kind: int | None = None,
                expect_joints: int | None = None, threaded: bool = True) -> "Link":
        """Open `port`, handshake, start the reader. Raises DeviceError / HandshakeError.

        threaded=False: no reader thread; the caller (the real-time loop) calls `poll()` every
        cycle, which reads what has arrived without blocking. That keeps decoding on the loop's
        own thread instead of competing with it for the GIL."""
        link = cls(port, baud, link_timeout_s, threaded=threaded)
        link.open(handshake_timeout_s, expect_kind, expect_joints)
        return link

    def open_port(self) -> bool | None:
        """Open the port alone (no handshake); whether it could be set to low-latency mode (None:
        the question does not apply)."""
        self._ser = open_serial(self.port, self.baud)
        low_latency = None
        if hasattr(self._ser, "set_low_latency_mode") and not _is_url(self.port):
            try:
                self._ser.set_low_latency_mode(True)  # FTDI: 1 ms latency timer instead of 16 ms
                low_latency = True
            except (ValueError, OSError, termios.error):
                low_latency = False  # cdc-acm and ptys have no latency timer
        return low_latency

    def handshake(self, timeout_s: float = 2.0, low_latency: bool | None = None) -> BoardInfo:
        """HELLO → HELLO_REPLY on an open port: what the board says it is (the link is not started)."""
        return self._handshake(timeout_s, low_latency)

    def open(self, handshake_timeout_s: float = 2.0, expect_kind: int | None = None,
             expect_joints: int | None = None) -> BoardInfo:
        low_latency = self.open_port()
        try:
            self._ser.reset_input_buffer()
            info = self._handshake(handshake_timeout_s, low_latency)
        except BaseException:
            self._close_port()
            raise
        if expect_kind is not None and info.kind != expect_kind:
            self._close_port()
            raise HandshakeError(errno.EPROTO, f"{self.port}: the board is a {info.kind_name} with {info.n_joints} "
                                               f"joints, but a {M.BoardKind(expect_kind).name} was asked for")
        if expect_joints is not None and info.n_joints != expect_joints:
            self._close_port()
            raise HandshakeError(errno.EPROTO, f"{self.port}: the board reports {info.n_joints} joints, the robot "
                                               f"model has {expect_joints}; wrong robot for this board?")
        self.info = info
        if self.joint_map is None or self.joint_map.offset.shape[0] != info.n_joints:
            self.joint_map = JointMap.identity(info.n_joints)
        self._boot_id = info.boot_id
        self._latest = None  # never hand out a sample from before this connection
        self._last_state_seq = None
        self._last_board_t = -1
        self._lost = None
        self._last_rx = time.monotonic()
        self._stop.clear()
        try:
            self._fd = None if _is_url(self.port) else self._ser.fileno()
        except (AttributeError, OSError, serial.SerialException):
            self._fd = None
        if self.threaded:
            self._thread = threading.Thread(target=self._reader, name=f"hil-link {self.port}", daemon=True)
            self._thread.start()
        return info

    def _next_seq(self) -> int:
        self._seq = (self._seq + 1) & 0xFFFF
        return self._seq

    def _handshake(self, timeout_s: float, low_latency) -> BoardInfo:
        ser = self._ser
        nonce = random.getrandbits(32)
        decoder = FrameDecoder()
        t0 = time.monotonic()
        next_hello = t0
        while True:
            now = time.monotonic()
            if now - t0 > timeout_s:
                raise HandshakeError(errno.ETIMEDOUT, f"{self.port}: no answer to HELLO within {timeout_s:.1f} s "
                                                      "(not a hil board, wrong baud rate, or the board is not running)")
            if now >= next_hello:
                self._write(M.Hello(PROTOCOL_MAJOR, PROTOCOL_MINOR, M.SCHEMA_HASH, nonce).encode(self._next_seq()))
                next_hello = now + 0.1
            try:
                data = ser.read(max(1, ser.in_waiting))
            except _IO_ERRORS as e:
                raise DeviceError(errno.EIO, f"{self.port}: I/O error during handshake: {e}") from e
            for frame in decoder.feed(data):
                msg = M.decode_message(frame)
                if isinstance(msg, M.HelloReply) and msg.nonce_echo == nonce:
                    if msg.major != PROTOCOL_MAJOR:
                        raise HandshakeError(errno.EPROTO, f"{self.port}: board speaks protocol {msg.major}.{msg.minor}, "
                                                           f"this host {PROTOCOL_MAJOR}.{PROTOCOL_MINOR}; update the "
                                                           "board firmware or hil so that the major versions match")
                    if msg.schema_hash != M.SCHEMA_HASH:
                        self.stats.logs.append(f"warning: message schema hash {msg.schema_hash:08x} differs from "
                                               f"the host's {M.SCHEMA_HASH:08x}")
                    usb = None
                    if not _is_url(self.port):
                        real = os.path.realpath(self.port)
                        for p in serial.tools.list_ports.comports():
                            if os.path.realpath(p.device) == real:
                                usb = p.serial_number
                    return BoardInfo(self.port, msg.board_kind, msg.n_joints, msg.firmware, msg.uid_hex, msg.boot_id,
                                     msg.schema_hash, msg.capabilities,
                                     f"{msg.major}.{min(msg.minor, PROTOCOL_MINOR)}", (time.monotonic() - t0) * 1e3,
                                     usb, low_latency)

    # ------------------------------------------------------------------ reading
    def _reader(self) -> None:
        ser = self._ser
        while not self._stop.is_set():
            try:
                data = ser.read(max(1, ser.in_waiting))
            except _IO_ERRORS as e:
                self._mark_lost(f"I/O error: {e}")
                return
            now = time.monotonic()
            if data:
                self._last_rx = now
                for frame in self.decoder.feed(data):
                    self.stats.rx_frames += 1
                    msg = M.decode_message(frame, self.decode_stats)
                    if msg is not None:
                        self._dispatch(msg, frame.seq, now)
            elif now - self._last_rx > self.link_timeout_s:
                self._mark_lost(f"no valid frame for {(now - self._last_rx) * 1e3:.0f} ms")
                return
            if now - self._last_cmd_tx > self.heartbeat_s and now - self._last_hb_tx > self.heartbeat_s:
                self._last_hb_tx = now
                try:
                    self._write(M.Heartbeat(0, 0, 0, 0).encode(self._next_seq()))
                except LinkLostError:
                    return

    def poll(self) -> StateSample | None:
        """Non-threaded mode: read whatever arrived (never blocks), dispatch it, return the newest
        state. Only the last STATE in the bytes read is decoded in full."""
        self._check()
        ser = self._ser
        try:
            if self._fd is not None and not self.threaded:
                data = b""
                if _select.select([self._fd], [], [], 0)[0]:
                    try:
                        data = os.read(self._fd, 65536)
                    except BlockingIOError:
                        data = b""
                    else:
                        if not data:  # readable but empty: the device went away (pyserial's rule too)
                            raise OSError(errno.EIO, "device reports readiness to read but returned no data "
                                                     "(disconnected)")
            else:
                data = ser.read(ser.in_waiting)
        except _IO_ERRORS as e:
            self._mark_lost(f"I/O error: {e}")
            self._check()
        now = time.monotonic()
        if data:
            self._last_rx = now
            last_state = None
            for frame in self.decoder.feed(data):
                self.stats.rx_frames += 1
                if frame.msg_id == M.State.MSG_ID:
                    if last_state is not None:
                        self._count_state_seq(last_state.seq)
                    last_state = frame
                    continue
                msg = M.decode_message(frame, self.decode_stats)
                if msg is not None:
                    self._dispatch(msg, frame.seq, now)
            if last_state is not None:
                msg = M.decode_message(last_state, self.decode_stats)
                if msg is not None:
                    self._dispatch(msg, last_state.seq, now)
        elif now - self._last_rx > self.link_timeout_s:
            self._mark_lost(f"no valid frame for {(now - self._last_rx) * 1e3:.0f} ms")
            self._check()
        return self._latest

    def _count_state_seq(self, seq: int) -> None:
        if self._last_state_seq is not None and seq != (self._last_state_seq + 1) & 0xFFFF:
            self.stats.seq_gaps += 1
        self._last_state_seq = seq
        self.stats.rx_states += 1

    def _dispatch(self, msg: M.Message, seq: int, now: float) -> None:
        if isinstance(msg, M.State):
            if self.info is not None and msg.joints.shape[0] != self.info.n_joints:
                # framed and CRC-valid, but not this board's: dropped and counted like a CRC error
                self.stats.bad_states += 1
                return
            jm = self.joint_map
            b = msg.joints["pos_urad"] * 1e-6
            sample = StateSample(now, msg.t_us, seq, msg.echo_seq, msg.state, msg.faults, jm.to_joint(b),
                                 jm.velocity_to_joint(msg.joints["vel_mrad_s"] * 1e-3),
                                 msg.joints["current_mA"].astype(float),
                                 msg.joints["jflags"].copy(), msg.supply_mV)
            self._count_state_seq(seq)
            if msg.t_us + 1_000_000 < self._last_board_t:
                self._board_reset("the board clock jumped back")
            self._last_board_t = msg.t_us
            self._latest = sample
            for fn in self._state_listeners:
                fn(sample)
        elif isinstance(msg, M.Heartbeat):
            if self._boot_id is not None and msg.boot_id != self._boot_id:
                self._board_reset(f"new boot id {msg.boot_id:08x}")
                self._boot_id = msg.boot_id
        elif isinstance(msg, M.Ack):
            self._resolve(("ack", msg.msg_id, msg.seq), msg)
        elif isinstance(msg, M.ParamValue):
            self._resolve(("param", msg.param_id, msg.joint), msg)
        elif isinstance(msg, M.TimeSyncResp):
            self._resolve(("time", msg.t1_host_us), (msg, time.monotonic()))
        elif isinstance(msg, M.Log):
            self.stats.logs.append(msg.text)

    def _board_reset(self, why: str) -> None:
        self.stats.board_resets += 1
        self.stats.logs.append(f"board reset detected ({why}); it is disabled until enabled again")

    def _resolve(self, key: tuple, value) -> None:
        with self._wait_lock:
            slot = self._waiters.get(key)
        if slot is not None:
            slot[1] = value
            slot[0].set()

    def _mark_lost(self, why: str) -> None:
        if self._lost is None:
            self._lost = why
        with self._wait_lock:
            for slot in self._waiters.values():
                slot[0].set()

    @property
    def lost(self) -> str | None:
        """Why the link was lost, or None while it works."""
        return self._lost

    def fileno(self) -> int | None:
        """The port's file descriptor for select() (None for a pyserial URL or a closed port)."""
        return self._fd

    @property
    def rejected_frames(self) -> int:
        """Incoming frames dropped: bad framing or CRC, unknown id, a payload that does not decode,
        or a STATE for another joint count. Counted, never raised."""
        d = self.decode_stats
        return self.decoder.stats.dropped + d.unknown_id + d.bad_payload + self.stats.bad_states

    def _check(self) -> None:
        if self._lost is not None:
            raise LinkLostError(errno.EIO, f"link to {self.port} lost: {self._lost}. Check the cable and power; "
                                           "hil reconnects by board id when it comes back")

    def latest(self) -> StateSample | None:
        """The newest state (joint frame), or None before the first; never blocks."""
        self._check()
        return self._latest

    def add_state_listener(self, fn) -> None:
        """Call fn(StateSample) from the reader thread for every STATE (keep it short)."""
        self._state_listeners.append(fn)

    # ------------------------------------------------------------------ writing
    def _write(self, data: bytes) -> None:
        ser = self._ser
        if ser is None:
            raise LinkLostError(errno.EIO, f"link to {self.port} is closed")
        try:
            with self._wlock:
                if self._fd is not None and not self.threaded:
                    # the loop must never block on the port: write what fits, keep the rest for the
                    # next call, and drop new frames while a backlog remains (counted)
                    if self._tx_backlog:
                        n = self._nb_write(self._tx_backlog)
                        self._tx_backlog = self._tx_backlog[n:]
                        if self._tx_backlog:
                            self.stats.tx_dropped += 1
                            return
                    n = self._nb_write(data)
                    if n < len(data):
                        self._tx_backlog = data[n:]
                elif self._fd is not None:
                    n = os.write(self._fd, data)  # pyserial's write adds a select() round per call
                    if n < len(data):
                        ser.write(data[n:])
                else:
                    ser.write(data)
        except _IO_ERRORS as e:
            self._mark_lost(f"write failed: {e}")
            raise LinkLostError(errno.EIO, f"link to {self.port} lost: write failed ({e})") from e
        self.stats.tx_frames += 1

    def _nb_write(self, data: bytes) -> int:
        try:
            return os.write(self._fd, data)
        except BlockingIOError:
            return 0

    def send_positions(self, q: np.ndarray, mask: int = 0xFFFFFFFF, hold: bool = False) -> int:
        """Send position targets (radians, joint frame) for all joints; returns the sequence number."""
        self._check()
        b = self.joint_map.to_board(np.asarray(q, dtype=np.float64))
        pos = np.clip(np.round(b * 1e6), -2**31, 2**31 - 1).astype("<i4")
        seq = self._next_seq()
        self._write(M.CmdPos(pos, mask, 1 if hold else 0).encode(seq))
        self._last_cmd_tx = time.monotonic()
        self.stats.tx_commands += 1
        return seq

    def round_trips_ms(self, count: int = 5, timeout_s: float = 0.25, quiet_s: float = 0.03) -> list[float]:
        """Round trips (ms) of `count` hold commands, each timed until the next STATE arrives (the
        board answers every command with one). Poll mode, before the control loop starts: a hold
        changes nothing on a board that is not enabled. STATEs still in flight are drained first,
        so that a slow adapter's backlog is not taken for answers: one more hold command, then
        wait for its answer and for `quiet_s` without any. That command also restarts the board's
        idle-rate STATE timer (10 Hz after 100 ms without commands), so no STATE is under way when
        the timing starts (behind a 16 ms adapter one would be taken for the first answer, and
        every trip after it timed against the previous command's). A command left unanswered
        within `timeout_s` counts as `timeout_s`."""
        n = self.info.n_joints if self.info is not None else 0
        hold = np.zeros(n)

        def newest_t() -> float:
            s = self.poll()
            return s.t_host if s is not None else -1.0

        start = time.monotonic()
        last_t = newest_t()
        self.send_positions(hold, hold=True)
        quiet_since = time.monotonic()
        answered = False
        while ((not answered or time.monotonic() - quiet_since < quiet_s)
               and time.monotonic() - start < 10 * quiet_s + 0.5):
            t = newest_t()
            if t > last_t:
                last_t, quiet_since, answered = t, time.monotonic(), True
            time.sleep(0.0005)
        trips = []
        for _ in range(count):
            t0 = time.monotonic()
            self.send_positions(hold, hold=True)
            while True:
                t = newest_t()
                if t > last_t:
                    last_t = t
                    trips.append((t - t0) * 1e3)
                    break
                if time.monotonic() - t0 > timeout_s:
                    trips.append(timeout_s * 1e3)
                    break
                time.sleep(0.0002)
        return trips

    def _transact(self, msg: M.Message, key_of, timeout_s: float = 0.05, tries: int = 3):
        self._check()
        seq = self._next_seq()
        key = key_of(seq)
        slot = [threading.Event(), None]
        with self._wait_lock:
            self._waiters[key] = slot
        try:
            for attempt in range(tries):
                self._write(msg.encode(seq, FLAG_RETX if attempt else 0))
                if slot[0].wait(timeout_s):
                    self._check()
                    return slot[1]
                self.stats.retries += 1
            raise ReplyTimeoutError(errno.ETIMEDOUT, f"{self.port}: no reply to {type(msg).__name__} after {tries} "
                                                     f"tries of {timeout_s * 1e3:.0f} ms")
        finally:
            with self._wait_lock:
                self._waiters.pop(key, None)

    def _command(self, msg: M.Message) -> None:
        ack = self._transact(msg, lambda seq: ("ack", msg.MSG_ID, seq))
        if ack.result != M.AckResult.OK:
            raise CommandRejectedError(errno.EPERM, f"{self.port}: board refused {type(msg).__name__}: "
                                                    f"{M.AckResult(ack.result).name}")

    def enable(self, joint_mask: int = 0xFFFFFFFF) -> None:
        """Torque on. The board first sets its targets to the measured pose, so nothing jumps."""
        self._command(M.Enable(joint_mask, 0))

    def disable(self, joint_mask: int = 0xFFFFFFFF) -> None:
        self._command(M.Disable(joint_mask))

    def clear_faults(self, fault_mask: int = 0xFFFFFFFF) -> None:
        """Clear latched faults (watchdog, e-stop); the board goes to DISABLED, never ENABLED."""
        self._command(M.ClearFault(fault_mask))

    def reboot(self) -> None:
        self._command(M.Reboot())

    def describe_faults(self) -> str:
        """Our boards say what is wrong in their LOG messages and fault bits: nothing more here."""
        return ""

    def estop(self, reason: int = 0) -> None:
        """E-stop: sent three times at once, no waiting (confirmed by STATE.state == ESTOP)."""
        frame = M.Estop(reason).encode(self._next_seq())
        for _ in range(3):
            self._write(frame)

    def param_get(self, param_id: int, joint: int = M.JOINT_BOARD) -> int | float:
        pv = self._transact(M.ParamGet(param_id, joint), lambda seq: ("param", param_id, joint))
        if pv.result != M.AckResult.OK:
            raise CommandRejectedError(errno.EPERM, f"{self.port}: PARAM_GET {param_id:#06x}: "
                                                    f"{M.AckResult(pv.result).name}")
        return pv.value

    def param_set(self, param_id: int, value: int | float, joint: int = M.JOINT_BOARD,
                  type: int = M.PARAM_TYPE_I32) -> int | float:
        pv = self._transact(M.ParamSet.of(param_id, joint, value, type), lambda seq: ("param", param_id, joint))
        if pv.result != M.AckResult.OK:
            raise CommandRejectedError(errno.EPERM, f"{self.port}: PARAM_SET {param_id:#06x} = {value}: "
                                                    f"{M.AckResult(pv.result).name}")
        return pv.value

    def param_save(self) -> None:
        """Write the board's parameters to its persistent storage (DISABLED only)."""
        self._command(M.ParamSave())

    def time_sync(self, exchanges: int = 8) -> tuple[float, float]:
        """(offset_s, rtt_s): board clock ≈ host monotonic + offset, from the lowest-RTT exchange."""
        best = None
        for _ in range(exchanges):
            t1 = int(time.monotonic() * 1e6)
            resp, t4 = self._transact(M.TimeSyncReq(t1), lambda seq, t1=t1: ("time", t1))
            t4_us = t4 * 1e6
            rtt = (t4_us - resp.t1_host_us) - (resp.t3_board_tx_us - resp.t2_board_rx_us)
            offset = ((resp.t2_board_rx_us - resp.t1_host_us) + (resp.t3_board_tx_us - t4_us)) / 2
            if best is None or rtt < best[1]:
                best = (offset, rtt)
        return best[0] / 1e6, best[1] / 1e6

    # ----------------------------------------------------------------- closing
    def _close_port(self) -> None:
        self._fd = None
        self._tx_backlog = b""
        ser, self._ser = self._ser, None
        if ser is not None:
            try:
                ser.close()
            except _IO_ERRORS:
                pass

    def close(self) -> None:
        """Stop the reader and close the port (does not disable the board; the watchdog will)."""
        self._stop.set()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(timeout=1.0)
        self._close_port()
        if self._lost is None:
            self._lost = "closed"

    def __enter__(self) -> "Link":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def reconnect(self, candidates: list[str] | None = None, timeout_s: float = 5.0) -> BoardInfo:
        """Find the same board again (same unique id) and reopen; the board stays disabled.

        Tries `candidates`, then the old port path, then USB ports with the board's USB serial
        number. Raises LinkLostError if it does not come back within `timeout_s`.
        """
        if self.info is None:
            raise LinkLostError(errno.EIO, f"{self.port}: never connected")
        old = self.info
        self.close()
        deadline = time.monotonic() + timeout_s
        tried: list[str] = []
        while time.monotonic() < deadline:
            ports = list(candidates or []) + [old.port]
            if old.usb_serial:
                ports += [p.device for p in serial.tools.list_ports.comports() if p.serial_number == old.usb_serial]
            for port in dict.fromkeys(ports):
                tried.append(port)
                self.port = port
                self.decoder = FrameDecoder()
                try:
                    info = self.open(handshake_timeout_s=0.5)
                except (DeviceError, OSError):
                    continue
                if info.uid != old.uid:
                    self.close()
                    continue
                if info.boot_id != old.boot_id:
                    self._board_reset("new boot id after reconnect")
                return info
            time.sleep(0.1)
        self.port = old.port
        raise LinkLostError(errno.ENODEV, f"board {old.uid} did not come back within {timeout_s:.1f} s "
                                          f"(tried {', '.join(dict.fromkeys(tried)) or 'nothing'})")


def list_ports() -> list[serial.tools.list_ports_common.ListPortInfo]:
    """Serial ports the OS lists (USB adapters, ACM devices, built-in UARTs; never ptys)."""
    return sorted(serial.tools.list_ports.comports(), key=lambda p: p.device)


def probe(port: str, baud: int = 1_000_000, timeout_s: float = 0.5) -> BoardInfo | None:
    """Handshake with whatever is on `port`: its BoardInfo, or None if nothing answers. A port that
    cannot be opened raises DeviceError (its message says why)."""
    link = Link(port, baud)
    try:
        link.open_port()
        return link.handshake(timeout_s)
    except HandshakeError:
        return None
    finally:
        link.close()
