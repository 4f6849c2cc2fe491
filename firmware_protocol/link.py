"""The host side of the serial link: open, handshake, stream commands, read the newest state.

    link = Link.connect("/dev/ttyACM0")          # returns with the board's first STATE (latest())
    link.clear_faults()                          # a latched e-stop or watchdog from an earlier run
    link.enable()                                # board seeds its targets from the measured pose
    link.send_positions(q_rad)                   # one CMD_POS for all joints, never waits; then one
                                                 # at least every 50 ms (the board's command watchdog)
    sample = link.latest()                       # newest STATE; never blocks
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
import logging
import random
import threading
import time

import numpy as np
import serial.tools.list_ports

from firmware_protocol import link_timing
from firmware_protocol import messages as M
from firmware_protocol.board_data import BoardInfo, Imu, LinkStats, StateSample
from firmware_protocol.joint_map import JointMap
from firmware_protocol.protocol_errors import CommandRejectedError, DeviceError, HandshakeError, LinkLostError, ReplyTimeoutError
from firmware_protocol.frame import FLAG_RETX, FrameDecoder
from firmware_protocol.handshake import hello
from firmware_protocol.replies import AwaitedReplies
from firmware_protocol.serial_port import PORT_ERRORS, PortIO, list_ports, open_serial

__all__ = ["BoardInfo", "JointMap", "Link", "LinkStats", "StateSample", "list_ports", "open_serial", "probe"]
log = logging.getLogger("firmware_protocol.link")


class Link:
    """A connected board. Use `Link.connect(port)`; see the module docstring."""

    def __init__(self, port: str, baud: int = 1_000_000, link_timeout_s: float = M.LINK_TIMEOUT_S,
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
        self._io: PortIO | None = None
        self._seq = random.randrange(0x10000)
        self._latest: StateSample | None = None
        self._lost: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._replies = AwaitedReplies()
        self.kept_params: dict[int, tuple[int, int]] = {}   # set again after a reconnect: keep_param
        self._last_rx = 0.0
        self._last_cmd_tx = 0.0
        self._last_hb_tx = 0.0
        self._last_state_seq: int | None = None
        self._last_board_t = -1
        self._boot_id: int | None = None

    # ------------------------------------------------------------------ opening
    @classmethod
    def connect(cls, port: str, baud: int = 1_000_000, link_timeout_s: float = M.LINK_TIMEOUT_S,
                handshake_timeout_s: float = 2.0, expect_kind: int | None = None,
                expect_joints: int | None = None, threaded: bool = True) -> "Link":
        """Open `port`, handshake, start the reader. Raises DeviceError / HandshakeError.

        threaded=False: no reader thread; the caller (the real-time loop) calls `poll()` every
        cycle, which reads what has arrived without blocking. That keeps decoding on the loop's
        own thread instead of competing with it for the GIL."""
        link = cls(port, baud, link_timeout_s, threaded=threaded)
        link.open(handshake_timeout_s, expect_kind, expect_joints)
        if threaded:
            try:
                link.wait_state()
            except BaseException:
                link.close()
                raise
            first = link.latest()
            if first.state in (M.BoardState.ESTOP, M.BoardState.FAULT):
                log.warning("%s: the board is in %s (faults: %s), latched before this connection: clear_faults() "
                            "before enable()", port, M.BoardState(first.state).name, M.fault_names(first.faults))
        return link

    def wait_state(self, timeout_s: float = 1.0) -> StateSample:
        """A STATE received after this call (a hold command asks for one: every command frame gets a
        STATE back, and a hold moves nothing); DeviceError naming the port if none comes."""
        since = time.monotonic()
        deadline = since + timeout_s
        while time.monotonic() < deadline:
            self.send_positions(np.zeros(self.info.n_joints), hold=True)
            s = self.poll() if not self.threaded else self._latest
            t_end = min(deadline, time.monotonic() + 0.02)
            while (s is None or s.t_host < since) and time.monotonic() < t_end:
                time.sleep(0.002)
                s = self.poll() if not self.threaded else self._latest
            if s is not None and s.t_host >= since:
                return s
        self._check()
        raise ReplyTimeoutError(errno.ETIMEDOUT, f"{self.port}: no STATE from the board within {timeout_s:g} s "
                                                 "of a command (it answered HELLO): a firmware that is not hil's?")

    def open_port(self) -> bool | None:
        """Open the port alone (no handshake); whether it could be set to low-latency mode (None:
        the question does not apply)."""
        self._io = PortIO(self.port, self.baud, self.threaded)
        return self._io.set_low_latency()

    def handshake(self, timeout_s: float = 2.0, low_latency: bool | None = None) -> BoardInfo:
        """HELLO → HELLO_REPLY on an open port: what the board says it is (the link is not started)."""
        return hello(self._io, self._next_seq, timeout_s, low_latency, self.stats.logs)

    def open(self, handshake_timeout_s: float = 2.0, expect_kind: int | None = None,
             expect_joints: int | None = None) -> BoardInfo:
        low_latency = self.open_port()
        try:
            self._io.discard_input()
            info = self.handshake(handshake_timeout_s, low_latency)
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
        if self.threaded:
            self._thread = threading.Thread(target=self._reader, name=f"hil-link {self.port}", daemon=True)
            self._thread.start()
        return info

    def _next_seq(self) -> int:
        self._seq = (self._seq + 1) & 0xFFFF
        return self._seq

    # ------------------------------------------------------------------ reading
    def _reader(self) -> None:
        """Threaded mode: every chunk as it arrives (the port blocks in select), plus the heartbeat."""
        io = self._io
        while not self._stop.is_set():
            try:
                data = io.read_some()
            except PORT_ERRORS as e:
                self._mark_lost(f"I/O error: {e}")
                return
            now = time.monotonic()
            if not self._take(data, now):
                return
            if now - self._last_cmd_tx > self.heartbeat_s and now - self._last_hb_tx > self.heartbeat_s:
                self._last_hb_tx = now
                try:
                    self._write(M.Heartbeat(0, 0, 0, 0).encode(self._next_seq()))
                except LinkLostError:
                    return

    def poll(self) -> StateSample | None:
        """Non-threaded mode: read whatever arrived (never blocks), dispatch it, return the newest state."""
        self._check()
        try:
            data = self._io.read_now()
        except PORT_ERRORS as e:
            self._mark_lost(f"I/O error: {e}")
            self._check()
        self._take(data, time.monotonic())
        self._check()
        return self._latest

    def _take(self, data: bytes, now: float) -> bool:
        """Bytes read at `now`, both modes' one way in: every frame dispatched except STATEs, of
        which only the newest is decoded in full (the others counted); False once the link is lost
        to silence (nothing valid for the link timeout)."""
        if not data:
            if now - self._last_rx > self.link_timeout_s:
                self._mark_lost(f"no valid frame for {(now - self._last_rx) * 1e3:.0f} ms")
                return False
            return True
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
        return True

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
                                 msg.joints["jflags"].copy(), msg.supply_mV,
                                 None if msg.imu is None else Imu.from_wire(msg.imu))
            self._count_state_seq(seq)
            if msg.t_us + 1_000_000 < self._last_board_t:
                self._board_reset("the board clock jumped back")
            self._last_board_t = msg.t_us
            self._latest = sample
        elif isinstance(msg, M.Heartbeat):
            if self._boot_id is not None and msg.boot_id != self._boot_id:
                self._board_reset(f"new boot id {msg.boot_id:08x}")
                self._boot_id = msg.boot_id
        elif isinstance(msg, M.Ack):
            self._replies.deliver(("ack", msg.msg_id, msg.seq), msg)
        elif isinstance(msg, M.ParamValue):
            self._replies.deliver(("param", msg.param_id, msg.joint), msg)
        elif isinstance(msg, M.TimeSyncResp):
            self._replies.deliver(("time", msg.t1_host_us), (msg, time.monotonic()))
        elif isinstance(msg, M.Log):
            self.stats.logs.append(msg.text)

    def _board_reset(self, why: str) -> None:
        self.stats.board_resets += 1
        self.stats.logs.append(f"board reset detected ({why}); it is disabled until enabled again")

    def _mark_lost(self, why: str) -> None:
        if self._lost is None:
            self._lost = why
        self._replies.wake_all()

    @property
    def lost(self) -> str | None:
        """Why the link was lost, or None while it works."""
        return self._lost

    def fileno(self) -> int | None:
        """The port's file descriptor for select() (None for a pyserial URL or a closed port)."""
        return self._io.fd if self._io is not None else None

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

    # ------------------------------------------------------------------ writing
    def _write(self, data: bytes) -> None:
        io = self._io
        if io is None:
            raise LinkLostError(errno.EIO, f"link to {self.port} is closed")
        try:
            sent = io.write(data)
        except PORT_ERRORS as e:
            self._mark_lost(f"write failed: {e}")
            raise LinkLostError(errno.EIO, f"link to {self.port} lost: write failed ({e})") from e
        if sent:
            self.stats.tx_frames += 1
        else:
            self.stats.tx_dropped += 1

    def send_positions(self, q: np.ndarray, mask: int = 0xFFFFFFFF, hold: bool = False) -> int:
        """Send position targets (radians, joint frame) for all joints; returns the sequence number."""
        self._check()
        b = self.joint_map.to_board(np.asarray(q, dtype=np.float64))
        pos = np.clip(np.round(b * 1e6), -2**31, 2**31 - 1).astype("<i4")
        seq = self._next_seq()
        self._write(M.CmdPos(pos, mask, M.CmdFlag.HOLD if hold else 0).encode(seq))
        self._last_cmd_tx = time.monotonic()
        self.stats.tx_commands += 1
        return seq

    def round_trips_ms(self, count: int = 5, timeout_s: float = 0.25, quiet_s: float = 0.03) -> list[float]:
        """Round trips (ms) of `count` hold commands (see `link_timing.round_trips_ms`)."""
        return link_timing.round_trips_ms(self, count, timeout_s, quiet_s)

    def transact(self, msg: M.Message, key_of, timeout_s: float = 0.05, tries: int = 3, pump: bool = False):
        """Send msg and wait for the reply `key_of(seq)` names, retransmitting (FLAG_RETX) up to
        `tries` times; ReplyTimeoutError if none comes. pump=True: this thread reads the port while
        it waits (a non-threaded link nobody else polls yet, or polls no longer)."""
        self._check()
        seq = self._next_seq()
        key = key_of(seq)
        reply = self._replies.expect(key)
        try:
            for attempt in range(tries):
                self._write(msg.encode(seq, FLAG_RETX if attempt else 0))
                if self._await(reply, timeout_s, pump):
                    self._check()
                    return reply.value
                self.stats.retries += 1
            raise ReplyTimeoutError(errno.ETIMEDOUT, f"{self.port}: no reply to {type(msg).__name__} after {tries} "
                                                     f"tries of {timeout_s * 1e3:.0f} ms")
        finally:
            self._replies.forget(key)

    def _await(self, reply, timeout_s: float, pump: bool) -> bool:
        if not pump or self.threaded:
            return reply.wait(timeout_s)
        deadline = time.monotonic() + timeout_s
        while not reply.wait(0.0):
            if time.monotonic() >= deadline:
                return False
            self.poll()
            time.sleep(0.0005)
        return True

    def _command(self, msg: M.Message) -> None:
        ack = self.transact(msg, lambda seq: ("ack", msg.MSG_ID, seq))
        if ack.result != M.AckResult.OK:
            s = self._latest
            hint = ""
            if s is not None and s.state in (M.BoardState.ESTOP, M.BoardState.FAULT):
                hint = (f" (the board is in {M.BoardState(s.state).name}, faults: {M.fault_names(s.faults)}: "
                        "clear_faults() first)")
            raise CommandRejectedError(errno.EPERM, f"{self.port}: board refused {type(msg).__name__}: "
                                                    f"{M.AckResult(ack.result).name}{hint}")

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
        pv = self.transact(M.ParamGet(param_id, joint), lambda seq: ("param", param_id, joint))
        if pv.result != M.AckResult.OK:
            raise CommandRejectedError(errno.EPERM, f"{self.port}: PARAM_GET {param_id:#06x}: "
                                                    f"{M.AckResult(pv.result).name}")
        return pv.value

    def param_set(self, param_id: int, value: int | float, joint: int = M.JOINT_BOARD,
                  type: int = M.PARAM_TYPE_I32) -> int | float:
        pv = self.transact(M.ParamSet.of(param_id, joint, value, type), lambda seq: ("param", param_id, joint))
        if pv.result != M.AckResult.OK:
            raise CommandRejectedError(errno.EPERM, f"{self.port}: PARAM_SET {param_id:#06x} = {value}: "
                                                    f"{M.AckResult(pv.result).name}")
        return pv.value

    def keep_param(self, param_id: int, value: int, type: int = M.PARAM_TYPE_U32) -> int | float:
        """Set a board parameter now and again after every reconnect (a board that rebooted is back
        on its defaults). Call it while nothing else reads this link (before it is handed on)."""
        self.kept_params[param_id] = (value, type)
        return self._set_kept(param_id)

    def _set_kept(self, param_id: int) -> int | float:
        value, type = self.kept_params[param_id]
        pv = self.transact(M.ParamSet.of(param_id, M.JOINT_BOARD, value, type),
                           lambda seq: ("param", param_id, M.JOINT_BOARD), pump=True)
        if pv.result != M.AckResult.OK:
            raise CommandRejectedError(errno.EPERM, f"{self.port}: the board refused {M.Param(param_id).name} = "
                                                    f"{value}: {M.AckResult(pv.result).name}")
        return pv.value

    def param_save(self) -> None:
        """Write the board's parameters to its persistent storage (DISABLED only)."""
        self._command(M.ParamSave())

    def time_sync(self, exchanges: int = 8) -> tuple[float, float]:
        """(offset_s, rtt_s): board clock ≈ host monotonic + offset (see `link_timing.time_sync`)."""
        return link_timing.time_sync(self, exchanges)

    # ----------------------------------------------------------------- closing
    def _close_port(self) -> None:
        io, self._io = self._io, None
        if io is not None:
            io.close()

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
                for param_id in self.kept_params:
                    self._set_kept(param_id)
                return info
            time.sleep(0.1)
        self.port = old.port
        raise LinkLostError(errno.ENODEV, f"board {old.uid} did not come back within {timeout_s:.1f} s "
                                          f"(tried {', '.join(dict.fromkeys(tried)) or 'nothing'})")


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
