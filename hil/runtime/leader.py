"""A leader arm, read for teleoperation (`hil teleop`): in a process of its own, its servos with
their torque off, read as fast as its bus goes, each reading turned into joint angles by its board
config and published in a small shared block (`LeaderBlock`) that the loop's `Follow` motion
reads every cycle.

The block: [time (monotonic s), status, n joint angles (rad)]. Status STARTING until the first
whole reading, READING after, LOST when the leader can no longer be read (the port gone, every
servo silent): then why is in BLOCK.why and the process ends. A reader that finds the time older
than STALE_S takes the leader as lost too (a stalled or killed process writes nothing).
"""

from __future__ import annotations

import dataclasses
import os
import signal
import time

import numpy as np

from firmware_protocol.buses.bus_board import STALE, BusBoard
from firmware_protocol.protocol_errors import DeviceError
from hil.seqlock import SeqlockFile

STARTING, READING, LOST = 0.0, 1.0, 2.0
STALE_S = 0.5         # no new reading for this long: the leader is lost (its reader stalled or died)
SILENT_S = 0.3        # a servo silent this long: unplugged (its power, or the cable to it); a reply or
                      # two missed on a busy machine is not: its last reading stands meanwhile


def block_path(run_dir: str, pid: int) -> str:
    return os.path.join(run_dir, f"leader-{pid}.npy")


class LeaderBlock:
    """The leader's latest reading (see the module docstring)."""

    def __init__(self, path: str, n: int, create: bool = False, writer: bool = False) -> None:
        self.path, self.n = path, n
        self.file = SeqlockFile(path, 2 + n, create=create, writer=writer)
        self._row = np.zeros(2 + n)

    def write(self, status: float, q: np.ndarray | None = None) -> None:
        self._row[0] = time.monotonic()
        self._row[1] = status
        if q is not None:
            self._row[2:] = q
        self.file.write(self._row)

    def lost(self, why: str) -> None:
        tmp = self.path + ".why.tmp"
        with open(tmp, "w") as f:
            f.write(why)
        os.replace(tmp, self.path + ".why")
        self.write(LOST)

    def read(self) -> tuple[float, float, np.ndarray] | None:
        """(age in s, status, angles), or None before anything whole was written."""
        row = self.file.read()
        if row is None:
            return None
        return time.monotonic() - row[0], row[1], row[2:]

    def why(self) -> str:
        try:
            with open(self.path + ".why") as f:
                return f.read(500)
        except OSError:
            return "its reader stopped"

    def unlink(self) -> None:
        for p in (self.path, self.path + ".why"):
            try:
                os.unlink(p)
            except OSError:
                pass


def connect(port: str, config):
    """The leader's bus, its servos checked (ids, models) and their torque off."""
    # a leader's servos never drive: their own position limits do not matter, nor its watchdogs
    board = BusBoard.connect(port, dataclasses.replace(config, check_servo_limits=False))
    board.bus.torque_off_all()
    return board


def main(port: str, config, block: str) -> int:
    """Read the leader on `port` (its BusConfig `config`) into the block at `block` until told to
    stop (SIGTERM) or the leader is lost (exit 1, why in the block)."""
    stopping: list[int] = []
    signal.signal(signal.SIGTERM, lambda s, f: stopping.append(s))
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # the run's Ctrl-C is the loop's; the run ends us
    out = LeaderBlock(block, config.n, writer=True)
    try:
        return _read(port, config, out, stopping)
    except Exception as e:   # noqa: BLE001 - whatever it is, the follower must hear the leader is gone
        out.lost(f"the leader's reader failed ({type(e).__name__}: {e})")
        return 1


def _read(port: str, config, out: LeaderBlock, stopping: list) -> int:
    try:
        board = connect(port, config)
    except DeviceError as e:
        out.lost(f"the leader on {port} cannot be read: {e.strerror or e}")
        return 1
    silent_since = None
    try:
        while not stopping:
            try:
                s = board.read_now()
            except DeviceError as e:
                out.lost(f"the leader's port {port} is gone ({e.strerror or e})")
                return 1
            stale = (s.jflags.astype(np.int64) & int(STALE)) != 0
            if stale.any():   # a joint read no more is a leader that no longer says where the hand is
                silent_since = silent_since or time.monotonic()
                if time.monotonic() - silent_since > SILENT_S:
                    names = ", ".join(f"{j.name} (id {j.servo_id})" for j, st in zip(config.joints, stale) if st)
                    out.lost(f"the leader's {names} on {port} {'do' if stale.sum() > 1 else 'does'} not answer "
                             "(its power, or the cable to its servos)")
                    return 1
            else:
                silent_since = None
            out.write(READING, s.q)
    finally:
        board.close()
    return 0


