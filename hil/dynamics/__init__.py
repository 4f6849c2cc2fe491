"""Inverse dynamics: the joint torques a motion needs (N·m), fixed base and floating base.

    tau = inverse_dynamics(model, q, qd, qdd)          # fixed base, gravity −9.81 m/s² along base z

The kernel is a recursive Newton–Euler pass (`rnea_kernels.rnea_into`) on the model's own tables:
masses, centres of mass and inertias about them (`RobotModel.inertias`), the same numbers
`hil urdf` writes, so Pinocchio's RNEA on that file gives the same torques (tests/unit/test_dynamics.py).

A walking humanoid has no fixed base: `floating_torques` takes the body's motion in the world and
the feet on the ground, and splits the wrench that holds the robot up between the feet (one foot:
all of it; both: by the ZMP's place between them), then subtracts what those contact wrenches do
through each leg (τ − Jᵀ f).
"""

from __future__ import annotations

import numpy as np

from hil._jit import entry_point
from hil.dynamics import rnea_kernels as DK
from hil.errors import InputError

GRAVITY = 9.81
_NDARRAY = np.ndarray
_F64 = np.dtype(np.float64)


class _Calls:
    """One model's inverse-dynamics call, its work arrays allocated once (the kernel keeps the
    GIL, so two threads never share them at once)."""

    def __init__(self, model) -> None:
        kin, mt, it = model.tables[0], model.tables[1], model._it
        self.kin, self.mt, self.it = kin, mt, it
        self.n = model.n
        self.poses = np.empty((len(model.frame_names), 4, 4))
        self.work = np.zeros((model.n_links + 1, DK.W_WIDTH))
        self.wrench = np.empty(6)
        self.fixed = np.zeros(9)
        self.fixed[8] = GRAVITY   # a fixed base under gravity: its origin "accelerates" up by g
        q = np.zeros(4)[::2]
        self.entry = entry_point(DK.rnea_into, q, q, q, kin, mt, it, self.fixed, self.poses, self.work,
                                 np.zeros(model.n), self.wrench)
        self.model = model

    def error(self, q, qd, qdd, status: int) -> InputError:
        if status == -2:
            return InputError(f"{self.model.name}: q, qd and qdd need {self.n} values each, got "
                              f"{np.shape(q)}, {np.shape(qd)}, {np.shape(qdd)}")
        return InputError(f"{self.model.name}: q, qd or qdd of joint {self.model.joint_names[status]!r} is not finite")


def _calls(model) -> _Calls:
    calls = model.meta.get("_dynamics")   # a cache, as the model's "_" keys are (not copied, not pickled)
    if calls is None:
        calls = model.meta["_dynamics"] = _Calls(model)
    return calls


def _vec(x) -> np.ndarray:
    if x.__class__ is _NDARRAY and x.dtype is _F64 and x.ndim == 1:
        return x
    try:
        return np.asarray(x, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise InputError(f"joint values must be numbers, got {x!r}") from None


def inverse_dynamics(model, q, qd, qdd) -> np.ndarray:
    """Joint torques (n,) N·m for positions q (rad), velocities qd (rad/s), accelerations qdd
    (rad/s²) of `model` on a fixed base, gravity −9.81 m/s² along the base frame's z axis."""
    c = _calls(model)
    tau = np.empty(c.n)
    st = c.entry(_vec(q), _vec(qd), _vec(qdd), c.kin, c.mt, c.it, c.fixed, c.poses, c.work, tau, c.wrench)
    if st != -1:
        raise c.error(q, qd, qdd, st)
    return tau


def base_motion(omega, alpha, acc, gravity_in_base) -> np.ndarray:
    """The kernel's base row [ω, α, a − g] (base coordinates) for a base that moves."""
    out = np.empty(9)
    out[0:3] = omega
    out[3:6] = alpha
    out[6:9] = np.asarray(acc, float) - np.asarray(gravity_in_base, float)
    return out


def rnea(model, q, qd, qdd, base: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(τ, base wrench) with the base moving as `base` (`base_motion`; None: fixed, under gravity).
    The wrench (6,) is the force and the moment about the base origin, base coordinates, that the
    base must receive from outside."""
    c = _calls(model)
    tau = np.empty(c.n)
    wrench = np.empty(6)
    b = c.fixed if base is None else np.ascontiguousarray(base, dtype=np.float64)
    st = c.entry(_vec(q), _vec(qd), _vec(qdd), c.kin, c.mt, c.it, b, c.poses, c.work, tau, wrench)
    if st != -1:
        raise c.error(q, qd, qdd, st)
    return tau, wrench


def rnea_batch(model, Q, QD, QDD, bases: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """`rnea` for every sample (N, n); `bases` (N, 9) or None (fixed). Returns τ (N, n), wrenches (N, 6)."""
    c = _calls(model)
    Q, QD, QDD = (np.ascontiguousarray(a, dtype=np.float64) for a in (Q, QD, QDD))
    if not Q.shape == QD.shape == QDD.shape or Q.ndim != 2 or Q.shape[1] != c.n:
        raise InputError(f"{model.name}: Q, QD and QDD must be (N, {c.n}) each")
    N = Q.shape[0]
    if bases is None:
        bases = np.broadcast_to(c.fixed, (N, 9))
    bases = np.ascontiguousarray(bases, dtype=np.float64)
    tau, wrench = np.empty((N, c.n)), np.empty((N, 6))
    bad = DK.rnea_batch(Q, QD, QDD, c.kin, c.mt, c.it, bases, np.empty_like(c.poses), np.zeros_like(c.work), tau,
                        wrench)
    if bad != -1:
        raise InputError(f"{model.name}: sample {bad} of the motion is not finite")
    return tau, wrench
