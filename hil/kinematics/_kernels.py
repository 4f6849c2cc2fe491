"""Numba kernels for tree kinematics: poses of all frames, one frame, Jacobians, centre of mass.

Everything here works on plain float64 arrays prepared by `hil.robots.model.RobotModel`:

- joint table `jt` (n, 16): per joint i, in topological order (parent < i):
  `[parent, A (3x4 row-major, 12 values), axis (3)]`. The pose of link i is
  `T_base_link[i] = T_base_link[parent] @ A @ Rot(axis, q[i])`; parent -1 is the base.
- frame table `ft` (m, 13): per named frame `[link, O (3x4 row-major)]`, its pose is
  `T_base_link[link] @ O`. Row 0 is the base (link -1), rows 1..n the link frames
  themselves (identity O), the rest extra frames (tool, soles, hands, ...).
- mass table `mt` (n + 1, 4): `[mass, com_x, com_y, com_z]`, row 0 the base, row i + 1
  link i, centre of mass in the link frame.

Units: metres, radians, kilograms. Kernels never raise and never allocate in the
per-joint loops; they return a status (index of the first non-finite joint value,
or -1) and the Python wrappers turn that into an exception.
"""

from __future__ import annotations

import math

import numpy as np
from numba import prange

from hil._jit import kernel

# Column layout of the joint table.
JT_PARENT = 0
JT_A = 1
JT_AXIS = 13
JT_WIDTH = 16
FT_LINK = 0
FT_O = 1
FT_WIDTH = 13


@kernel(inline="always")
def _rot(kx, ky, kz, angle):
    """Rotation matrix entries (row-major) about the unit axis k by `angle` (Rodrigues)."""
    c = math.cos(angle)
    s = math.sin(angle)
    v = 1.0 - c
    return (
        c + kx * kx * v, kx * ky * v - kz * s, kx * kz * v + ky * s,
        ky * kx * v + kz * s, c + ky * ky * v, ky * kz * v - kx * s,
        kz * kx * v - ky * s, kz * ky * v + kx * s, c + kz * kz * v,
    )


@kernel(inline="always")
def first_nonfinite(q):
    """Index of the first NaN or infinite entry of q, or -1."""
    for i in range(q.shape[0]):
        x = q[i]
        if not (x - x == 0.0):
            return i
    return -1


@kernel(inline="always")
def _set_identity(out, f):
    for r in range(4):
        for c in range(4):
            out[f, r, c] = 1.0 if r == c else 0.0


@kernel(inline="always")
def _link_pose(q, jt, i, out, parent_row, row):
    """out[row] = out[parent_row] @ A_i @ Rot(axis_i, q[i])  (parent_row < 0: base identity)."""
    r00, r01, r02, r10, r11, r12, r20, r21, r22 = _rot(
        jt[i, JT_AXIS], jt[i, JT_AXIS + 1], jt[i, JT_AXIS + 2], q[i])
    for r in range(4):
        if parent_row < 0:
            t0 = 1.0 if r == 0 else 0.0
            t1 = 1.0 if r == 1 else 0.0
            t2 = 1.0 if r == 2 else 0.0
            t3 = 1.0 if r == 3 else 0.0
        else:
            t0 = out[parent_row, r, 0]
            t1 = out[parent_row, r, 1]
            t2 = out[parent_row, r, 2]
            t3 = out[parent_row, r, 3]
        m0 = t0 * jt[i, 1] + t1 * jt[i, 5] + t2 * jt[i, 9]
        m1 = t0 * jt[i, 2] + t1 * jt[i, 6] + t2 * jt[i, 10]
        m2 = t0 * jt[i, 3] + t1 * jt[i, 7] + t2 * jt[i, 11]
        m3 = t0 * jt[i, 4] + t1 * jt[i, 8] + t2 * jt[i, 12] + t3
        out[row, r, 0] = m0 * r00 + m1 * r10 + m2 * r20
        out[row, r, 1] = m0 * r01 + m1 * r11 + m2 * r21
        out[row, r, 2] = m0 * r02 + m1 * r12 + m2 * r22
        out[row, r, 3] = m3


@kernel(inline="always")
def _frame_from_link(ft, f, out, link_row):
    """out[f] = out[link_row] @ O_f."""
    for r in range(4):
        t0 = out[link_row, r, 0]
        t1 = out[link_row, r, 1]
        t2 = out[link_row, r, 2]
        t3 = out[link_row, r, 3]
        for c in range(3):
            out[f, r, c] = t0 * ft[f, 1 + c] + t1 * ft[f, 5 + c] + t2 * ft[f, 9 + c]
        out[f, r, 3] = t0 * ft[f, 4] + t1 * ft[f, 8] + t2 * ft[f, 12] + t3


@kernel()
def fk_all_into(q, jt, ft, out):
    """Poses of all frames into out (m, 4, 4); returns the first non-finite joint index or -1.

    Row 0 is the base, rows 1..n the links, then the extra frames (see module doc).
    """
    bad = first_nonfinite(q)
    if bad >= 0:
        return bad
    n = jt.shape[0]
    _set_identity(out, 0)
    for i in range(n):
        p = int(jt[i, JT_PARENT])
        _link_pose(q, jt, i, out, p + 1 if p >= 0 else -1, i + 1)
    for f in range(n + 1, ft.shape[0]):
        _frame_from_link(ft, f, out, int(ft[f, FT_LINK]) + 1)
    return -1


@kernel(inline="always")
def _apply_joint_to_columns(q, jt, j, out, k):
    """out[k] = A_j @ Rot(axis_j, q[j]) @ out[k]  (premultiply, in place, column by column)."""
    r00, r01, r02, r10, r11, r12, r20, r21, r22 = _rot(
        jt[j, JT_AXIS], jt[j, JT_AXIS + 1], jt[j, JT_AXIS + 2], q[j])
    for c in range(4):
        x = out[k, 0, c]
        y = out[k, 1, c]
        z = out[k, 2, c]
        w = out[k, 3, c]
        u0 = r00 * x + r01 * y + r02 * z
        u1 = r10 * x + r11 * y + r12 * z
        u2 = r20 * x + r21 * y + r22 * z
        out[k, 0, c] = jt[j, 1] * u0 + jt[j, 2] * u1 + jt[j, 3] * u2 + jt[j, 4] * w
        out[k, 1, c] = jt[j, 5] * u0 + jt[j, 6] * u1 + jt[j, 7] * u2 + jt[j, 8] * w
        out[k, 2, c] = jt[j, 9] * u0 + jt[j, 10] * u1 + jt[j, 11] * u2 + jt[j, 12] * w


@kernel(inline="always")
def _frame_pose_into(q, jt, ft, f, out, k):
    """out[k] = pose of frame f, computed leaf to root along its chain only."""
    for r in range(3):
        for c in range(4):
            out[k, r, c] = ft[f, 1 + 4 * r + c]
    out[k, 3, 0] = 0.0
    out[k, 3, 1] = 0.0
    out[k, 3, 2] = 0.0
    out[k, 3, 3] = 1.0
    j = int(ft[f, FT_LINK])
    while j >= 0:
        _apply_joint_to_columns(q, jt, j, out, k)
        j = int(jt[j, JT_PARENT])


@kernel()
def fk_frame_into(q, jt, ft, f, out):
    """Pose of frame f into out (4, 4); returns the first non-finite joint index or -1."""
    bad = first_nonfinite(q)
    if bad >= 0:
        return bad
    out3 = out.reshape((1, 4, 4))
    _frame_pose_into(q, jt, ft, f, out3, 0)
    return -1


@kernel(parallel=True)
def fk_batch_into(Q, jt, ft, f, out):
    """Poses of frame f for every row of Q (N, n) into out (N, 4, 4). Inputs must be finite."""
    for k in prange(Q.shape[0]):
        _frame_pose_into(Q[k], jt, ft, f, out, k)


@kernel(inline="always")
def _jacobian_from_poses(jt, ft, f, poses, J):
    """Geometric Jacobian (6, n), [linear; angular] in the base frame, of frame f from all poses."""
    n = jt.shape[0]
    for r in range(6):
        for c in range(n):
            J[r, c] = 0.0
    px = poses[f, 0, 3]
    py = poses[f, 1, 3]
    pz = poses[f, 2, 3]
    j = int(ft[f, FT_LINK])
    while j >= 0:
        row = j + 1
        ax = jt[j, JT_AXIS]
        ay = jt[j, JT_AXIS + 1]
        az = jt[j, JT_AXIS + 2]
        # joint axis in the base frame: the link frame's rotation applied to the local axis
        zx = poses[row, 0, 0] * ax + poses[row, 0, 1] * ay + poses[row, 0, 2] * az
        zy = poses[row, 1, 0] * ax + poses[row, 1, 1] * ay + poses[row, 1, 2] * az
        zz = poses[row, 2, 0] * ax + poses[row, 2, 1] * ay + poses[row, 2, 2] * az
        dx = px - poses[row, 0, 3]
        dy = py - poses[row, 1, 3]
        dz = pz - poses[row, 2, 3]
        J[0, j] = zy * dz - zz * dy
        J[1, j] = zz * dx - zx * dz
        J[2, j] = zx * dy - zy * dx
        J[3, j] = zx
        J[4, j] = zy
        J[5, j] = zz
        j = int(jt[j, JT_PARENT])


@kernel()
def jacobian_into(q, jt, ft, f, poses, J):
    """Geometric Jacobian of frame f into J (6, n); `poses` (m, 4, 4) is workspace and holds all
    frame poses afterwards. Returns the first non-finite joint index or -1."""
    bad = fk_all_into(q, jt, ft, poses)
    if bad >= 0:
        return bad
    _jacobian_from_poses(jt, ft, f, poses, J)
    return -1


@kernel(inline="always")
def _com_from_poses(mt, poses, com):
    total = 0.0
    cx = 0.0
    cy = 0.0
    cz = 0.0
    for b in range(mt.shape[0]):  # row 0 = base, row i + 1 = link i, same rows as poses
        m = mt[b, 0]
        if m == 0.0:
            continue
        lx = mt[b, 1]
        ly = mt[b, 2]
        lz = mt[b, 3]
        cx += m * (poses[b, 0, 0] * lx + poses[b, 0, 1] * ly + poses[b, 0, 2] * lz + poses[b, 0, 3])
        cy += m * (poses[b, 1, 0] * lx + poses[b, 1, 1] * ly + poses[b, 1, 2] * lz + poses[b, 1, 3])
        cz += m * (poses[b, 2, 0] * lx + poses[b, 2, 1] * ly + poses[b, 2, 2] * lz + poses[b, 2, 3])
        total += m
    com[0] = cx / total
    com[1] = cy / total
    com[2] = cz / total
    return total


@kernel()
def com_into(q, jt, ft, mt, poses, com):
    """Centre of mass (3,) in the base frame; `poses` (m, 4, 4) is workspace.
    Returns the first non-finite joint index or -1."""
    bad = fk_all_into(q, jt, ft, poses)
    if bad >= 0:
        return bad
    _com_from_poses(mt, poses, com)
    return -1


@kernel(inline="always")
def _com_jacobian_from_poses(jt, mt, poses, total, Jc):
    """Jacobian (3, n) of the centre of mass in the base frame."""
    n = jt.shape[0]
    for r in range(3):
        for c in range(n):
            Jc[r, c] = 0.0
    for i in range(n):
        m = mt[i + 1, 0]
        if m == 0.0:
            continue
        row = i + 1
        lx = mt[row, 1]
        ly = mt[row, 2]
        lz = mt[row, 3]
        px = poses[row, 0, 0] * lx + poses[row, 0, 1] * ly + poses[row, 0, 2] * lz + poses[row, 0, 3]
        py = poses[row, 1, 0] * lx + poses[row, 1, 1] * ly + poses[row, 1, 2] * lz + poses[row, 1, 3]
        pz = poses[row, 2, 0] * lx + poses[row, 2, 1] * ly + poses[row, 2, 2] * lz + poses[row, 2, 3]
        w = m / total
        j = i
        while j >= 0:
            jr = j + 1
            ax = jt[j, JT_AXIS]
            ay = jt[j, JT_AXIS + 1]
            az = jt[j, JT_AXIS + 2]
            zx = poses[jr, 0, 0] * ax + poses[jr, 0, 1] * ay + poses[jr, 0, 2] * az
            zy = poses[jr, 1, 0] * ax + poses[jr, 1, 1] * ay + poses[jr, 1, 2] * az
            zz = poses[jr, 2, 0] * ax + poses[jr, 2, 1] * ay + poses[jr, 2, 2] * az
            dx = px - poses[jr, 0, 3]
            dy = py - poses[jr, 1, 3]
            dz = pz - poses[jr, 2, 3]
            Jc[0, j] += w * (zy * dz - zz * dy)
            Jc[1, j] += w * (zz * dx - zx * dz)
            Jc[2, j] += w * (zx * dy - zy * dx)
            j = int(jt[j, JT_PARENT])


@kernel()
def com_jacobian_into(q, jt, ft, mt, poses, com, Jc):
    """Centre of mass (3,) and its Jacobian (3, n), base frame. Returns first non-finite index or -1."""
    bad = fk_all_into(q, jt, ft, poses)
    if bad >= 0:
        return bad
    total = _com_from_poses(mt, poses, com)
    _com_jacobian_from_poses(jt, mt, poses, total, Jc)
    return -1


def empty_poses(n_frames: int) -> np.ndarray:
    """Workspace for the kernels that need all frame poses."""
    return np.empty((n_frames, 4, 4))
