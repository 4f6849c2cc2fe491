"""The board firmware model: state machine, watchdog, limits, servo dynamics. No I/O.

`Board.receive(frame, now)` handles one decoded frame and returns the frames to send back;
`Board.tick(now)` advances the servo model and the watchdog and returns unsolicited frames
(idle STATE, HEARTBEAT). Time `now` is in seconds (any monotonic clock). Everything a real board
would do is here, so the pty runner (`__main__`) only moves bytes.

Hidden truth for calibration: for the physical joint angle p the board drives `p = b_cmd − offset`
and reports `b = sign · p + offset` (a zero that is off — a servo horn one spline off, an encoder
index in the wrong place — and a reversed measurement — encoder channels swapped, a servo
mounted the other way round); only the command line that started the emulator knows them.
"""

from __future__ import annotations

import math
import os
import random
from dataclasses import dataclass, field

import numpy as np

from firmware_protocol import messages as M
from firmware_protocol.board_behaviour import Effect, BoardRequest, clamp_target, react, torque_on
from firmware_protocol.board_kinds import facts_of
from firmware_protocol.frame import FLAG_ACK_REQ, FLAG_RETX, PROTOCOL_MAJOR, PROTOCOL_MINOR, Frame
from firmware_protocol.plant import LagPlant, Plant

FW_VERSION = (1, 0, 0)
CAPABILITIES = M.Capability.STATE_RAW


@dataclass
class BoardSetup:
    """What a board is: kind, joints and their limits (board frame, radians), servo model."""

    kind: int = M.BoardKind.PUMA6
    n_joints: int = 6
    lower: np.ndarray | None = None          # rad, board frame
    upper: np.ndarray | None = None
    vmax: np.ndarray | None = None           # rad/s, servo rate limit
    initial: np.ndarray | None = None        # rad, physical pose at power-on
    tau_s: float = 0.03                      # first-order servo lag
    noise_rad: float = 2e-4                  # measurement noise (1 sigma)
    resolution_rad: float = 2 * math.pi / 4096   # quantisation of the measurement
    max_step_rad: float = 0.2                # largest accepted change of target per command
    offsets: np.ndarray | None = None        # hidden zero offsets (rad): b = sign p + offset
    signs: np.ndarray | None = None          # hidden direction signs (±1)
    uid: bytes = b""
    supply_mV: int = 12000
    cmd_timeout_ms: int = M.CMD_TIMEOUT_MS_DEFAULT
    idle_state_hz: float = float(M.BOARD_DEFAULTS[M.Param.IDLE_STATE_HZ])
    seed: int | None = None
    plant: Plant | None = None               # the joints: None, the kinematic servo model (LagPlant)

    def __post_init__(self) -> None:
        n = self.n_joints
        if not 1 <= n <= M.MAX_JOINTS:
            raise ValueError(f"n_joints must be 1..{M.MAX_JOINTS}, got {n}")

        def vec(v, default):
            a = np.full(n, default, dtype=float) if v is None else np.asarray(v, dtype=float).reshape(-1)
            if a.shape != (n,):
                raise ValueError(f"expected {n} values, got {a.shape[0]}")
            return a

        self.lower = vec(self.lower, -math.pi)
        self.upper = vec(self.upper, math.pi)
        self.vmax = vec(self.vmax, 3.0)
        self.initial = vec(self.initial, 0.0)
        self.offsets = vec(self.offsets, 0.0)
        self.signs = np.where(vec(self.signs, 1.0) < 0, -1.0, 1.0)
        if not self.uid:
            self.uid = os.urandom(12)
        if len(self.uid) != 12:
            raise ValueError("board uid must be 12 bytes")
        if self.plant is None:
            self.plant = LagPlant(self.initial, self.vmax, self.tau_s)
        elif self.plant.n != n:
            raise ValueError(f"the plant has {self.plant.n} joints, the board {n}")


_TRANSACTIONS = {M.Enable: BoardRequest.ENABLE, M.Disable: BoardRequest.DISABLE, M.ClearFault: BoardRequest.CLEAR_FAULT,
                 M.Reboot: BoardRequest.REBOOT, M.Home: BoardRequest.HOME, M.ParamSave: BoardRequest.PARAM_SAVE}


class StreamFrame(bytes):
    """Wire bytes of a streaming frame (STATE): may be dropped when the TX queue is full."""


@dataclass
class _Txn:
    seq: int
    replies: list


@dataclass
class Board:
    config: BoardSetup
    now: float = 0.0
    boot_id: int = 0
    state: int = M.BoardState.DISABLED
    faults: int = 0
    target_b: np.ndarray = field(init=False)    # targets in the board frame (rad)
    jflags: np.ndarray = field(init=False)
    echo_seq: int = 0
    seq: int = 0
    last_cmd: float = 0.0
    rx_now: float = 0.0
    last_idle_state: float = -1.0
    last_heartbeat: float = -1.0
    t_boot: float = 0.0
    raw_stream: bool = False
    cmd_rejected: int = 0
    undecodable: int = 0        # frames whose payload did not decode (or an unknown id)
    rx_refused: int = 0         # chunks the receiver refused: set by the runner, which decodes the frames
    applied: int = 0
    watchdog_trips: int = 0
    txn_cache: list = field(default_factory=list)

    def __post_init__(self) -> None:
        c = self.config
        self.rng = np.random.default_rng(c.seed)
        self.plant = c.plant
        self.holds_on_watchdog = facts_of(c.kind).watchdog_holds   # SPEC.md §7: PUMA6 brakes, servos hold
        self.jflags = np.zeros(c.n_joints, dtype=np.uint8)
        self.boot(self.now)

    @property
    def q(self) -> np.ndarray:
        """The physical joint angles (rad), from the plant."""
        return self.plant.q

    @property
    def qd(self) -> np.ndarray:
        return self.plant.qd

    # --------------------------------------------------------------- life cycle
    def boot(self, now: float) -> None:
        """Power-on or reset: disabled, faults cleared, a fresh random boot id, clock from zero."""
        self.boot_id = random.SystemRandom().getrandbits(32) or 1
        self.state = M.BoardState.DISABLED
        self.faults = 0
        self.t_boot = now
        self.now = now
        self.rx_now = now
        self.target_b = self.command_frame()
        self.plant.stop_here()
        self.txn_cache.clear()
        self.last_cmd = now
        self.cmd_timeout_ms = self.config.cmd_timeout_ms

    def t_us(self, now: float | None = None) -> int:
        return max(0, int(round(((self.now if now is None else now) - self.t_boot) * 1e6)))

    # -------------------------------------------------------------- frames map
    def to_physical(self, b: np.ndarray) -> np.ndarray:
        """Physical target for a commanded board-frame angle."""
        return b - self.config.offsets

    def command_frame(self) -> np.ndarray:
        """The board's internal servo position in the command frame (what ENABLE seeds from)."""
        return self.q + self.config.offsets

    def measured_b(self, noise: bool = True) -> np.ndarray:
        c = self.config
        p = self.q
        if noise and c.noise_rad > 0:
            p = p + self.rng.normal(0.0, c.noise_rad, p.shape)
        if c.resolution_rad > 0:
            p = np.round(p / c.resolution_rad) * c.resolution_rad
        return c.signs * p + c.offsets

    def _next_seq(self) -> int:
        self.seq = (self.seq + 1) & 0xFFFF
        return self.seq

    def state_frame(self) -> bytes:
        c = self.config
        j = np.zeros(c.n_joints, dtype=M.STATE_JOINT_DTYPE)
        j["pos_urad"] = np.clip(np.round(self.measured_b() * 1e6), -2**31, 2**31 - 1).astype(np.int32)
        j["vel_mrad_s"] = np.clip(np.round(c.signs * self.qd * 1e3), -32768, 32767).astype(np.int16)
        on = self.torque_on()
        j["current_mA"] = np.clip(np.round(self.plant.effort * 1000.0), -32768, 32767).astype(np.int16) if on \
            else 0
        j["temp_C"] = 35
        j["jflags"] = self.jflags | (M.JointFlag.TORQUE_ON if on else 0)
        msg = M.State(self.t_us(), self.echo_seq, int(self.state), int(self.faults), c.supply_mV, j,
                      M.imu_record(*imu) if (imu := self.plant.imu()) is not None and M.imu_fits(c.n_joints) else None)
        out = StreamFrame(msg.encode(self._next_seq()))
        if self.raw_stream:
            ticks = np.round(self.q / c.resolution_rad).astype(np.int32) if c.resolution_rad > 0 else \
                np.round(self.q * 1e6).astype(np.int32)
            out = StreamFrame(out + M.StateRaw(self.t_us(), ticks).encode(self._next_seq()))
        return out

    def heartbeat_frame(self) -> bytes:
        return M.Heartbeat(int(self.state), 0, self.boot_id, int(self.faults)).encode(self._next_seq())

    # ------------------------------------------------------------- messages
    def receive(self, frame: Frame, now: float) -> list[bytes]:
        """Handle one frame from the host (received at `now`); returns wire frames to send back.
        The servo model is not advanced here (that is `tick`), so STATE reports the last sample."""
        self.rx_now = now
        msg = M.decode_message(frame)
        if msg is None:
            self.undecodable += 1
            return []
        if frame.flags & FLAG_ACK_REQ:
            for txn in self.txn_cache:
                if txn.seq == frame.seq and frame.flags & FLAG_RETX:
                    return list(txn.replies)  # a retransmission: replay, do not execute twice
        replies = self._handle(msg, frame)
        if frame.flags & FLAG_ACK_REQ:
            self.txn_cache.append(_Txn(frame.seq, replies))
            del self.txn_cache[:-8]
        return replies

    def _ack(self, frame: Frame, result: int) -> bytes:
        return M.Ack(frame.msg_id, frame.seq, int(result)).encode(self._next_seq())

    def _handle(self, msg: M.Message, frame: Frame) -> list[bytes]:
        c = self.config
        if isinstance(msg, M.Hello):
            reply = M.HelloReply(PROTOCOL_MAJOR, PROTOCOL_MINOR, int(c.kind),
                                 c.n_joints, *FW_VERSION, 0, M.SCHEMA_HASH, self.boot_id, msg.nonce, CAPABILITIES,
                                 254, c.uid)
            return [reply.encode(self._next_seq())]
        if isinstance(msg, (M.CmdPos, M.CmdPvf)):
            pos = msg.pos_urad if isinstance(msg, M.CmdPos) else msg.joints["pos_urad"]
            if pos.shape[0] != c.n_joints:
                self.cmd_rejected += 1
                self.faults |= M.Fault.CMD_REJECTED
                return []
            if self._react(BoardRequest.COMMAND).effects & Effect.APPLY and not msg.flags & M.CmdFlag.HOLD:
                self._apply(pos.astype(np.float64) * 1e-6, msg.mask)
                self.echo_seq = frame.seq
                self.applied += 1
            return [self.state_frame()]
        if isinstance(msg, M.Heartbeat):
            return []
        if isinstance(msg, M.Estop):
            self._react(BoardRequest.ESTOP)
            return [self.state_frame()]
        request = _TRANSACTIONS.get(type(msg))
        if request is not None:
            return self._transaction(request, msg, frame)
        if isinstance(msg, M.TimeSyncReq):
            t2 = self.t_us(self.rx_now)
            return [M.TimeSyncResp(msg.t1_host_us, t2, self.t_us(self.rx_now)).encode(self._next_seq())]
        if isinstance(msg, M.ParamGet):
            joints = range(c.n_joints) if msg.joint == M.JOINT_ALL else [msg.joint]
            return [self._param_value(msg.param_id, j).encode(self._next_seq()) for j in joints]
        if isinstance(msg, M.ParamSet):
            return [self._param_set(msg).encode(self._next_seq())]
        return []

    def _transaction(self, request: BoardRequest, msg: M.Message, frame: Frame) -> list[bytes]:
        """ENABLE, DISABLE, CLEAR_FAULT, REBOOT, HOME, PARAM_SAVE: the answer from the one table."""
        magic = {BoardRequest.REBOOT: M.REBOOT_MAGIC, BoardRequest.PARAM_SAVE: M.SAVE_MAGIC}.get(request)
        if magic is not None and msg.magic != magic:
            return [self._ack(frame, M.AckResult.BAD_MAGIC)]
        if request == BoardRequest.HOME and not facts_of(self.config.kind).needs_homing:
            return [self._ack(frame, M.AckResult.UNSUPPORTED)]
        reaction = self._react(request, msg.fault_mask if request == BoardRequest.CLEAR_FAULT else 0)
        ack = self._ack(frame, reaction.result)
        if reaction.ok and request == BoardRequest.HOME:
            self.faults &= ~M.Fault.NOT_HOMED
        if reaction.effects & Effect.RESET:
            self.boot(self.rx_now)
        return [ack]

    def _react(self, request: BoardRequest, bits: int = 0):
        """Take the table's reaction: state, faults, and what it does to the servos."""
        r = react(request, self.state, self.faults, bits)
        self.state, self.faults = r.state, r.faults
        if r.effects & (Effect.SEED_TARGETS | Effect.HOLD_HERE):
            self.target_b = self.command_frame()   # from the servos' own position: no jump
        if r.effects & (Effect.TORQUE_OFF | Effect.HOLD_HERE):
            self.plant.stop_here()
        if r.effects & Effect.FEED_WATCHDOG:
            self.last_cmd = self.rx_now
        return r

    def _apply(self, target_b: np.ndarray, mask: int) -> None:
        c = self.config
        self.jflags[:] &= ~np.uint8(M.JointFlag.LIMIT | M.JointFlag.STEP)
        for j in range(c.n_joints):
            if mask >> j & 1:
                self.target_b[j], flags = clamp_target(float(target_b[j]), float(self.target_b[j]), c.lower[j],
                                                       c.upper[j], c.max_step_rad)
                self.jflags[j] |= flags

    def _param_value(self, pid: int, joint: int, result: int = 0) -> M.ParamValue:
        c = self.config
        P = M.Param
        jt = M.PARAM_TYPE_I32
        board_params = {**M.BOARD_DEFAULTS, P.CMD_TIMEOUT_MS: self.cmd_timeout_ms,
                        P.IDLE_STATE_HZ: int(c.idle_state_hz), P.RAW_STREAM: int(self.raw_stream),
                        P.RX_DROPPED: self.rx_refused + self.undecodable + self.cmd_rejected}
        if pid in board_params:
            return M.ParamValue(pid, joint, M.PARAM_TYPE_U32, board_params[pid], result)
        if not 0 <= joint < c.n_joints:
            return M.ParamValue(pid, joint, jt, 0, M.AckResult.OUT_OF_RANGE)
        joint_params = {P.TARGET: round(float(self.target_b[joint]) * 1e6),
                        P.POS_MIN: round(c.lower[joint] * 1e6), P.POS_MAX: round(c.upper[joint] * 1e6),
                        P.VEL_MAX: round(c.vmax[joint] * 1e3), P.MAX_STEP: round(c.max_step_rad * 1e6),
                        P.ZERO_OFFSET: 0, P.DIRECTION: 1}
        if pid not in joint_params:
            return M.ParamValue(pid, joint, jt, 0, M.AckResult.UNKNOWN_PARAM)
        return M.ParamValue(pid, joint, jt, M.value_to_bits(joint_params[pid], jt), result)

    def _param_set(self, msg: M.ParamSet) -> M.ParamValue:
        c = self.config
        P = M.Param
        value = M.bits_to_value(msg.value_bits, msg.type)
        if msg.param_id == P.CMD_TIMEOUT_MS:
            if not M.CMD_TIMEOUT_MS_MIN <= int(value) <= M.CMD_TIMEOUT_MS_MAX:
                return self._param_value(msg.param_id, msg.joint, M.AckResult.OUT_OF_RANGE)
            self.cmd_timeout_ms = int(value)
        elif msg.param_id == P.RAW_STREAM:
            self.raw_stream = bool(value)
        elif msg.param_id in (P.POS_MIN, P.POS_MAX, P.MAX_STEP, P.VEL_MAX):
            refused = react(BoardRequest.SET_LIMITS, self.state, self.faults).result
            if refused:
                return self._param_value(msg.param_id, msg.joint, refused)
            if not 0 <= msg.joint < c.n_joints:
                return self._param_value(msg.param_id, msg.joint, M.AckResult.OUT_OF_RANGE)
            j = msg.joint
            if msg.param_id == P.POS_MIN:
                c.lower[j] = value * 1e-6
            elif msg.param_id == P.POS_MAX:
                c.upper[j] = value * 1e-6
            elif msg.param_id == P.MAX_STEP:
                c.max_step_rad = value * 1e-6
            else:
                c.vmax[j] = value * 1e-3
        else:
            return self._param_value(msg.param_id, msg.joint, M.AckResult.READ_ONLY)
        return self._param_value(msg.param_id, msg.joint)

    # ----------------------------------------------------------------- time
    def torque_on(self) -> bool:
        """Whether the servos are driven now (ENABLED, or a humanoid holding after its watchdog)."""
        return torque_on(self.state, self.faults, self.holds_on_watchdog)

    def step(self, now: float) -> None:
        """Advance the joints to `now`: the plant follows the targets while the servos are on."""
        on = self.torque_on()
        self.plant.drive(self.to_physical(self.target_b), np.full(self.config.n_joints, on))
        self.plant.advance(now)

    def tick(self, now: float) -> list[bytes]:
        """Advance to `now`: servo model, watchdog, idle STATE and 1 Hz HEARTBEAT."""
        self.step(now)
        self.now = now
        out: list[bytes] = []
        if self.state == M.BoardState.ENABLED and (now - self.last_cmd) * 1000.0 > self.cmd_timeout_ms:
            # the host went quiet: latch the fault and hold where the joints are
            self._react(BoardRequest.WATCHDOG)
            self.watchdog_trips += 1
            out.append(self.state_frame())
        if now - self.last_cmd > 1.0 / max(self.config.idle_state_hz, 0.1) and \
                now - self.last_idle_state >= 1.0 / max(self.config.idle_state_hz, 0.1):
            self.last_idle_state = now
            out.append(self.state_frame())
        if now - self.last_heartbeat >= 1.0:
            self.last_heartbeat = now
            out.append(self.heartbeat_frame())
        return out
