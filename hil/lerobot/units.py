"""Joint angles ↔ the values LeRobot's robots report and take (what its datasets hold).

LeRobot turns each motor's present position (ticks) into a number by its calibration: body joints
−100 … 100 over the recorded range (or, with `use_degrees`, degrees from the middle of the range at
360/4095 a tick), the gripper 0 … 100 % over its range; on a bus where LeRobot mirrors a motor
itself (Feetech, drive_mode 1) the number runs the other way. Here a board config's joints give the
ticks (`ServoJoint`: zero tick, direction, ticks per radian) and its LeRobot calibration the range
(the one it was imported with, or the one `export_text` would write for it), so the numbers are
LeRobot's own for that arm.

    units = LeRobotUnits(config, degrees=False)
    units.names                    → ["shoulder_pan.pos", …]  (the dataset's feature names)
    units.values(q)                → (N, n) float32, from joint angles (rad)
    units.angles(values)           → (N, n) float64 rad, from LeRobot's numbers
"""

from __future__ import annotations

import numpy as np

from firmware_protocol.buses.bus_board import BusConfig
from hil.errors import InputError
from hil.lerobot.motor_calibration import GRIPPERS, MIRRORED_BY_HOST, RESOLUTION, exported

BODY, GRIPPER, DEGREES = "range_m100_100", "range_0_100", "degrees"   # LeRobot's MotorNormMode values


class LeRobotUnits:
    """One arm's joints in LeRobot's numbers (a config on a bus LeRobot drives)."""

    def __init__(self, config: BusConfig, degrees: bool = False) -> None:
        if config.bus not in MIRRORED_BY_HOST:
            raise InputError(f"{config.source}: a {config.bus} bus; LeRobot drives {' and '.join(MIRRORED_BY_HOST)}")
        self.config = config
        self.joint_names = [j.name for j in config.joints]
        self.names = [f"{n}.pos" for n in self.joint_names]
        self.modes = [GRIPPER if j.name in GRIPPERS else DEGREES if degrees else BODY for j in config.joints]
        cal = [exported(j, config.bus) for j in config.joints]
        self.lo = np.array([c["range_min"] for c in cal], dtype=np.float64)
        self.hi = np.array([c["range_max"] for c in cal], dtype=np.float64)
        self.flip = np.array([bool(c["drive_mode"]) and MIRRORED_BY_HOST[config.bus] for c in cal])
        self.zero = np.array([j.zero_tick for j in config.joints], dtype=np.float64)
        self.scale = np.array([j.direction * j.ticks_per_rad for j in config.joints], dtype=np.float64)
        self.is_body = np.array([m == BODY for m in self.modes])
        self.is_gripper = np.array([m == GRIPPER for m in self.modes])
        self.is_degrees = np.array([m == DEGREES for m in self.modes])

    def values(self, q) -> np.ndarray:
        """LeRobot's numbers for joint angles q (n,) or (N, n), radians: as its bus reads them from
        the ticks those angles put the servos at (clamped to the range, as it clamps)."""
        ticks = self.zero + self.scale * np.asarray(q, dtype=np.float64)
        share = (np.clip(ticks, self.lo, self.hi) - self.lo) / (self.hi - self.lo)
        body = np.where(self.flip, 100.0 - 200.0 * share, 200.0 * share - 100.0)
        grip = np.where(self.flip, 100.0 - 100.0 * share, 100.0 * share)
        deg = (ticks - (self.lo + self.hi) / 2) * 360.0 / (RESOLUTION - 1)
        out = np.where(self.is_body, body, np.where(self.is_gripper, grip, deg))
        return out.astype(np.float32)

    def angles(self, values) -> np.ndarray:
        """Joint angles (rad) for LeRobot's numbers (n,) or (N, n): the ticks its bus would write
        for them (a number past −100 … 100 or 0 … 100 clamped to it, as LeRobot clamps)."""
        v = np.asarray(values, dtype=np.float64)
        body = np.clip(np.where(self.flip, -v, v), -100.0, 100.0)
        grip = np.clip(np.where(self.flip, 100.0 - v, v), 0.0, 100.0)
        span = self.hi - self.lo
        ticks = np.where(self.is_body, (body + 100.0) / 200.0 * span + self.lo,
                         np.where(self.is_gripper, grip / 100.0 * span + self.lo,
                                  v * (RESOLUTION - 1) / 360.0 + (self.lo + self.hi) / 2))
        return (ticks - self.zero) / self.scale
