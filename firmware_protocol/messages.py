"""The message set (SPEC.md §4): one class per message, pure encode/decode, wire units.

Payloads are little-endian and packed. Positions are i32 µrad, velocities i16 mrad/s, currents
i16 mA, temperatures i8 °C, supply u16 mV, times u64 µs of the board clock. Payloads only grow by
appending fields: a decoder ignores trailing bytes it does not know and drops payloads shorter
than the known layout (counted, never raised, by `decode_message`).
"""

from __future__ import annotations

import dataclasses
import struct
import zlib
from dataclasses import dataclass, field
from enum import IntEnum, IntFlag
from typing import ClassVar

import numpy as np

from firmware_protocol.protocol_errors import ProtocolError
from firmware_protocol.frame import FLAG_ACK_REQ, MAX_BODY, MIN_BODY, Frame, encode_frame


class BoardKind(IntEnum):
    HUMANOID17 = 1
    PUMA6 = 2
    SERVOS = 3      # any robot's position servos, 1 … MAX_JOINTS in the robot's joint order (SPEC.md §9)


class Capability(IntFlag):
    """HELLO_REPLY's capabilities word."""
    STATE_RAW = 1 << 0            # the board streams STATE_RAW when RAW_STREAM is set
    POSITION_ESTIMATED = 1 << 1   # positions are the commanded output, not measured (SPEC.md §6)


class CmdFlag(IntFlag):
    """CMD_POS's and CMD_PVF's flags byte."""
    HOLD = 1 << 0   # keep every target: the command feeds the watchdog and applies nothing


class WatchdogAction(IntEnum):
    """Param.WATCHDOG_ACTION: what a board does when its command watchdog latches."""
    TORQUE_OFF = 0
    HOLD = 1
    BRAKE = 2


class BoardState(IntEnum):
    BOOT = 0
    DISABLED = 1
    ENABLED = 2
    FAULT = 3
    ESTOP = 4
    HOMING = 5


class Fault(IntFlag):
    """Board fault bits (STATE.faults, HEARTBEAT.faults). Latched ones need CLEAR_FAULT."""

    ESTOP = 1 << 0
    WATCHDOG = 1 << 1
    LINK_LOST = 1 << 2
    UNDERVOLT = 1 << 3
    OVERTEMP = 1 << 4
    SERVO_BUS = 1 << 5
    ENCODER = 1 << 6
    NOT_HOMED = 1 << 7
    CMD_REJECTED = 1 << 8
    BROWNOUT_SEEN = 1 << 9
    RX_OVERRUN = 1 << 10
    PARAMS_DEFAULTED = 1 << 11
    AMP_FAULT = 1 << 12


# what to do about each fault, where a user reads it (the twin's tooltip, hil ctl)
FAULT_FIX = {
    Fault.ESTOP: "an e-stop (button, Ctrl-C, a client, the e-stop input): find why, then clear the fault and enable",
    Fault.WATCHDOG: "no command for the board's timeout (the host stalled or the link broke): clear the fault, enable",
    Fault.LINK_LOST: "the board heard nothing from the host: check the cable; hil reconnects by board id",
    Fault.UNDERVOLT: "the supply sagged below the servos' minimum: check the power supply and its wiring",
    Fault.OVERTEMP: "a servo or driver is too hot: let it cool, lighten its load, then clear the fault",
    Fault.SERVO_BUS: "a servo stopped answering or reported an error: check its cable and power (the run names it)",
    Fault.ENCODER: "an encoder or limit switch reported an error: check its wiring before clearing",
    Fault.NOT_HOMED: "incremental encoders: put the arm in its home pose and home it (hil ctl home)",
    Fault.CMD_REJECTED: "the board refused commands (a wrong joint count or a bad frame): check the robot model",
    Fault.BROWNOUT_SEEN: "the board reset on a brown-out since it was powered: check the supply",
    Fault.RX_OVERRUN: "the board lost received bytes: lower the loop rate, or the adapter's latency",
    Fault.PARAMS_DEFAULTED: "no saved parameters: the board runs on its defaults (hil ctl param-save keeps yours)",
    Fault.AMP_FAULT: "a motor amplifier reported a fault: check the amplifier and the motor, then clear",
}


def fault_names(faults: int) -> str:
    """The set fault bits by name ("watchdog, cmd rejected"), "none" for 0; unknown bits in hex."""
    names = [f.name.lower().replace("_", " ") for f in Fault if faults & f]
    rest = faults & ~sum(Fault)
    if rest:
        names.append(f"bits {rest:#x}")
    return ", ".join(names) or "none"


def fault_fixes(faults: int) -> str:
    """One line per set fault bit: its name and what to do."""
    return "\n".join(f"{f.name.lower().replace('_', ' ')}: {FAULT_FIX[f]}" for f in Fault if faults & f)


class JointFlag(IntFlag):
    """Per-joint flags in STATE."""

    STALE = 1 << 0
    OVERTEMP = 1 << 1
    OVERLOAD = 1 << 2
    LIMIT = 1 << 3   # the last target was clamped to the board's position limits
    ENCODER = 1 << 4
    VOLTAGE = 1 << 5
    TORQUE_ON = 1 << 6
    STEP = 1 << 7    # the last target was clamped by the board's maximum step


class AckResult(IntEnum):
    OK = 0
    BAD_STATE = 1
    OUT_OF_RANGE = 2
    UNKNOWN_PARAM = 3
    READ_ONLY = 4
    BUSY = 5
    UNSUPPORTED = 6
    BAD_MAGIC = 7


class Param(IntEnum):
    """Parameter ids (PARAM_GET/SET). Joint scope unless noted."""

    ZERO_OFFSET = 0x0001     # i32 µrad
    POS_MIN = 0x0002         # i32 µrad
    POS_MAX = 0x0003         # i32 µrad
    VEL_MAX = 0x0004         # i32 mrad/s
    CURRENT_MAX = 0x0005     # i32 mA
    MAX_STEP = 0x0006        # i32 µrad per command
    DIRECTION = 0x0007       # i32 ±1
    TICKS_PER_REV = 0x0008   # f32
    KP = 0x0010              # f32
    KI = 0x0011              # f32
    KD = 0x0012              # f32
    SERVO_ID = 0x0020        # u32
    TARGET = 0x0030          # i32 µrad, read-only: the joint's current target (command frame)
    CMD_TIMEOUT_MS = 0x0100  # u32, board, 10..1000, default 50
    WATCHDOG_ACTION = 0x0101  # u32, board: 0 TORQUE_OFF, 1 HOLD, 2 BRAKE
    RELAX_AFTER_MS = 0x0102  # u32, board, 0 = never
    IDLE_STATE_HZ = 0x0103   # u32, board, default 10
    LINK_TIMEOUT_MS = 0x0104  # u32, board, default 250
    RAW_STREAM = 0x0105      # u32, board, 0/1
    RX_DROPPED = 0x0106      # u32, board, read-only: received input dropped (framing, CRC, payload, wrong joint count)


PARAM_TYPE_I32, PARAM_TYPE_U32, PARAM_TYPE_F32 = 0, 1, 2
CMD_TIMEOUT_MS_MIN, CMD_TIMEOUT_MS_MAX, CMD_TIMEOUT_MS_DEFAULT = 10, 1000, 50   # Param.CMD_TIMEOUT_MS
# a board's own settings as it boots (and the host's link timeout, which is the board's: SPEC.md §7)
BOARD_DEFAULTS = {Param.CMD_TIMEOUT_MS: CMD_TIMEOUT_MS_DEFAULT, Param.WATCHDOG_ACTION: int(WatchdogAction.HOLD),
                  Param.RELAX_AFTER_MS: 0, Param.IDLE_STATE_HZ: 10, Param.LINK_TIMEOUT_MS: 250}
LINK_TIMEOUT_S = BOARD_DEFAULTS[Param.LINK_TIMEOUT_MS] / 1e3   # either side's, without a valid frame
JOINT_BOARD = 0xFF     # PARAM joint index meaning "the board itself"
JOINT_ALL = 0xFE       # PARAM_GET joint index meaning "every joint, one PARAM_VALUE each"
REBOOT_MAGIC = 0x52424F54
SAVE_MAGIC = 0x53415645
MAX_JOINTS = 22        # a STATE with more joints would exceed the 254-byte body


_FIELDS: dict[type, tuple[str, ...]] = {}


def _field_names(cls: type) -> tuple[str, ...]:
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return names


class Message:
    """Base: subclasses define MSG_ID, FMT (fixed part) and ACK (whether it is a transaction)."""

    MSG_ID: ClassVar[int]
    FMT: ClassVar[struct.Struct]
    ACK: ClassVar[bool] = False

    def payload(self) -> bytes:
        return self.FMT.pack(*(getattr(self, f) for f in _field_names(type(self))))

    @classmethod
    def decode(cls, payload: bytes) -> "Message":
        if len(payload) < cls.FMT.size:
            raise ProtocolError(f"{cls.__name__}: payload of {len(payload)} bytes, need {cls.FMT.size}")
        return cls(*cls.FMT.unpack_from(payload, 0))  # type: ignore[call-arg]

    def encode(self, seq: int, flags: int = 0) -> bytes:
        """Wire bytes (delimiters, COBS, CRC) with this sequence number."""
        if self.ACK:
            flags |= FLAG_ACK_REQ
        return encode_frame(self.MSG_ID, seq, self.payload(), flags)


@dataclass(frozen=True, slots=True)
class Hello(Message):
    MSG_ID: ClassVar[int] = 0x01
    FMT: ClassVar[struct.Struct] = struct.Struct("<BBII")
    major: int
    minor: int
    schema_hash: int
    nonce: int


@dataclass(frozen=True, slots=True)
class HelloReply(Message):
    MSG_ID: ClassVar[int] = 0x02
    FMT: ClassVar[struct.Struct] = struct.Struct("<BBBBBBHIIIIIB12s")
    major: int
    minor: int
    board_kind: int
    n_joints: int
    fw_major: int
    fw_minor: int
    fw_patch: int
    fw_git: int
    schema_hash: int
    boot_id: int
    nonce_echo: int
    capabilities: int
    max_body: int
    board_uid: bytes

    @property
    def uid_hex(self) -> str:
        return self.board_uid.hex().upper()

    @property
    def firmware(self) -> str:
        return f"{self.fw_major}.{self.fw_minor}.{self.fw_patch}"


@dataclass(frozen=True, slots=True)
class Heartbeat(Message):
    MSG_ID: ClassVar[int] = 0x03
    FMT: ClassVar[struct.Struct] = struct.Struct("<BBII")
    state: int
    reserved: int
    boot_id: int
    faults: int


@dataclass(frozen=True, slots=True)
class Ack(Message):
    MSG_ID: ClassVar[int] = 0x04
    FMT: ClassVar[struct.Struct] = struct.Struct("<BHB")
    msg_id: int
    seq: int
    result: int


@dataclass(frozen=True, slots=True)
class TimeSyncReq(Message):
    MSG_ID: ClassVar[int] = 0x05
    FMT: ClassVar[struct.Struct] = struct.Struct("<Q")
    t1_host_us: int


@dataclass(frozen=True, slots=True)
class TimeSyncResp(Message):
    MSG_ID: ClassVar[int] = 0x06
    FMT: ClassVar[struct.Struct] = struct.Struct("<QQQ")
    t1_host_us: int
    t2_board_rx_us: int
    t3_board_tx_us: int


@dataclass(frozen=True, slots=True)
class Log(Message):
    MSG_ID: ClassVar[int] = 0x07
    FMT: ClassVar[struct.Struct] = struct.Struct("<B")
    level: int
    text: str = ""

    def payload(self) -> bytes:
        raw = self.text.encode("utf-8", "replace")[:245]
        return self.FMT.pack(self.level) + raw

    @classmethod
    def decode(cls, payload: bytes) -> "Log":
        if len(payload) < 1:
            raise ProtocolError("LOG: empty payload")
        return cls(payload[0], bytes(payload[1:]).decode("utf-8", "replace"))


@dataclass(frozen=True, slots=True)
class Enable(Message):
    MSG_ID: ClassVar[int] = 0x10
    FMT: ClassVar[struct.Struct] = struct.Struct("<IB")
    ACK: ClassVar[bool] = True
    joint_mask: int
    mode: int = 0


@dataclass(frozen=True, slots=True)
class Disable(Message):
    MSG_ID: ClassVar[int] = 0x11
    FMT: ClassVar[struct.Struct] = struct.Struct("<I")
    ACK: ClassVar[bool] = True
    joint_mask: int


@dataclass(frozen=True, slots=True)
class Estop(Message):
    MSG_ID: ClassVar[int] = 0x12
    FMT: ClassVar[struct.Struct] = struct.Struct("<B")
    reason: int = 0


@dataclass(frozen=True, slots=True)
class ClearFault(Message):
    MSG_ID: ClassVar[int] = 0x13
    FMT: ClassVar[struct.Struct] = struct.Struct("<I")
    ACK: ClassVar[bool] = True
    fault_mask: int


@dataclass(frozen=True, slots=True)
class Home(Message):
    MSG_ID: ClassVar[int] = 0x14
    FMT: ClassVar[struct.Struct] = struct.Struct("<IB")
    ACK: ClassVar[bool] = True
    joint_mask: int
    method: int = 0


@dataclass(frozen=True, slots=True)
class Reboot(Message):
    MSG_ID: ClassVar[int] = 0x15
    FMT: ClassVar[struct.Struct] = struct.Struct("<I")
    ACK: ClassVar[bool] = True
    magic: int = REBOOT_MAGIC


_CMD_HEAD = struct.Struct("<BBI")


@dataclass(frozen=True, slots=True, eq=False)
class CmdPos(Message):
    """Position targets for all joints, µrad (i32). `mask` bit j: apply joint j. flags bit 0: HOLD."""

    MSG_ID: ClassVar[int] = 0x20
    FMT: ClassVar[struct.Struct] = _CMD_HEAD
    PER_JOINT: ClassVar[int] = 4     # bytes per joint after FMT; the joint count is byte N_AT
    N_AT: ClassVar[int] = 0
    pos_urad: np.ndarray
    mask: int = 0xFFFFFFFF
    flags: int = 0

    def payload(self) -> bytes:
        pos = np.asarray(self.pos_urad, dtype="<i4")
        return _CMD_HEAD.pack(pos.shape[0], self.flags, self.mask) + pos.tobytes()

    @classmethod
    def decode(cls, payload: bytes) -> "CmdPos":
        if len(payload) < _CMD_HEAD.size:
            raise ProtocolError("CMD_POS: payload too short")
        n, flags, mask = _CMD_HEAD.unpack_from(payload, 0)
        if n > MAX_JOINTS or len(payload) < _CMD_HEAD.size + 4 * n:
            raise ProtocolError(f"CMD_POS: {n} joints do not fit {len(payload)} bytes")
        pos = np.frombuffer(payload, dtype="<i4", count=n, offset=_CMD_HEAD.size).astype(np.int32)
        return cls(pos, mask, flags)


PVF_DTYPE = np.dtype([("pos_urad", "<i4"), ("vel_mrad_s", "<i2"), ("ff_mA", "<i2")])


@dataclass(frozen=True, slots=True, eq=False)
class CmdPvf(Message):
    """Position, velocity and feed-forward current targets (PUMA6 and servos that support it)."""

    MSG_ID: ClassVar[int] = 0x21
    FMT: ClassVar[struct.Struct] = _CMD_HEAD
    PER_JOINT: ClassVar[int] = PVF_DTYPE.itemsize
    N_AT: ClassVar[int] = 0
    joints: np.ndarray  # PVF_DTYPE records
    mask: int = 0xFFFFFFFF
    flags: int = 0

    def payload(self) -> bytes:
        j = np.asarray(self.joints, dtype=PVF_DTYPE)
        return _CMD_HEAD.pack(j.shape[0], self.flags, self.mask) + j.tobytes()

    @classmethod
    def decode(cls, payload: bytes) -> "CmdPvf":
        if len(payload) < _CMD_HEAD.size:
            raise ProtocolError("CMD_PVF: payload too short")
        n, flags, mask = _CMD_HEAD.unpack_from(payload, 0)
        if n > MAX_JOINTS or len(payload) < _CMD_HEAD.size + PVF_DTYPE.itemsize * n:
            raise ProtocolError(f"CMD_PVF: {n} joints do not fit {len(payload)} bytes")
        return cls(np.frombuffer(payload, dtype=PVF_DTYPE, count=n, offset=_CMD_HEAD.size).copy(), mask, flags)


STATE_JOINT_DTYPE = np.dtype([("pos_urad", "<i4"), ("vel_mrad_s", "<i2"), ("current_mA", "<i2"),
                              ("temp_C", "i1"), ("jflags", "u1")])
_STATE_HEAD = struct.Struct("<QHBBIH")
# appended to STATE after the joints by a board with an IMU (SPEC.md §4.3): orientation in the
# world as a unit quaternion w, x, y, z (× 2¹⁴), angular rate (mrad/s) and acceleration (mm/s²)
# in the body frame; flags bit 0: valid
IMU_DTYPE = np.dtype([("flags", "u1"), ("quat", "<i2", (4,)), ("gyro_mrad_s", "<i2", (3,)), ("acc_mm_s2", "<i2", (3,))])
IMU_QUAT_SCALE = 16384.0
MAX_PAYLOAD = MAX_BODY - MIN_BODY   # a body less its header and CRC


def imu_fits(n_joints: int) -> bool:
    """Whether a STATE of this many joints has room for the IMU block (up to 20 joints)."""
    return _STATE_HEAD.size + STATE_JOINT_DTYPE.itemsize * n_joints + IMU_DTYPE.itemsize <= MAX_PAYLOAD


def imu_record(quat, gyro_rad_s, acc_m_s2) -> np.ndarray:
    """The IMU block of a STATE from SI values (clipped to what the fields hold)."""
    r = np.zeros((), dtype=IMU_DTYPE)
    r["flags"] = 1
    r["quat"] = np.clip(np.round(np.asarray(quat, float) * IMU_QUAT_SCALE), -32768, 32767)
    r["gyro_mrad_s"] = np.clip(np.round(np.asarray(gyro_rad_s, float) * 1e3), -32768, 32767)
    r["acc_mm_s2"] = np.clip(np.round(np.asarray(acc_m_s2, float) * 1e3), -32768, 32767)
    return r


@dataclass(frozen=True, slots=True, eq=False)
class State(Message):
    """Measured state of all joints, sampled at `t_us` (board clock). `echo_seq` is the sequence
    number of the last command the board applied."""

    MSG_ID: ClassVar[int] = 0x30
    FMT: ClassVar[struct.Struct] = _STATE_HEAD
    PER_JOINT: ClassVar[int] = STATE_JOINT_DTYPE.itemsize
    N_AT: ClassVar[int] = 11
    t_us: int
    echo_seq: int
    state: int
    faults: int
    supply_mV: int
    joints: np.ndarray  # STATE_JOINT_DTYPE records
    imu: np.ndarray | None = None   # an IMU_DTYPE record, from a board with an IMU

    def payload(self) -> bytes:
        j = np.asarray(self.joints, dtype=STATE_JOINT_DTYPE)
        out = _STATE_HEAD.pack(self.t_us, self.echo_seq, self.state, j.shape[0], self.faults,
                               self.supply_mV) + j.tobytes()
        if self.imu is not None and imu_fits(j.shape[0]):
            out += np.asarray(self.imu, dtype=IMU_DTYPE).tobytes()
        return out

    @classmethod
    def decode(cls, payload: bytes) -> "State":
        if len(payload) < _STATE_HEAD.size:
            raise ProtocolError("STATE: payload too short")
        t_us, echo, state, n, faults, supply = _STATE_HEAD.unpack_from(payload, 0)
        end = _STATE_HEAD.size + STATE_JOINT_DTYPE.itemsize * n
        if n > MAX_JOINTS or len(payload) < end:
            raise ProtocolError(f"STATE: {n} joints do not fit {len(payload)} bytes")
        joints = np.frombuffer(payload, dtype=STATE_JOINT_DTYPE, count=n, offset=_STATE_HEAD.size)
        imu = None
        if len(payload) >= end + IMU_DTYPE.itemsize and payload[end] & 1:
            imu = np.frombuffer(payload, dtype=IMU_DTYPE, count=1, offset=end)[0]
        return cls(t_us, echo, state, faults, supply, joints, imu)

    @property
    def n(self) -> int:
        return int(self.joints.shape[0])


_RAW_HEAD = struct.Struct("<QBB")


@dataclass(frozen=True, slots=True, eq=False)
class StateRaw(Message):
    """Raw encoder or servo ticks of all joints (for calibration), when param RAW_STREAM = 1."""

    MSG_ID: ClassVar[int] = 0x31
    FMT: ClassVar[struct.Struct] = _RAW_HEAD
    PER_JOINT: ClassVar[int] = 4
    N_AT: ClassVar[int] = 8
    t_us: int
    raw_ticks: np.ndarray

    def payload(self) -> bytes:
        raw = np.asarray(self.raw_ticks, dtype="<i4")
        return _RAW_HEAD.pack(self.t_us, raw.shape[0], 0) + raw.tobytes()

    @classmethod
    def decode(cls, payload: bytes) -> "StateRaw":
        if len(payload) < _RAW_HEAD.size:
            raise ProtocolError("STATE_RAW: payload too short")
        t_us, n, _ = _RAW_HEAD.unpack_from(payload, 0)
        if n > MAX_JOINTS or len(payload) < _RAW_HEAD.size + 4 * n:
            raise ProtocolError(f"STATE_RAW: {n} joints do not fit {len(payload)} bytes")
        return cls(t_us, np.frombuffer(payload, dtype="<i4", count=n, offset=_RAW_HEAD.size).astype(np.int32))


@dataclass(frozen=True, slots=True)
class ParamGet(Message):
    MSG_ID: ClassVar[int] = 0x40
    FMT: ClassVar[struct.Struct] = struct.Struct("<HB")
    param_id: int
    joint: int = JOINT_BOARD


@dataclass(frozen=True, slots=True)
class ParamSet(Message):
    MSG_ID: ClassVar[int] = 0x41
    FMT: ClassVar[struct.Struct] = struct.Struct("<HBBI")
    ACK: ClassVar[bool] = True
    param_id: int
    joint: int
    type: int
    value_bits: int

    @classmethod
    def of(cls, param_id: int, joint: int, value: int | float, type: int = PARAM_TYPE_I32) -> "ParamSet":
        return cls(param_id, joint, type, value_to_bits(value, type))


@dataclass(frozen=True, slots=True)
class ParamValue(Message):
    MSG_ID: ClassVar[int] = 0x42
    FMT: ClassVar[struct.Struct] = struct.Struct("<HBBIB")
    param_id: int
    joint: int
    type: int
    value_bits: int
    result: int = 0

    @property
    def value(self) -> int | float:
        return bits_to_value(self.value_bits, self.type)


@dataclass(frozen=True, slots=True)
class ParamSave(Message):
    MSG_ID: ClassVar[int] = 0x43
    FMT: ClassVar[struct.Struct] = struct.Struct("<I")
    ACK: ClassVar[bool] = True
    magic: int = SAVE_MAGIC


def value_to_bits(value: int | float, type: int) -> int:
    if type == PARAM_TYPE_F32:
        return struct.unpack("<I", struct.pack("<f", float(value)))[0]
    if type == PARAM_TYPE_I32:
        return struct.unpack("<I", struct.pack("<i", int(value)))[0]
    return int(value) & 0xFFFFFFFF


def bits_to_value(bits: int, type: int) -> int | float:
    raw = struct.pack("<I", bits & 0xFFFFFFFF)
    if type == PARAM_TYPE_F32:
        return struct.unpack("<f", raw)[0]
    if type == PARAM_TYPE_I32:
        return struct.unpack("<i", raw)[0]
    return bits & 0xFFFFFFFF


MESSAGES: dict[int, type[Message]] = {
    cls.MSG_ID: cls for cls in (Hello, HelloReply, Heartbeat, Ack, TimeSyncReq, TimeSyncResp, Log, Enable, Disable,
                                Estop, ClearFault, Home, Reboot, CmdPos, CmdPvf, State, StateRaw, ParamGet, ParamSet,
                                ParamValue, ParamSave)}


def _schema_text() -> str:
    lines = []
    for mid, cls in sorted(MESSAGES.items()):
        lines.append(f"{mid:02x} {cls.__name__} {cls.FMT.format} ack={int(cls.ACK)}")
    lines.append(f"state_joint {STATE_JOINT_DTYPE.descr}")
    lines.append(f"state_imu {IMU_DTYPE.descr}")
    lines.append(f"pvf {PVF_DTYPE.descr}")
    return "\n".join(lines)


SCHEMA_HASH = zlib.crc32(_schema_text().encode())
"""CRC-32 of the canonical message definitions; exchanged in HELLO so that mismatched message
layouts give a clear error at connect instead of silently misread frames."""


@dataclass
class DecodeStats:
    """Frames that framed correctly but whose payload did not decode (counted, never raised)."""

    unknown_id: int = 0
    bad_payload: int = 0
    by_type: dict[str, int] = field(default_factory=dict)


def decode_message(frame: Frame, stats: DecodeStats | None = None) -> Message | None:
    """The message in a frame, or None (unknown id or malformed payload, counted in stats)."""
    cls = MESSAGES.get(frame.msg_id)
    if cls is None:
        if stats is not None:
            stats.unknown_id += 1
        return None
    try:
        return cls.decode(frame.payload)
    except (ProtocolError, ValueError, struct.error):
        if stats is not None:
            stats.bad_payload += 1
        return None
