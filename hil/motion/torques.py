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

from dataclasses import dataclass

import numpy as np

from hil.dynamics import GRAVITY, rnea_batch
from hil.errors import InputError
from hil.kinematics.floating import FloatingBase, inverse_transform
from hil.motion import contacts
from hil.motion.contacts import AIR, FLAT

FRICTION_SPEED = 0.05   # rad/s: below this the friction a servo must overcome fades in (no sign flip at rest)


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
    """First and second time derivatives of samples (N, …), second order in the middle."""
    if len(x) < 3:
        return np.zeros_like(x), np.zeros_like(x)
    v = np.gradient(x, dt, axis=0)
    return v, np.gradient(v, dt, axis=0)


def _log_rotation(R: np.ndarray) -> np.ndarray:
    """The rotation vector (3,) of R."""
    c = max(-1.0, min(1.0, (np.trace(R) - 1.0) / 2.0))
    angle = np.arccos(c)
    w = np.array([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]])
    s = np.sin(angle)
    return w * 0.5 if s < 1e-9 else w * angle / (2.0 * s)


def body_poses(model, Q: np.ndarray, feet: list[tuple[int, int]]) -> np.ndarray:
    """The body's world pose per sample (N, 4, 4): rooted at a sole the plan has flat on the ground
    (the left when both are), switching where the flat sole changes (hil.motion.contacts codes)."""
    from hil.motion.contacts import FLAT

    base = FloatingBase(model, "l_sole", Q[0])
    out = np.empty((len(Q), 4, 4))
    for k in range(len(Q)):
        left, right = feet[k]
        want = "l_sole" if left == FLAT and right != FLAT else "r_sole" if right == FLAT and left != FLAT else None
        if want and want != base.support:
            base.switch(want, Q[max(k - 1, 0)])
        out[k] = base.body_pose(Q[k])
    return out


def _body_motion(T: np.ndarray, dt: float) -> np.ndarray:
    """The kernel's base rows (N, 9): ω, α and the origin's acceleration minus gravity, each in the
    body's own coordinates, from its world poses by finite differences."""
    N = len(T)
    omega_w = np.zeros((N, 3))
    for k in range(N):
        a, b = max(k - 1, 0), min(k + 1, N - 1)
        if b > a:
            omega_w[k] = _log_rotation(T[b, :3, :3] @ T[a, :3, :3].T) / ((b - a) * dt)
    alpha_w = np.gradient(omega_w, dt, axis=0) if N >= 3 else np.zeros_like(omega_w)
    _, acc_w = _derivatives(T[:, :3, 3], dt)
    acc_w = acc_w - np.array([0.0, 0.0, -GRAVITY])
    rows = np.empty((N, 9))
    for k in range(N):
        Rt = T[k, :3, :3].T
        rows[k, 0:3] = Rt @ omega_w[k]
        rows[k, 3:6] = Rt @ alpha_w[k]
        rows[k, 6:9] = Rt @ acc_w[k]
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
    if support is None or model.kind != "humanoid":
        tau, _ = rnea_batch(model, Q, QD, QDD)
        return MotionTorques(t, tau, np.full((N, 2), np.nan), np.full(N, np.nan))
    feet = [contacts.decode(int(c)) for c in support]
    T = body_poses(model, Q, feet)
    tau, wrench = rnea_batch(model, Q, QD, QDD, _body_motion(T, dt))
    zmp, share = np.zeros((N, 2)), np.zeros(N)
    for k in range(N):
        tau[k], zmp[k], share[k] = _with_contacts(model, Q[k], T[k], tau[k], wrench[k], feet[k])
    return MotionTorques(t, tau, zmp, share)


def _with_contacts(model, q, T_wb, tau0, wrench, feet) -> tuple[np.ndarray, np.ndarray, float]:
    """τ less what the ground's wrench on each foot does through its leg; the ZMP; the left share."""
    F, M = wrench[:3], wrench[3:]
    R, p = T_wb[:3, :3], T_wb[:3, 3]
    F_w = R @ F
    M_w = R @ M + np.cross(p, F_w)   # about the world origin
    zmp = np.array([-M_w[1] / F_w[2], M_w[0] / F_w[2]]) if abs(F_w[2]) > 1e-9 else np.full(2, np.nan)
    soles = [model.fk_frame(q, s) for s in ("l_sole", "r_sole")]
    down = [feet[0] != AIR, feet[1] != AIR]
    if down[0] and down[1]:
        pl, pr = ((T_wb @ S)[:2, 3] for S in soles)
        d = pr - pl
        s = float(np.clip(np.dot(zmp - pl, d) / max(float(d @ d), 1e-12), 0.0, 1.0)) if np.all(np.isfinite(zmp)) \
            else 0.5
        shares = (1.0 - s, s)
    else:
        shares = (1.0, 0.0) if down[0] else (0.0, 1.0)
    forces = [shares[i] * F for i in range(2)]
    rest = M - sum(np.cross(soles[i][:3, 3], forces[i]) for i in range(2))
    tau = tau0.copy()
    for i, frame in enumerate(("l_sole", "r_sole")):
        if shares[i] <= 0.0:
            continue
        w = np.concatenate([forces[i], shares[i] * rest])
        tau -= model.jacobian(q, frame).T @ w
    return tau, zmp, shares[0]


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
