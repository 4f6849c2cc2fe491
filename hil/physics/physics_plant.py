"""MuJoCo behind a board's emulator: the `firmware_protocol.plant.Plant` of a physics dry-run.

The emulator's clock drives it: `advance(now)` steps the simulation (0.5 ms steps) up to `now`.
A robot with a free base is powered up on a stand, as a humanoid is: its base held where it stands
at home, feet on the floor, until every joint's servo has been on for `STAND_RELEASE_S`; from then on
it stands on its own feet (disabled or e-stopped later, it falls, as a real one does).
A process that was not scheduled for a while catches up at most `MAX_CATCH_UP_S`; beyond that the
world waits with it (slower than real time, never a burst of hundreds of steps).

Servos: a position servo per joint (`hil.physics.build`) whose stiffness is switched off with its
torque (a humanoid's joints go limp: it can fall), or, on a robot with brakes (the PUMA's), held
where it is. Each joint's torque–speed line, where its servo has one, limits the torque at its
speed every step. The IMU is the base body's: orientation, angular rate and acceleration.
"""

from __future__ import annotations

import numpy as np

from firmware_protocol.plant import Plant
from hil.kinematics.floating import FALL_TILT_DEG, tilt_of
from hil.physics.build import PhysicsModel, _mujoco
from hil.physics.world import WORLD_HZ, World, WorldBlock, centre_of_pressure

MAX_CATCH_UP_S = 0.05
STAND_RELEASE_S = 0.5


class PhysicsPlant(Plant):
    """A robot in MuJoCo (see the module docstring); `brakes`: joints hold when torque goes off. It
    owns `pm.model`: the servos' gains and force ranges in it change as torque goes on and off and
    with speed, so each plant is given a model of its own (`hil.physics.build.build`, or a copy)."""

    def __init__(self, pm: PhysicsModel, initial: np.ndarray | None = None, brakes: bool = False) -> None:
        mujoco = _mujoco()
        self.mj = mujoco
        self.pm = pm
        self.m = pm.model
        self.d = mujoco.MjData(self.m)
        self.d.qpos[:] = pm.home_qpos
        if initial is not None:
            pm.set_joints(self.d.qpos, initial)
        self.n = len(pm.qpos_of_joint)
        self.brakes = brakes
        self.act = pm.ctrl_of_joint   # each hil joint's actuator (a file's own may come in another order)
        self.mix = pm.ctrl_mix   # … or its transmission's input's, told its own angle
        self.kp = self.m.actuator_gainprm[self.act, 0].copy()
        self.limit = self.m.actuator_forcerange[self.act, 1].copy()
        servo = pm.servo
        self.speed_line = [s.torque_speed for s in servo.servos]
        self.has_speed_line = any(line is not None for line in self.speed_line)
        # the lines as arrays, one pass a step: a joint without one keeps its torque at any speed
        self.line_of = np.array([line is not None for line in self.speed_line])
        full = np.array([line[0] if line else 0.0 for line in self.speed_line], dtype=np.float64)
        self.line_zero = np.array([line[1] if line else 1.0 for line in self.speed_line], dtype=np.float64)
        self.line_span = np.maximum(self.line_zero - full, 1e-12)
        self.torque = np.zeros(self.n, dtype=bool)
        self.d.ctrl[self.act] = self._ctrl(self.d.qpos[pm.qpos_of_joint])
        self._apply_torque()
        mujoco.mj_forward(self.m, self.d)
        self.t: float | None = None
        self.steps = 0
        self.q = self.d.qpos[pm.qpos_of_joint].copy()
        self.qd = np.zeros(self.n)
        self.effort = np.zeros(self.n)
        self.on_stand = pm.floating
        self.stand_qpos = self.d.qpos[:7].copy()
        self.all_on_since: float | None = None
        # the truth, for the run's report (`truth()`): what the robot's body did in physics
        self.max_tilt_deg = 0.0
        self.fell_at: float | None = None
        self.released_at: float | None = None
        self.start_xy: np.ndarray | None = None
        # the body in the world, published for the twin (`attach_world`)
        self.world_block: WorldBlock | None = None
        self.published_at = -np.inf
        self.floor_geom = pm.floor_geom

    # ------------------------------------------------------------------ servos
    def _apply_torque(self) -> None:
        """Stiffness on where the torque is on; off (limp) or braked where it is off."""
        on = self.torque | self.brakes
        kp = np.where(on, self.kp, 0.0)
        self.m.actuator_gainprm[self.act, 0] = kp
        self.m.actuator_biasprm[self.act, 1] = -kp

    def attach_world(self, block: WorldBlock) -> None:
        """Publish the body in the world to `block` while the simulation runs."""
        self.world_block = block

    def drive(self, target: np.ndarray, torque: np.ndarray) -> None:
        torque = np.asarray(torque, dtype=bool)
        if not np.array_equal(torque, self.torque):
            newly_off = self.torque & ~torque
            self.torque = torque.copy()
            if self.brakes and newly_off.any():   # brakes: held where each joint is now
                self.d.ctrl[self.act[newly_off]] = self._ctrl(self.d.qpos[self.pm.qpos_of_joint])[newly_off]
            self._apply_torque()
        on = self.torque
        self.d.ctrl[self.act[on]] = self._ctrl(np.asarray(target, dtype=np.float64))[on]

    def stop_here(self) -> None:
        self.d.ctrl[self.act] = self._ctrl(self.d.qpos[self.pm.qpos_of_joint])

    def _ctrl(self, q: np.ndarray) -> np.ndarray:
        """The actuators' targets for the joints' angles q (through a transmission where one is)."""
        return q if self.mix is None else self.mix.servo_angles(q)

    # ------------------------------------------------------------------ time
    def advance(self, now: float) -> None:
        if self.t is None:
            self.t = now
        dt = self.m.opt.timestep
        if now - self.t > MAX_CATCH_UP_S:
            self.t = now - MAX_CATCH_UP_S
        mj, m, d = self.mj, self.m, self.d
        if self.on_stand:
            self._stand(now)
        while self.t + dt <= now:
            if self.has_speed_line:
                self._speed_limits()
            mj.mj_step(m, d)
            if self.on_stand:
                d.qpos[:7] = self.stand_qpos
                d.qvel[:6] = 0.0
            self.t += dt
            self.steps += 1
        pm = self.pm
        self.q = d.qpos[pm.qpos_of_joint].copy()
        self.qd = d.qvel[pm.dof_of_joint].copy()
        force = d.actuator_force[self.act]   # at the joints: through the transmissions, Mᵀ · the inputs' (virtual work)
        self.effort = force if self.mix is None else self.mix.matrix_t_times(force)
        if pm.floating and not self.on_stand:
            self._judge(now)
        if self.world_block is not None and now - self.published_at >= 1.0 / WORLD_HZ:
            self._publish(now)

    def _stand(self, now: float) -> None:
        """Off the stand once every servo has held for STAND_RELEASE_S."""
        if not self.torque.all():
            self.all_on_since = None
        elif self.all_on_since is None:
            self.all_on_since = now
        elif now - self.all_on_since >= STAND_RELEASE_S:
            self.on_stand = False
            self.released_at = now
            self.start_xy = self.d.qpos[0:2].copy()

    def _tilt_deg(self) -> float:
        """How far the base's z axis leans from upright."""
        return float(np.degrees(tilt_of(self.d.xmat[self.pm.base_body].reshape(3, 3))))

    def _judge(self, now: float) -> None:
        tilt = self._tilt_deg()
        self.max_tilt_deg = max(self.max_tilt_deg, tilt)
        if self.fell_at is None and tilt > FALL_TILT_DEG:
            self.fell_at = now

    def truth(self) -> dict:
        """What the robot's body did in physics since it left its stand (JSON-ready): fell (and
        when, monotonic seconds), its largest tilt, its base's travel in the world."""
        travel = [0.0, 0.0] if self.start_xy is None else [float(v) for v in self.d.qpos[0:2] - self.start_xy]
        return {"released": self.released_at is not None, "released_at": self.released_at,
                "fell": self.fell_at is not None, "fell_at": self.fell_at,
                "max_tilt_deg": round(self.max_tilt_deg, 2), "base_travel_m": travel, "steps": self.steps,
                "model": self.pm.source}

    def _speed_limits(self) -> None:
        qd = self.d.qvel[self.pm.dof_of_joint]
        s = np.abs(qd if self.mix is None else self.mix.servo_rates(qd))   # each actuator's own speed
        k = np.clip((self.line_zero - s) / self.line_span, 0.0, 1.0)   # 1 up to full speed, 0 at zero torque
        k = np.where(self.line_of, k, 1.0)
        self.m.actuator_forcerange[self.act, 0] = -self.limit * k
        self.m.actuator_forcerange[self.act, 1] = self.limit * k

    # ------------------------------------------------------------------ sensing
    def imu(self):
        if not self.pm.floating:
            return None
        d, b = self.d, self.pm.base_body
        R = d.xmat[b].reshape(3, 3)
        # the free joint: its angular velocity is in the body frame, its linear acceleration (of
        # the base origin) in the world; an accelerometer feels that minus gravity
        acc = R.T @ (d.qacc[0:3] - self.m.opt.gravity)
        return d.xquat[b].copy(), d.qvel[3:6].copy(), acc

    def world(self, now: float) -> World:
        """The body in the world now: base pose, fall, tilt, floor contacts and their CoP."""
        b = self.pm.base_body
        base = np.eye(4)
        base[:3, 3] = self.d.xpos[b]
        base[:3, :3] = self.d.xmat[b].reshape(3, 3)
        contacts = self.floor_contacts()
        tilt = self._tilt_deg() if self.pm.floating else 0.0
        return World(now, base, self.fell_at is not None, tilt, centre_of_pressure(contacts), contacts)

    def floor_contacts(self) -> np.ndarray:
        """Where the robot touches the floor: rows (x, y, z, normal force N)."""
        rows = []
        f = np.zeros(6)
        for i in range(self.d.ncon):
            c = self.d.contact[i]
            if self.floor_geom not in (c.geom1, c.geom2):
                continue
            self.mj.mj_contactForce(self.m, self.d, i, f)
            rows.append((*c.pos, f[0]))
        return np.array(rows, dtype=np.float64).reshape(-1, 4)

    def _publish(self, now: float) -> None:
        self.world_block.write(self.world(now))
        self.published_at = now
