"""What a humanoid's IMU tells the loop: whether it fell, how far it leaned, how far it went, and a
balance stabiliser that leans it back.

`BalanceWatch` follows the board's IMU: the largest tilt of the body from upright, the moment it
passed `FALL_TILT_DEG` (a fall: the run goes toward safety and ends with exit code 1), and the
body's travel by leg odometry (the sole the motion stands on stays put; where the body is follows
from the measured joints, as the twin and the planner compute it).

`Stabiliser` is an ankle strategy: the body's measured attitude against the one the motion plans
(both soles flat, the plan's joint angles), and its measured rate, turned into a small change of
the ankle joints of the feet on the ground that rotates the body back (a PD law through the soles'
Jacobians: with a foot held by the ground, turning its ankle turns the body the other way). Soft
servos turn that command into a push of the sole on the ground, which moves the centre of
pressure toward the side the body falls to. The correction is bounded (`MAX_CORRECTION_DEG`) and
only acts while a motion or a hold runs with both feet's support known.
"""

from __future__ import annotations

import math

import numpy as np

from hil.kinematics.floating import FALL_TILT_DEG, FloatingBase, tilt_of
from hil.kinematics.rotations import quaternion_matrix
from hil.motion import contacts
from hil.motion.contacts import AIR, FLAT
from hil.robots.model import SOLE_FRAMES

KP = 0.6             # rad of ankle per rad of body tilt error
KD = 0.04            # rad of ankle per rad/s of body rate
MAX_CORRECTION_DEG = 6.0
FEET = SOLE_FRAMES


def _level(R: np.ndarray) -> np.ndarray:
    """The rotation with its heading kept and its lean removed (yaw only)."""
    yaw = math.atan2(R[1, 0], R[0, 0])
    c, s = math.cos(yaw), math.sin(yaw)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


class BalanceWatch:
    """Tilt, fall and travel of a humanoid from its IMU and joints (see the module docstring)."""

    def __init__(self, model) -> None:
        self.model = model
        self.seen = False
        self.max_tilt = 0.0
        self.tilt = 0.0
        self.fell_at: float | None = None
        self._base: FloatingBase | None = None
        self._support = -1
        self._start: np.ndarray | None = None
        self._q_last: np.ndarray | None = None
        if model.floating:   # the kernels it uses loaded now, not in the real-time cycle of the first IMU reading
            model.load_kernels()
            FloatingBase(model, "l_sole", model.home)

    def update(self, t: float, imu, q_meas: np.ndarray, support: int) -> bool:
        """One STATE's IMU and joints at loop time t, and the motion's support code (3: none said).
        True the first time the body tilts past FALL_TILT_DEG."""
        self.seen = True
        R = quaternion_matrix(imu.quat)
        self.tilt = tilt_of(R)
        self.max_tilt = max(self.max_tilt, self.tilt)
        if self.model.floating:
            self._odometry(q_meas, support)
        if self.fell_at is None and self.tilt > math.radians(FALL_TILT_DEG):
            self.fell_at = t
            return True
        return False

    def _odometry(self, q: np.ndarray, support: int) -> None:
        if self._base is None:
            self._base = FloatingBase(self.model, "l_sole", q)
            self._start = self._base.body_pose(q)[:2, 3].copy()
        self._q_last = q
        if support == self._support or support == contacts.UNKNOWN or not contacts.is_valid([support])[0]:
            return
        self._support = support
        left, right = contacts.decode(support)
        want = "l_sole" if left == FLAT and right != FLAT else "r_sole" if right == FLAT and left != FLAT else None
        if want is not None and want != self._base.support:
            self._base.switch(want, q)

    def travel(self) -> list[float]:
        """The body's travel (x, y) in metres since the first STATE, by leg odometry."""
        if self._base is None or self._q_last is None:
            return [0.0, 0.0]
        return [float(v) for v in self._base.body_pose(self._q_last)[:2, 3] - self._start]

    def report(self) -> dict:
        return {"imu": True, "fell": self.fell_at is not None, "fell_at_s": self.fell_at,
                "max_tilt_deg": round(math.degrees(self.max_tilt), 2), "base_travel_m": self.travel()}


class Stabiliser:
    """The ankle strategy (see the module docstring): `correction(q_plan, imu, support)` → Δq."""

    def __init__(self, model) -> None:
        self.model = model
        names = model.joint_names
        self.ankles = {f: [i for i, n in enumerate(names) if n.startswith(f[0] + "_") and "ankle" in n] for f in FEET}
        self.usable = all(len(v) == 2 for v in self.ankles.values()) and model.floating
        self.limit = math.radians(MAX_CORRECTION_DEG)
        self.last = np.zeros(model.n)

    def correction(self, q_plan: np.ndarray, imu, support: int) -> np.ndarray:
        """The ankle change (n,) rad that leans the body back toward the plan's attitude (a few tens
        of µs: it runs every cycle of a humanoid's motion)."""
        out = self.last
        out[:] = 0.0
        if not self.usable or support not in _DOWN:
            return out
        down = _DOWN[support]
        if not down:
            return out
        R_meas = quaternion_matrix(imu.quat)
        # the attitude the plan means: its stance sole flat on the ground, the body on it
        T_sole = self.model.fk_frame(q_plan, down[0])
        R_plan = _level(R_meas @ T_sole[:3, :3]) @ T_sole[:3, :3].T
        e = _rotation_vector(R_plan.T @ R_meas)       # the measured body's rotation from the plan's, body frame
        g = imu.gyro
        # how far to turn the body back (its own frame); heading is not balance
        dx = KP * e[0] + KD * float(g[0])
        dy = KP * e[1] + KD * float(g[1])
        lim = self.limit
        for foot in down:
            i, j = self.ankles[foot]
            J = self.model.jacobian(q_plan, foot)
            # the sole held by the ground, turning the ankles by dq turns the body by −J dq: J dq = demand,
            # least squares over the sole's roll and pitch rates (J's angular rows, ankle columns)
            a0, a1, b0, b1 = J[3, i], J[3, j], J[4, i], J[4, j]
            det = a0 * b1 - a1 * b0
            if abs(det) < 1e-9:
                continue
            out[i] = min(lim, max(-lim, (b1 * dx - a1 * dy) / det))
            out[j] = min(lim, max(-lim, (a0 * dy - b0 * dx) / det))
        return out


def _rotation_vector(R: np.ndarray) -> tuple[float, float, float]:
    angle = math.acos(max(-1.0, min(1.0, (R[0, 0] + R[1, 1] + R[2, 2] - 1.0) / 2.0)))
    k = 0.5 if angle < 1e-9 else angle / (2.0 * math.sin(angle))
    return k * (R[2, 1] - R[1, 2]), k * (R[0, 2] - R[2, 0]), k * (R[1, 0] - R[0, 1])


# support code → the soles on the ground (hil.motion.contacts)
_DOWN = {c: [f for f, kind in zip(FEET, contacts.decode(c)) if kind != AIR] for c in contacts.VALID_CODES}
