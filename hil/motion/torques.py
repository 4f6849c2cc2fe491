"""The joint torques a whole planned motion needs (N·m per sample), and what a compliant servo
must be told to give them.

An arm stands on its base: fixed-base inverse dynamics. A humanoid stands on its feet: its body
moves in the world as its support sole(s) dictate (the sole the plan has flat stays put; the
body's pose follows from it, as the walk planner and the loop's checks compute it), the floating
base's inverse dynamics gives the wrench that must come from the ground, and that wrench is
shared between the feet on the ground: all to one foot in single support, by where the ZMP lies
between them in double support. What the contact wrenches do through the legs is subtracted from
the joint torques (τ = τ₀ − Σ Jᵀ w).

A position servo of stiffness kp gives torque kp·(target − angle) (less its damping and
friction): to hold a joint where the plan wants it while it gives τ, its target must be
angle + τ/kp. That is the compliance compensation of `compensated`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hil.dynamics import GRAVITY, rnea_batch
from hil.errors import InputError
from hil.kinematics.floating import FloatingBase, inverse_transform, inverse_transforms
from hil.motion import contacts, progress
from hil.motion.contacts import AIR, FLAT
from hil.robots.model import SOLE_FRAMES

FRICTION_SPEED = 0.05   # rad/s: below this the friction a servo must overcome fades in (no sign flip at rest)
REST_PAD = 4            # samples of rest added before and after a motion for its derivatives: plans start
                        # and end at rest, and one-sided differences at the ends would say otherwise
SMOOTH_S = 0.1          # torques are averaged over this window: a servo cannot follow faster changes, and the
                        # contact split changes abruptly where a foot lifts or lands


@dataclass
class MotionTorques:
    """Per sample (N): joint torques (N, n) N·m, the ZMP on the ground (N, 2) world metres (NaN for
    a fixed base), and the share of the body's weight on the left foot (N,)."""

    t: np.ndarray
    tau: np.ndarray
    zmp: np.ndarray
    left_share: np.ndarray

    def peak(self) -> np.ndarray:
        """Largest |τ| per joint over the motion (n,)."""
        return np.abs(self.tau).max(axis=0) if len(self.tau) else np.zeros(self.tau.shape[1])


def _derivatives(x: np.ndarray, dt: float) -> tuple[np.ndarray, np.ndarray]:
    """First and second time derivatives of samples (N, …) of a motion at rest before and after."""
    if len(x) < 2:
        return np.zeros_like(x), np.zeros_like(x)
    padded = np.concatenate([np.repeat(x[:1], REST_PAD, axis=0), x, np.repeat(x[-1:], REST_PAD, axis=0)])
    v = np.gradient(padded, dt, axis=0)
    a = np.gradient(v, dt, axis=0)
    return v[REST_PAD:-REST_PAD], a[REST_PAD:-REST_PAD]


def _smoothed(x: np.ndarray, dt: float) -> np.ndarray:
    """A triangular-window average spread as one moving average over SMOOTH_S is (two centred
    moving averages over SMOOTH_S/√2, the ends held). One moving average turns a step in the
    torques into a ramp with corners, and the compensated commands then turn those corners with
    an acceleration no servo follows (2300 °/s² at humanoid17's ankle on STS3215 servos); the
    second pass rounds them."""
    k = max(1, int(round(SMOOTH_S / math.sqrt(2.0) / dt)) | 1)
    if k == 1 or len(x) < 2:
        return x
    return _moving_average(_moving_average(x, k), k)


def _moving_average(x: np.ndarray, k: int) -> np.ndarray:
    """A centred moving average over k (odd) samples, the ends held."""
    pad = k // 2
    padded = np.concatenate([np.repeat(x[:1], pad, axis=0), x, np.repeat(x[-1:], pad, axis=0)])
    c = np.cumsum(np.concatenate([np.zeros((1,) + x.shape[1:]), padded]), axis=0)
    return (c[k:] - c[:-k]) / k


def _log_rotations(R: np.ndarray) -> np.ndarray:
    """The rotation vectors (N, 3) of rotations R (N, 3, 3)."""
    c = np.clip((np.trace(R, axis1=1, axis2=2) - 1.0) / 2.0, -1.0, 1.0)
    angle = np.arccos(c)
    w = np.stack([R[:, 2, 1] - R[:, 1, 2], R[:, 0, 2] - R[:, 2, 0], R[:, 1, 0] - R[:, 0, 1]], axis=1)
    s = np.sin(angle)
    scale = np.where(s < 1e-9, 0.5, angle / (2.0 * np.where(s < 1e-9, 1.0, s)))
    return w * scale[:, None]


def body_poses(model, Q: np.ndarray, feet: list[tuple[int, int]], soles: np.ndarray | None = None) -> np.ndarray:
    """The body's world pose per sample (N, 4, 4): rooted at a sole the plan has flat on the ground
    (the left when both are), switching where the flat sole changes (hil.motion.contacts codes) —
    `FloatingBase`'s rule, for all samples at once. `soles`: both soles' poses in the body
    (N, 2, 4, 4), if the caller has them."""
    if soles is None:
        soles = np.stack([model.fk_batch(Q, s) for s in SOLE_FRAMES], axis=1)
    inv_soles = inverse_transforms(soles)
    W = FloatingBase(model, SOLE_FRAMES[0], Q[0]).world_T_support
    root, start = 0, 0
    out = np.empty((len(Q), 4, 4))
    tick = progress.reporting_every("the body's poses", len(Q))
    for k, (left, right) in enumerate(feet):
        tick(k)
        want = 0 if left == FLAT and right != FLAT else 1 if right == FLAT and left != FLAT else None
        if want is None or want == root:
            continue
        # the new root's world pose: where it is at the sample before (then both were flat)
        out[start:k] = np.matmul(W, inv_soles[start:k, root])
        j = max(k - 1, 0)
        W = W @ inv_soles[j, root] @ soles[j, want]
        if not np.all(np.isfinite(W)):
            raise InputError(f"cannot switch support to {SOLE_FRAMES[want]!r}: its pose is not finite")
        root, start = want, k
    out[start:] = np.matmul(W, inv_soles[start:, root])
    return out


def _body_motion(T: np.ndarray, dt: float) -> np.ndarray:
    """The kernel's base rows (N, 9): ω, α and the origin's acceleration minus gravity, each in the
    body's own coordinates, from its world poses by finite differences."""
    N = len(T)
    k = np.arange(N)
    a, b = np.maximum(k - 1, 0), np.minimum(k + 1, N - 1)
    R = T[:, :3, :3]
    omega_w = _log_rotations(R[b] @ np.transpose(R[a], (0, 2, 1))) / (np.maximum(b - a, 1) * dt)[:, None]
    alpha_w, _ = _derivatives(omega_w, dt)
    _, acc_w = _derivatives(T[:, :3, 3], dt)
    acc_w = acc_w - np.array([0.0, 0.0, -GRAVITY])
    rows = np.empty((N, 9))
    for col, v in ((0, omega_w), (3, alpha_w), (6, acc_w)):
        rows[:, col:col + 3] = np.einsum("kji,kj->ki", R, v)   # Rᵀ v, sample by sample
    return rows


def motion_torques(model, t, Q, support=None) -> MotionTorques:
    """The joint torques of a motion sampled evenly at times t (N,), joint angles Q (N, n). A
    humanoid needs `support` (N,) codes of what touches the ground (hil.motion.contacts); an arm
    stands on its base (support None)."""
    t = np.asarray(t, dtype=np.float64)
    Q = np.ascontiguousarray(Q, dtype=np.float64)
    N = len(t)
    if N < 2:
        raise InputError("a motion needs two samples or more for its torques")
    dt = float(t[1] - t[0])
    QD, QDD = _derivatives(Q, dt)
    if support is None or not model.floating:
        tau, _ = rnea_batch(model, Q, QD, QDD)
        return MotionTorques(t, tau, np.full((N, 2), np.nan), np.full(N, np.nan))
    feet = [contacts.decode(int(c)) for c in support]
    T = body_poses(model, Q, feet)
    tau, wrench = rnea_batch(model, Q, QD, QDD, _body_motion(T, dt))
    down = np.array([[f[0] != AIR, f[1] != AIR] for f in feet], dtype=bool)
    tau, zmp, share = _with_contacts(model, Q, T, tau, wrench, down)
    return MotionTorques(t, tau, zmp, share)


def _with_contacts(model, Q, T_wb, tau0, wrench, down) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """τ less what the ground's wrench on each foot does through its leg; the ZMP; the left share
    — for every sample at once (N,): the body's poses T_wb (N, 4, 4), the wrench (N, 6) the body
    needs, which feet are down (N, 2)."""
    F, M = wrench[:, :3], wrench[:, 3:]
    R, p = T_wb[:, :3, :3], T_wb[:, :3, 3]
    F_w = np.einsum("kij,kj->ki", R, F)
    M_w = np.einsum("kij,kj->ki", R, M) + np.cross(p, F_w)   # about the world origin
    loaded = np.abs(F_w[:, 2]) > 1e-9
    Fz = np.where(loaded, F_w[:, 2], 1.0)
    zmp = np.where(loaded[:, None], np.column_stack([-M_w[:, 1] / Fz, M_w[:, 0] / Fz]), np.nan)
    soles = [model.fk_batch(Q, s) for s in SOLE_FRAMES]
    pl, pr = ((T_wb @ S)[:, :2, 3] for S in soles)
    d = pr - pl
    s = np.clip(np.sum((zmp - pl) * d, axis=1) / np.maximum(np.sum(d * d, axis=1), 1e-12), 0.0, 1.0)
    s = np.where(np.isfinite(zmp).all(axis=1), s, 0.5)
    both = down[:, 0] & down[:, 1]
    shares = (np.where(both, 1.0 - s, np.where(down[:, 0], 1.0, 0.0)),
              np.where(both, s, np.where(down[:, 0], 0.0, 1.0)))
    forces = [shares[i][:, None] * F for i in range(2)]
    rest = M - np.cross(soles[0][:, :3, 3], forces[0]) - np.cross(soles[1][:, :3, 3], forces[1])
    tau = tau0.copy()
    for i, frame in enumerate(SOLE_FRAMES):
        progress.report(f"the {'left' if i == 0 else 'right'} foot's forces", 0.0)
        w = np.concatenate([forces[i], shares[i][:, None] * rest], axis=1)
        tau -= jacobian_transpose_times(model, Q, frame, w)
    return tau, zmp, shares[0]


def jacobian_transpose_times(model, Q: np.ndarray, frame: str, w: np.ndarray) -> np.ndarray:
    """J(q)ᵀ w for every sample at once (N, n): the joint torques a wrench w (N, 6: force, then
    moment, base frame) at `frame` takes, J the frame's geometric Jacobian (`RobotModel.jacobian`)
    — joint i's column (a × (p − o); a) from its axis a and origin o, along the frame's chain."""
    f = model.frame_index(frame)
    p = model.fk_batch(Q, f)[:, :3, 3]
    out = np.zeros((len(Q), model.n))
    i = int(model.frame_link[f])
    while i >= 0:
        T = model.fk_batch(Q, i + 1)   # link i's frame: on joint i's axis, turning with it
        a = T[:, :3, :3] @ model.joints[i].axis
        out[:, i] = np.einsum("kj,kj->k", np.cross(a, p - T[:, :3, 3]), w[:, :3]) + np.einsum("kj,kj->k", a, w[:, 3:])
        i = model.joints[i].parent
    return out


def servo_torques(servo, Q: np.ndarray, tau: np.ndarray, dt: float) -> np.ndarray:
    """What each servo must give for the motion (N, n): the links' torques plus its own motor's
    inertia, damping and friction."""
    QD, QDD = _derivatives(np.asarray(Q, float), dt)
    arm = servo.column("armature_kgm2")
    damp = servo.column("damping_nms_per_rad")
    fric = servo.column("friction_nm")
    return tau + arm * QDD + damp * QD + fric * np.tanh(QD / FRICTION_SPEED)


def compensated(servo, Q: np.ndarray, tau_servo: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """The targets (N, n) that make servos of stiffness kp give τ while the joints follow Q:
    Q + τ/kp, kept inside the joint ranges."""
    kp = servo.column("kp_nm_per_rad")
    return np.clip(np.asarray(Q, float) + tau_servo / kp, lower, upper)


def world_body(model, q, world_T_sole, sole: str = "l_sole") -> np.ndarray:
    """The body's world pose when `sole` stands at `world_T_sole` (4, 4)."""
    return world_T_sole @ inverse_transform(model.fk_frame(q, sole))


# what a plan may ask of a servo: its available torque at that speed, less this share for the
# disturbances the plan does not know of
TORQUE_RESERVE = 0.1
# a servo that sags more than this under the torque it gives is too soft to hold a robot by position:
# past it a linear servo model, and so its compensation, means nothing (humanoid17's, the OP3's and
# the Duck's sag a few degrees; the Berkeley Humanoid's knee actuators, kp 1 N·m/rad, tens)
SAG_LIMIT_DEG = 30.0


def joint_group(name: str) -> str:
    """A joint's group in summaries: legs, arms, wrist, head or the joint's own name."""
    for group, words in (("legs", ("hip", "knee", "ankle")), ("arms", ("shoulder", "elbow", "waist")),
                         ("wrist", ("wrist", "flange", "gripper", "hand")), ("head", ("head", "neck"))):
        if any(w in name for w in words):
            return group
    return name


@dataclass
class TorquePlan:
    """A planned motion's torques and the commands that carry its compliance compensation."""

    t: np.ndarray
    q_plan: np.ndarray            # where the joints should be (N, n)
    q_cmd: np.ndarray             # what the servos are told (N, n): q_plan + margin · τ/kp, or q_plan
    tau: np.ndarray               # what each servo must give (N, n), N·m
    available: np.ndarray         # what each servo can give at that speed (N, n), N·m
    compensated: bool
    servo: object
    joint_names: tuple

    def worst(self) -> tuple[int, int, float, float]:
        """(sample, joint, |τ| N·m, available N·m) of the highest share of the available torque."""
        ratio = np.abs(self.tau) / np.maximum(self.available, 1e-9)
        k, j = np.unravel_index(int(np.argmax(ratio)), ratio.shape)
        return int(k), int(j), float(abs(self.tau[k, j])), float(self.available[k, j])

    def softest(self) -> tuple[int, int, float]:
        """(sample, joint, sag in rad) of the largest sag τ/kp a servo takes (0 where the servos
        declare no stiffness)."""
        if not self.servo.declared or not len(self.tau):
            return 0, 0, 0.0
        sag = np.abs(self.tau) / self.servo.column("kp_nm_per_rad")
        k, j = np.unravel_index(int(np.argmax(sag)), sag.shape)
        return int(k), int(j), float(sag[k, j])

    def too_soft(self) -> bool:
        return self.softest()[2] > math.radians(SAG_LIMIT_DEG)

    def over(self) -> bool:
        """Whether some sample asks more than a servo gives (less the reserve), or sags a servo
        too far to hold the robot by position."""
        k, j, tau, avail = self.worst()
        return tau > (1.0 - TORQUE_RESERVE) * avail or self.too_soft()

    def refusal(self, what: str) -> str:
        if self.too_soft():
            k, j, sag = self.softest()
            kp = self.servo.joint(j).kp_nm_per_rad
            return (f"{what}: refused: {self.joint_names[j]}'s servo (kp {kp:g} N·m/rad) would sag "
                    f"{math.degrees(sag):.0f}° under the {abs(self.tau[k, j]):.2f} N·m it gives at t = {self.t[k]:.2f} s, "
                    f"more than {SAG_LIMIT_DEG:g}°: too soft to hold the robot by position (no compensation makes that "
                    "up); give the servos you drive in a [servo] table (docs/physics.md)")
        k, j, tau, avail = self.worst()
        return (f"{what}: refused: {self.joint_names[j]} needs {tau:.2f} N·m at t = {self.t[k]:.2f} s, more than "
                f"its servo gives ({avail:.2f} N·m{' at that speed' if avail < self.servo.joint(j).torque_limit_nm else ''}, "
                f"{100 * TORQUE_RESERVE:.0f} % kept in reserve)")

    def summary(self) -> str:
        """One line: the peak torque per joint group against its servos' limit; the compensation."""
        peak = np.abs(self.tau).max(axis=0)
        groups: dict[str, list[int]] = {}
        for j, name in enumerate(self.joint_names):
            groups.setdefault(joint_group(name), []).append(j)
        parts = []
        for g, js in groups.items():
            j = max(js, key=lambda i: peak[i] / self.servo.joint(i).torque_limit_nm)
            limit = self.servo.joint(j).torque_limit_nm
            parts.append(f"{g} {peak[j]:.2f} N·m" + (f" ({100 * peak[j] / limit:.0f} % of {limit:g})"
                                                      if self.servo.declared else ""))
        margin = self.servo.column("compensation_margin")
        times = f"{margin.min():g}" if margin.min() == margin.max() else f"{margin.min():g}–{margin.max():g}"
        comp = (f"compliance compensation on ({self.servo.summary().split(' (')[0]}, targets + {times} × τ/kp, "
                f"up to {np.degrees(np.abs(self.q_cmd - self.q_plan).max()):.1f}°)" if self.compensated
                else "no compliance compensation" + ("" if self.servo.declared else
                                                     " (no [servo] table: the servos declare no stiffness or limit)"))
        return "torques: peak " + ", ".join(parts) + "; " + comp


def torque_plan(model, t, Q, support, servo, compensate: bool = True) -> TorquePlan:
    """The torques a motion needs of each servo, what they can give at each moment, and (when
    `compensate` and the servos declare a stiffness) the commands that make soft servos follow."""
    t = np.asarray(t, dtype=np.float64)
    Q = np.asarray(Q, dtype=np.float64)
    dt = float(t[1] - t[0]) if len(t) > 1 else 1.0
    mt = motion_torques(model, t, Q, support if model.floating else None)
    # servos that declare nothing (the ideal preset, whose damping and armature only steady the
    # simulation) add no motor of their own: the links' torques are what they must give
    tau = _smoothed(servo_torques(servo, Q, mt.tau, dt) if servo.declared else mt.tau, dt)
    QD, _ = _derivatives(Q, dt)
    available = np.array([[servo.joint(j).available_torque(QD[k, j]) for j in range(model.n)]
                          for k in range(len(t))]) if any(s.torque_speed for s in servo.servos) \
        else np.broadcast_to(servo.column("torque_limit_nm"), Q.shape).copy()
    on = compensate and servo.declared
    margin = servo.column("compensation_margin")
    q_cmd = compensated(servo, Q, margin * tau, model.lower, model.upper) if on else Q.copy()
    return TorquePlan(t, Q, q_cmd, tau, available, on, servo, tuple(model.joint_names))
