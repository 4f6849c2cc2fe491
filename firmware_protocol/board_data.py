"""What a board is and what it reports, in the host's terms: the handshake's `BoardInfo`, one
measured `StateSample` (joint frame, SI units), the `JointMap` between the board's frame and the
joint frame, and the link's counters. Shared by our protocol's `Link` and the servo-bus boards."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np

from firmware_protocol import messages as M


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


@dataclass(frozen=True, slots=True)
class Imu:
    """A board's IMU reading (SI): orientation in the world as a unit quaternion w, x, y, z; angular
    rate (rad/s) and acceleration (m/s², gravity included) in the body frame."""

    quat: np.ndarray
    gyro: np.ndarray
    acc: np.ndarray

    @classmethod
    def from_wire(cls, record) -> "Imu":
        """From a STATE's IMU block (messages.IMU_DTYPE)."""
        return cls(record["quat"] / M.IMU_QUAT_SCALE, record["gyro_mrad_s"] * 1e-3, record["acc_mm_s2"] * 1e-3)

    def tilt(self) -> float:
        """How far the body's z axis leans from the world's vertical (rad)."""
        w, x, y, z = self.quat / max(float(np.linalg.norm(self.quat)), 1e-12)
        return float(np.arccos(np.clip(1.0 - 2.0 * (x * x + y * y), -1.0, 1.0)))


@dataclass(frozen=True, slots=True)
class StateSample:
    """One measured state, in the joint frame (radians, rad/s); `t_host` is time.monotonic() at
    reception, `t_board_us` the board's sample instant; `imu` from a board that has one."""

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
    imu: Imu | None = None


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
