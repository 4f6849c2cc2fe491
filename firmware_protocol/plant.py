"""What a board's emulator drives: the joints behind it. One interface, two implementations.

`Plant` is the interface every emulated board (our board model, each servo bus's emulator) drives
its joints through: targets and torque in, positions, velocities, torques (and, where there is
one, an IMU) out, advanced to the emulator's clock. The default, `LagPlant`, is the kinematic servo
of the board model (each joint follows its target with a first-order lag at no more than its
speed limit, and nothing else acts on it). `hil.physics.PhysicsPlant` puts MuJoCo behind the same
interface: gravity, contacts, a free base that can fall, servos that sag under load.

Angles are physical joint angles in radians (the robot's, before any hidden offset a board
emulator adds); torques in N·m; time in seconds of any monotonic clock.
"""

from __future__ import annotations

import numpy as np


class Plant:
    """The interface (see the module docstring); `n` joints."""

    n: int
    q: np.ndarray        # rad
    qd: np.ndarray       # rad/s
    effort: np.ndarray   # N·m each actuator gives (what a servo reports as its load or current)

    def drive(self, target: np.ndarray, torque: np.ndarray) -> None:
        """Targets (rad) and, per joint, whether its actuator is on (off: limp, or braked where the
        robot has brakes). Taken from the next `advance` on."""
        raise NotImplementedError

    def advance(self, now: float) -> None:
        """Move the joints on to time `now` (s)."""
        raise NotImplementedError

    def stop_here(self) -> None:
        """Forget any motion under way (an e-stop's brakes, a watchdog's hold): targets := where the
        joints are."""

    def imu(self) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """(orientation quaternion w, x, y, z in the world, angular rate rad/s and acceleration m/s²
        in the body), or None without an IMU."""
        return None


class LagPlant(Plant):
    """Each joint follows its target with a first-order lag `tau_s`, at most `vmax` rad/s, while its
    actuator is on; with it off the joint stays where it is."""

    def __init__(self, initial: np.ndarray, vmax: np.ndarray, tau_s: float) -> None:
        self.q = np.array(initial, dtype=np.float64)
        self.n = self.q.shape[0]
        self.qd = np.zeros(self.n)
        self.effort = np.zeros(self.n)
        self.vmax = np.asarray(vmax, dtype=np.float64)
        self.tau_s = tau_s
        self.target = self.q.copy()
        self.torque = np.zeros(self.n, dtype=bool)
        self.now: float | None = None

    def drive(self, target: np.ndarray, torque: np.ndarray) -> None:
        self.target = np.asarray(target, dtype=np.float64)
        self.torque = np.asarray(torque, dtype=bool)

    def stop_here(self) -> None:
        self.target = self.q.copy()
        self.qd[:] = 0.0

    def advance(self, now: float) -> None:
        dt = 0.0 if self.now is None else now - self.now
        self.now = now
        err = self.target - self.q
        # what a stiff servo's current would look like: proportional to the error it sees
        self.effort = np.where(self.torque, err * 2.0, 0.0)
        if dt <= 0 or not self.torque.any():
            self.qd[:] = 0.0
            return
        alpha = min(1.0, dt / self.tau_s) if self.tau_s > 0 else 1.0
        dq = np.clip(err * alpha, -self.vmax * dt, self.vmax * dt)
        dq[~self.torque] = 0.0
        self.q += dq
        self.qd = dq / dt


class ServoBridge:
    """A servo bus emulator's servos driven by a plant: each servo's goal and torque become its
    joint's target (radians through the servo's ticks per radian, zero tick and direction), and
    the plant's positions, speeds and torques become what the servo reports (ticks, ticks/s, mA).
    With a `mix` (firmware_protocol.servo_mix), servo k sits on a transmission: its angle mixes
    the plant's joints, and each joint's target is what its servos' goals together say."""

    def __init__(self, plant: Plant, servo_ids, ticks_per_rad, zero_ticks, directions, torque_per_amp_nm,
                 mix=None) -> None:
        self.plant = plant
        self.ids = list(servo_ids)
        self.tpr = np.asarray(ticks_per_rad, dtype=np.float64)
        self.zero = np.asarray(zero_ticks, dtype=np.float64)
        self.sign = np.asarray(directions, dtype=np.float64)
        self.kt = np.asarray(torque_per_amp_nm, dtype=np.float64)
        self.mix = mix
        self.target = plant.q.copy()
        self.torque = np.zeros(plant.n, dtype=bool)
        self.initial_ticks = self.zero + self.sign * self._servo(plant.q) * self.tpr

    def _servo(self, q: np.ndarray) -> np.ndarray:
        return q if self.mix is None else self.mix.servo_angles(q)

    def step(self, servos: dict, now: float) -> None:
        """Goals in, the plant on to `now`, readings out."""
        goal = self._servo(self.target)
        for k, sid in enumerate(self.ids):
            s = servos.get(sid)
            if s is None:
                continue
            self.torque[k] = s.torque and not s.hw_error
            if self.torque[k]:
                goal[k] = self.sign[k] * (s.goal_ticks() - self.zero[k]) / self.tpr[k]
        held = self.torque if self.mix is None else self.mix.driven_by(self.torque)
        self.target = goal if self.mix is None else self.mix.joint_angles(goal)
        self.plant.drive(self.target, held)
        self.plant.advance(now)
        q, qd, effort = self.plant.q, self.plant.qd, self.plant.effort
        if self.mix is not None:   # (a current stays its joint's: the servo table is the servos' as the joints feel them)
            q, qd = self.mix.servo_angles(q), self.mix.servo_rates(qd)
        for k, sid in enumerate(self.ids):
            s = servos.get(sid)
            if s is None:
                continue
            s.position = float(self.zero[k] + self.sign[k] * q[k] * self.tpr[k])
            s.velocity = float(self.sign[k] * qd[k] * self.tpr[k])
            s.current_mA = float(self.sign[k] * effort[k] / self.kt[k] * 1000.0) if self.torque[k] else 0.0
