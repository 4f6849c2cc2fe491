"""Recursive Newton–Euler inverse dynamics as a Numba kernel, on the model's kinematic, mass and
inertia tables (`hil.robots.model`: `kin`, `mt`, `it`).

Everything is computed in the base frame's coordinates at the instant: each link's pose from
`fk_all_core`, then

- forward, root to leaves: the angular velocity and acceleration of each link and the linear
  acceleration of its frame's origin (which lies on its joint's axis and is fixed in its parent);
- backward, leaves to root: the force and the moment about its origin that each link's joint
  passes to it, τ_i = axis_i · moment_i.

The base moves with the given spatial velocity and acceleration (zero: a fixed base); gravity
enters as an acceleration of the base, so the base wrench out is what holds the robot up (for a
floating base: what its contacts must supply). Units SI; no allocation, no exceptions: the work
arrays come from the caller, the status is the first non-finite input or -1.
"""

from __future__ import annotations

from hil._jit import kernel
from hil.kinematics.kernels import (HDR_N, HDR_NQ, K_AXIS, K_LEADER, K_LEADER2, K_MUL, K_MUL2, K_PARENT, MT_COM, MT_MASS,
                                    check_q, fk_all_core)

# columns of the work rows (one row per body: 0 the base, i + 1 link i)
W_OMEGA, W_ALPHA, W_ACC, W_F, W_N, W_AXIS, W_WIDTH = 0, 3, 6, 9, 12, 15, 18
# inertia rows: Ixx, Iyy, Izz, Ixy, Ixz, Iyz about the centre of mass, link frame
IT_WIDTH = 6


@kernel(inline="always")
def _cross(ax, ay, az, bx, by, bz):
    return ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx


@kernel(inline="always")
def _world_inertia_times(poses, r, it, row, vx, vy, vz):
    """(R I Rᵀ) v for body `row` (R: its orientation in the base frame), without forming R I Rᵀ."""
    # u = Rᵀ v
    ux = poses[r, 0, 0] * vx + poses[r, 1, 0] * vy + poses[r, 2, 0] * vz
    uy = poses[r, 0, 1] * vx + poses[r, 1, 1] * vy + poses[r, 2, 1] * vz
    uz = poses[r, 0, 2] * vx + poses[r, 1, 2] * vy + poses[r, 2, 2] * vz
    ixx = it[row, 0]
    iyy = it[row, 1]
    izz = it[row, 2]
    ixy = it[row, 3]
    ixz = it[row, 4]
    iyz = it[row, 5]
    wx = ixx * ux + ixy * uy + ixz * uz
    wy = ixy * ux + iyy * uy + iyz * uz
    wz = ixz * ux + iyz * uy + izz * uz
    return (poses[r, 0, 0] * wx + poses[r, 0, 1] * wy + poses[r, 0, 2] * wz,
            poses[r, 1, 0] * wx + poses[r, 1, 1] * wy + poses[r, 1, 2] * wz,
            poses[r, 2, 0] * wx + poses[r, 2, 1] * wy + poses[r, 2, 2] * wz)


@kernel(inline="always")
def _body_wrench(poses, mt, it, work, b):
    """Work row b gets the force and the moment about the body's origin that its own motion
    needs (m a_com; I α + ω × I ω + c × m a_com), from its ω, α and origin acceleration."""
    m = mt[b, MT_MASS]
    wx, wy, wz = work[b, W_OMEGA], work[b, W_OMEGA + 1], work[b, W_OMEGA + 2]
    ax, ay, az = work[b, W_ALPHA], work[b, W_ALPHA + 1], work[b, W_ALPHA + 2]
    # centre of mass relative to the origin, base coordinates
    lx, ly, lz = mt[b, MT_COM], mt[b, MT_COM + 1], mt[b, MT_COM + 2]
    cx = poses[b, 0, 0] * lx + poses[b, 0, 1] * ly + poses[b, 0, 2] * lz
    cy = poses[b, 1, 0] * lx + poses[b, 1, 1] * ly + poses[b, 1, 2] * lz
    cz = poses[b, 2, 0] * lx + poses[b, 2, 1] * ly + poses[b, 2, 2] * lz
    # a_com = a_origin + α × c + ω × (ω × c)
    t1x, t1y, t1z = _cross(ax, ay, az, cx, cy, cz)
    t2x, t2y, t2z = _cross(wx, wy, wz, cx, cy, cz)
    t3x, t3y, t3z = _cross(wx, wy, wz, t2x, t2y, t2z)
    fx = m * (work[b, W_ACC] + t1x + t3x)
    fy = m * (work[b, W_ACC + 1] + t1y + t3y)
    fz = m * (work[b, W_ACC + 2] + t1z + t3z)
    iax, iay, iaz = _world_inertia_times(poses, b, it, b, ax, ay, az)
    iwx, iwy, iwz = _world_inertia_times(poses, b, it, b, wx, wy, wz)
    gx, gy, gz = _cross(wx, wy, wz, iwx, iwy, iwz)
    mx, my, mz = _cross(cx, cy, cz, fx, fy, fz)
    work[b, W_F] = fx
    work[b, W_F + 1] = fy
    work[b, W_F + 2] = fz
    work[b, W_N] = iax + gx + mx
    work[b, W_N + 1] = iay + gy + my
    work[b, W_N + 2] = iaz + gz + mz


@kernel(inline="always")
def _forward(q, qd, qdd, kin, poses, work, n):
    """ω, α and the origin's linear acceleration of every link, root to leaves (row 0: the base, set
    by the caller); each link's joint axis in base coordinates too. A follower turns at its
    multiplier times its leader's rate (its offset is a position only)."""
    nq = int(kin[0, HDR_NQ])
    for i in range(nq):
        _forward_link(kin, poses, work, i + 1, qd[i], qdd[i])
    for i in range(nq, n):
        j = i + 1
        k = int(kin[j, K_LEADER])
        k2 = int(kin[j, K_LEADER2])
        _forward_link(kin, poses, work, j, kin[j, K_MUL] * qd[k] + kin[j, K_MUL2] * qd[k2],
                      kin[j, K_MUL] * qdd[k] + kin[j, K_MUL2] * qdd[k2])


@kernel(inline="always")
def _forward_link(kin, poses, work, j, qdi, qddi):
    """Work row j (link j − 1) from its parent's, its joint turning at qdi, accelerating at qddi."""
    p = int(kin[j, K_PARENT]) + 1
    # the axis in base coordinates: the link's rotation times its local axis
    kx, ky, kz = kin[j, K_AXIS], kin[j, K_AXIS + 1], kin[j, K_AXIS + 2]
    zx = poses[j, 0, 0] * kx + poses[j, 0, 1] * ky + poses[j, 0, 2] * kz
    zy = poses[j, 1, 0] * kx + poses[j, 1, 1] * ky + poses[j, 1, 2] * kz
    zz = poses[j, 2, 0] * kx + poses[j, 2, 1] * ky + poses[j, 2, 2] * kz
    work[j, W_AXIS] = zx
    work[j, W_AXIS + 1] = zy
    work[j, W_AXIS + 2] = zz
    pwx, pwy, pwz = work[p, W_OMEGA], work[p, W_OMEGA + 1], work[p, W_OMEGA + 2]
    pax, pay, paz = work[p, W_ALPHA], work[p, W_ALPHA + 1], work[p, W_ALPHA + 2]
    # the origin, fixed in the parent: a = a_p + α_p × r + ω_p × (ω_p × r)
    rx = poses[j, 0, 3] - poses[p, 0, 3]
    ry = poses[j, 1, 3] - poses[p, 1, 3]
    rz = poses[j, 2, 3] - poses[p, 2, 3]
    t1x, t1y, t1z = _cross(pax, pay, paz, rx, ry, rz)
    t2x, t2y, t2z = _cross(pwx, pwy, pwz, rx, ry, rz)
    t3x, t3y, t3z = _cross(pwx, pwy, pwz, t2x, t2y, t2z)
    work[j, W_ACC] = work[p, W_ACC] + t1x + t3x
    work[j, W_ACC + 1] = work[p, W_ACC + 1] + t1y + t3y
    work[j, W_ACC + 2] = work[p, W_ACC + 2] + t1z + t3z
    work[j, W_OMEGA] = pwx + zx * qdi
    work[j, W_OMEGA + 1] = pwy + zy * qdi
    work[j, W_OMEGA + 2] = pwz + zz * qdi
    cx, cy, cz = _cross(pwx, pwy, pwz, zx * qdi, zy * qdi, zz * qdi)
    work[j, W_ALPHA] = pax + zx * qddi + cx
    work[j, W_ALPHA + 1] = pay + zy * qddi + cy
    work[j, W_ALPHA + 2] = paz + zz * qddi + cz


@kernel(inline="always")
def _backward(kin, poses, mt, it, work, tau, n):
    """Wrenches leaves to root: each link's own plus its children's, passed on to the parent
    (the moment moved to the parent's origin); τ_i = axis_i · moment_i. A follower's torque is
    its leader's to give, times the multiplier (virtual work: the mechanism turns it so); the
    followers come last, so they are passed up first."""
    for b in range(n + 1):
        _body_wrench(poses, mt, it, work, b)
    nq = int(kin[0, HDR_NQ])
    for c in range(nq):
        tau[c] = 0.0
    for i in range(n - 1, nq - 1, -1):
        j = i + 1
        up = _pass_up(kin, poses, work, j)
        tau[int(kin[j, K_LEADER])] += kin[j, K_MUL] * up
        tau[int(kin[j, K_LEADER2])] += kin[j, K_MUL2] * up
    for i in range(nq - 1, -1, -1):
        tau[i] += _pass_up(kin, poses, work, i + 1)


@kernel(inline="always")
def _pass_up(kin, poses, work, j):
    """Work row j's wrench added to its parent's (the moment moved to the parent's origin); returns
    the moment about its joint's axis."""
    torque = (work[j, W_AXIS] * work[j, W_N] + work[j, W_AXIS + 1] * work[j, W_N + 1]
              + work[j, W_AXIS + 2] * work[j, W_N + 2])
    p = int(kin[j, K_PARENT]) + 1
    rx = poses[j, 0, 3] - poses[p, 0, 3]
    ry = poses[j, 1, 3] - poses[p, 1, 3]
    rz = poses[j, 2, 3] - poses[p, 2, 3]
    fx, fy, fz = work[j, W_F], work[j, W_F + 1], work[j, W_F + 2]
    mx, my, mz = _cross(rx, ry, rz, fx, fy, fz)
    work[p, W_F] += fx
    work[p, W_F + 1] += fy
    work[p, W_F + 2] += fz
    work[p, W_N] += work[j, W_N] + mx
    work[p, W_N + 1] += work[j, W_N + 1] + my
    work[p, W_N + 2] += work[j, W_N + 2] + mz
    return torque


@kernel()
def rnea_into(q, qd, qdd, kin, mt, it, base, poses, work, tau, wrench):
    """τ (n,) for the motion (q, qd, qdd) of a tree whose base moves with `base` = [ω (3), α (3),
    a (3)], base coordinates, a being the acceleration of the base origin minus gravity (a fixed
    base under gravity g: a = −g). `wrench` (6,) gets the force and the moment about the base
    origin that the base must receive from outside (its support, for a fixed base). Returns -1,
    or the index of the first non-finite q / qd / qdd entry (-2: a wrong length)."""
    n = int(kin[0, HDR_N])
    nq = int(kin[0, HDR_NQ])
    st = check_q(q, kin)
    if st != -1:
        return st
    if qd.shape[0] != nq or qdd.shape[0] != nq or tau.shape[0] != nq:
        return -2
    for i in range(nq):
        if not (qd[i] - qd[i] == 0.0 and qdd[i] - qdd[i] == 0.0):
            return i
    fk_all_core(q, kin, poses)
    for c in range(9):
        work[0, c] = base[c]
    _forward(q, qd, qdd, kin, poses, work, n)
    _backward(kin, poses, mt, it, work, tau, n)
    for c in range(3):
        wrench[c] = work[0, W_F + c]
        wrench[3 + c] = work[0, W_N + c]
    return -1


@kernel(nogil=True)
def rnea_batch(Q, QD, QDD, kin, mt, it, bases, poses, work, tau_out, wrench_out):
    """`rnea_into` for every row (N samples; `bases` (N, 9)); returns the first bad row or -1."""
    for k in range(Q.shape[0]):
        st = rnea_into(Q[k], QD[k], QDD[k], kin, mt, it, bases[k], poses, work, tau_out[k], wrench_out[k])
        if st != -1:
            return k
    return -1
