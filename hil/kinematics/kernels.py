"""Numba kernels for tree kinematics: poses of all frames, one frame, Jacobians, centre of mass.

Everything here works on plain float64 arrays prepared by `hil.robots.model.RobotModel`:

- one kinematic table `kin` (1 + n + m, 16), so that a call passes few arguments (Numba's
  dispatch costs about 100 ns per array argument, more than the math of a 6-joint FK):
  - row 0, header: `[nq, m, tool frame index, n, ...]`;
  - rows 1..n, joints in topological order (parent < i): `[parent, A (3x4 row-major), axis (3),
    leader, multiplier, offset]`. The pose of link i is
    `T_base_link[i] = T_base_link[parent] @ A @ Rot(axis, θ_i)`; parent -1 is the base.
    The first nq joints are driven, θ_i = q[i]; the rest follow a driven one (a URDF mimic, an
    MJCF joint equality), θ_i = multiplier · q[leader] + offset: q has nq entries, a Jacobian nq
    columns (a follower's motion is its leader's), and a follower is never a coordinate of its own;
  - rows n+1..n+m, frames: `[link, O (3x4 row-major), 0, 0, 0, 0, 0, 0]`, pose `T_base_link[link] @ O`.
    Frame 0 is the base (link -1), frames 1..n the links themselves (identity O), the rest
    extra frames (tool, soles, hands, ...).
- mass table `mt` (n + 1, 5): `[mass, com_x, com_y, com_z, subtree mass]`, row 0 the base,
  row i + 1 link i, centre of mass in the link frame; the subtree mass of link i is its own
  and that of every link beyond joint i (followers' links included).

Units: metres, radians, kilograms. Kernels never raise and never allocate in the
per-joint loops; they return a status (index of the first non-finite joint value,
or -1) and the Python wrappers turn that into an exception.
"""

from __future__ import annotations

import math

import numpy as np
from numba.extending import overload

from hil._jit import kernel

# Column layout of the kinematic table.
HDR_NQ = 0   # q's length (the driven joints)
HDR_M = 1
HDR_TOOL = 2
HDR_N = 3    # joint rows: the driven joints, then the followers
K_PARENT = 0  # joint rows
K_A = 1
K_AXIS = 13
K_LEADER = 16  # a follower's driven joint, multiplier and offset (a driven joint: itself, 1, 0)
K_MUL = 17
K_OFF = 18
K_LEADER2 = 19  # a differential's gear follows a second driven joint too (else: its leader again, times 0)
K_MUL2 = 20
K_LINK = 0  # frame rows
K_O = 1
K_WIDTH = 21
# Column layout of the mass table.
MT_MASS = 0
MT_COM = 1
MT_SUBTREE = 4
MT_WIDTH = 5


# π/2 in three parts of 33, 33 and 53 bits: k · part is exact for |k| < 2²⁰ (Cody–Waite reduction)
_PIO2_1 = float.fromhex("0x1.921fb54400000p+0")
_PIO2_2 = float.fromhex("0x1.0b4611a600000p-34")
_PIO2_3 = float.fromhex("0x1.3198a2e037073p-69")
_TWO_OVER_PI = 0.6366197723675814
_SINCOS_DIRECT = 1.0e5  # beyond this |angle| (radians) the library's sin and cos are used
# Taylor coefficients: sin r = r + r·z·(S1 + S2 z + … + S8 z⁷), cos r = 1 − z/2 + z²·(C2 + … + C9 z⁷), z = r²
_S1, _S2, _S3, _S4 = -1.0 / 6.0, 1.0 / 120.0, -1.0 / 5040.0, 1.0 / 362880.0
_S5, _S6, _S7, _S8 = -1.0 / 39916800.0, 1.0 / 6227020800.0, -1.0 / 1307674368000.0, 1.0 / 355687428096000.0
_C2, _C3, _C4, _C5 = 1.0 / 24.0, -1.0 / 720.0, 1.0 / 40320.0, -1.0 / 3628800.0
_C6, _C7, _C8, _C9 = 1.0 / 479001600.0, -1.0 / 87178291200.0, 1.0 / 20922789888000.0, -1.0 / 6402373705728000.0


@kernel(inline="always")
def _sincos(x):
    """(sin x, cos x), within an ulp or two of the library's for |x| < 1e5 rad, cheaper.

    The library's sincos is a call the compiler cannot see into (17 of them in one humanoid
    FK); this is inline and branch-light: x = k·π/2 + r with |r| ≤ π/4, then the Taylor
    series of sin and cos in r to r¹⁷ and r¹⁸ (truncation < 1e-19), then the quadrant."""
    if not abs(x) < _SINCOS_DIRECT:
        return math.sin(x), math.cos(x)
    k = np.floor(x * _TWO_OVER_PI + 0.5)
    r = ((x - k * _PIO2_1) - k * _PIO2_2) - k * _PIO2_3
    z = r * r
    z2 = z * z
    z4 = z2 * z2
    # Estrin's scheme: pairs of terms, then pairs of pairs — four dependent steps, not nine
    sp = ((_S1 + _S2 * z) + z2 * (_S3 + _S4 * z)) + z4 * ((_S5 + _S6 * z) + z2 * (_S7 + _S8 * z))
    sr = r + (r * z) * sp
    cp = ((_C2 + _C3 * z) + z2 * (_C4 + _C5 * z)) + z4 * ((_C6 + _C7 * z) + z2 * (_C8 + _C9 * z))
    cr = (1.0 - 0.5 * z) + z2 * cp
    quadrant = int(k) & 3
    # selects, not branches: the quadrant of a joint angle is not predictable
    odd = quadrant & 1
    a = cr if odd else sr
    b = sr if odd else cr
    return (-a if quadrant & 2 else a), (-b if (quadrant + 1) & 2 else b)


@kernel(inline="always")
def _rot(kx, ky, kz, s, c):
    """Rotation matrix entries (row-major) about the unit axis k by the angle of sine s and
    cosine c (Rodrigues)."""
    v = 1.0 - c
    return (
        c + kx * kx * v, kx * ky * v - kz * s, kx * kz * v + ky * s,
        ky * kx * v + kz * s, c + ky * ky * v, ky * kz * v - kx * s,
        kz * kx * v - ky * s, kz * ky * v + kx * s, c + kz * kz * v,
    )


@kernel(inline="always")
def check_q(q, kin):
    """-1 when q is usable; -2 for a wrong length; else the index of the first NaN/inf entry."""
    if q.shape[0] != int(kin[0, HDR_NQ]):
        return -2
    for i in range(q.shape[0]):
        x = q[i]
        if not (x - x == 0.0):
            return i
    return -1


@kernel(inline="always")
def _link_pose(angle, kin, i, out, parent_row, row):
    """out[row] = out[parent_row] @ A_i @ Rot(axis_i, angle)  (parent_row < 0: the base, identity).
    Joints about a coordinate axis skip the zero terms of the rotation (see `frame_pose_rows`)."""
    j = i + 1
    kx = kin[j, K_AXIS]
    ky = kin[j, K_AXIS + 1]
    kz = kin[j, K_AXIS + 2]
    if kx == 0.0 and ky == 0.0:
        axis = 3
    elif kx == 0.0 and kz == 0.0:
        axis = 2
    elif ky == 0.0 and kz == 0.0:
        axis = 1
    else:
        axis = 0
    sn, cs = _sincos(angle)
    if axis == 0:
        r00, r01, r02, r10, r11, r12, r20, r21, r22 = _rot(kx, ky, kz, sn, cs)
    else:
        sn *= kz if axis == 3 else (ky if axis == 2 else kx)
        r00 = r01 = r02 = r10 = r11 = r12 = r20 = r21 = r22 = 0.0
    # rows 0-2 only: the last row of a rigid transform is always [0, 0, 0, 1]
    out[row, 3, 0] = 0.0
    out[row, 3, 1] = 0.0
    out[row, 3, 2] = 0.0
    out[row, 3, 3] = 1.0
    for r in range(3):
        if parent_row < 0:
            t0 = 1.0 if r == 0 else 0.0
            t1 = 1.0 if r == 1 else 0.0
            t2 = 1.0 if r == 2 else 0.0
            t3 = 0.0
        else:
            t0 = out[parent_row, r, 0]
            t1 = out[parent_row, r, 1]
            t2 = out[parent_row, r, 2]
            t3 = out[parent_row, r, 3]
        m0 = t0 * kin[j, 1] + t1 * kin[j, 5] + t2 * kin[j, 9]
        m1 = t0 * kin[j, 2] + t1 * kin[j, 6] + t2 * kin[j, 10]
        m2 = t0 * kin[j, 3] + t1 * kin[j, 7] + t2 * kin[j, 11]
        m3 = t0 * kin[j, 4] + t1 * kin[j, 8] + t2 * kin[j, 12] + t3
        if axis == 3:  # row @ Rz
            out[row, r, 0] = m0 * cs + m1 * sn
            out[row, r, 1] = m1 * cs - m0 * sn
            out[row, r, 2] = m2
        elif axis == 2:  # row @ Ry
            out[row, r, 0] = m0 * cs - m2 * sn
            out[row, r, 1] = m1
            out[row, r, 2] = m0 * sn + m2 * cs
        elif axis == 1:  # row @ Rx
            out[row, r, 0] = m0
            out[row, r, 1] = m1 * cs + m2 * sn
            out[row, r, 2] = m2 * cs - m1 * sn
        else:
            out[row, r, 0] = m0 * r00 + m1 * r10 + m2 * r20
            out[row, r, 1] = m0 * r01 + m1 * r11 + m2 * r21
            out[row, r, 2] = m0 * r02 + m1 * r12 + m2 * r22
        out[row, r, 3] = m3


@kernel()
def fk_all_core(q, kin, out):
    """Poses of all frames into out (m, 4, 4), no input checks (see module doc for the rows)."""
    n = int(kin[0, HDR_N])
    m = int(kin[0, HDR_M])
    for r in range(4):
        for c in range(4):
            out[0, r, c] = 1.0 if r == c else 0.0
    nq = int(kin[0, HDR_NQ])
    for i in range(nq):
        p = int(kin[i + 1, K_PARENT])
        _link_pose(q[i], kin, i, out, p + 1 if p >= 0 else -1, i + 1)
    for i in range(nq, n):   # the followers: θ = multiplier · q[leader] + multiplier2 · q[leader2] + offset
        j = i + 1
        p = int(kin[j, K_PARENT])
        angle = kin[j, K_MUL] * q[int(kin[j, K_LEADER])] + kin[j, K_MUL2] * q[int(kin[j, K_LEADER2])] + kin[j, K_OFF]
        _link_pose(angle, kin, i, out, p + 1 if p >= 0 else -1, j)
    for f in range(n + 1, m):
        fr = 1 + n + f
        lr = int(kin[fr, K_LINK]) + 1
        out[f, 3, 0] = 0.0
        out[f, 3, 1] = 0.0
        out[f, 3, 2] = 0.0
        out[f, 3, 3] = 1.0
        for r in range(3):
            t0 = out[lr, r, 0]
            t1 = out[lr, r, 1]
            t2 = out[lr, r, 2]
            t3 = out[lr, r, 3]
            for c in range(3):
                out[f, r, c] = t0 * kin[fr, 1 + c] + t1 * kin[fr, 5 + c] + t2 * kin[fr, 9 + c]
            out[f, r, 3] = t0 * kin[fr, 4] + t1 * kin[fr, 8] + t2 * kin[fr, 12] + t3


@kernel()
def fk_all_into(q, kin, out):
    """Poses of all frames into out (m, 4, 4). Returns `check_q`'s status (-1 = done)."""
    st = check_q(q, kin)
    if st != -1:
        return st
    fk_all_core(q, kin, out)
    return -1


def _joint_value(Q, k, i):
    """Q[k, i] for a batch (N, n); q[i] for one configuration (k ignored)."""


@overload(_joint_value, inline="always")
def _joint_value_impl(Q, k, i):
    # Lets one kernel body serve a single strided vector and rows of a batch: a reshape to
    # (1, n) would need a contiguous q, and callers may pass views such as Q[:, 0].
    if Q.ndim == 1:
        return lambda Q, k, i: Q[i]
    return lambda Q, k, i: Q[k, i]


def _pose_get(out, ko, r, c):
    """out[ko, r, c] for a stack of poses (N, 4, 4); out[r, c] for one pose (ko ignored)."""


def _pose_set(out, ko, r, c, v):
    """out[ko, r, c] = v for a stack of poses; out[r, c] = v for one pose (ko ignored)."""


@overload(_pose_get, inline="always")
def _pose_get_impl(out, ko, r, c):
    # one kernel body for a single (4, 4) result and a batch, without a reshape per call (a view
    # costs reference counting, a noticeable part of a PUMA FK)
    if out.ndim == 2:
        return lambda out, ko, r, c: out[r, c]
    return lambda out, ko, r, c: out[ko, r, c]


@overload(_pose_set, inline="always")
def _pose_set_impl(out, ko, r, c, v):
    if out.ndim == 2:
        def set2(out, ko, r, c, v):
            out[r, c] = v
        return set2

    def set3(out, ko, r, c, v):
        out[ko, r, c] = v
    return set3


@kernel(inline="always")
def _column(out, ko, c):
    """Column c of pose ko of out as four scalars."""
    return _pose_get(out, ko, 0, c), _pose_get(out, ko, 1, c), _pose_get(out, ko, 2, c), _pose_get(out, ko, 3, c)


@kernel(inline="always")
def _set_placed_column(out, ko, c, kin, j, u0, u1, u2, w):
    """Rows 0-2 of column c of pose ko = A_j (joint row j of kin) @ (u0, u1, u2, w)."""
    _pose_set(out, ko, 0, c, kin[j, 1] * u0 + kin[j, 2] * u1 + kin[j, 3] * u2 + kin[j, 4] * w)
    _pose_set(out, ko, 1, c, kin[j, 5] * u0 + kin[j, 6] * u1 + kin[j, 7] * u2 + kin[j, 8] * w)
    _pose_set(out, ko, 2, c, kin[j, 9] * u0 + kin[j, 10] * u1 + kin[j, 11] * u2 + kin[j, 12] * w)


@kernel()
def frame_pose_rows(Q, k, kin, f, out, ko):
    """out[ko] (4, 4) = pose of frame f at configuration Q[k] (Q may also be one vector q and
    out one pose, see `_joint_value` and `_pose_get`),
    computed leaf to root along the frame's chain only, premultiplying A_j @ Rot(axis_j, q_j)
    column by column (no temporaries). Indexing rows directly (not through views) lets the
    batched loop vectorise better. Joints about a coordinate axis (every joint of both robots)
    take a branch that skips the zero terms of the rotation — a third fewer multiplications —
    with the branch outside the column loop and the same every call."""
    n = int(kin[0, HDR_N])
    nq = int(kin[0, HDR_NQ])
    fr = 1 + n + f
    for r in range(3):
        for c in range(4):
            _pose_set(out, ko, r, c, kin[fr, 1 + 4 * r + c])
    for c in range(4):
        _pose_set(out, ko, 3, c, 1.0 if c == 3 else 0.0)
    i = int(kin[fr, K_LINK])
    while i >= 0:
        j = i + 1
        kx = kin[j, K_AXIS]
        ky = kin[j, K_AXIS + 1]
        kz = kin[j, K_AXIS + 2]
        if i < nq:
            angle = _joint_value(Q, k, i)
        else:
            angle = (kin[j, K_MUL] * _joint_value(Q, k, int(kin[j, K_LEADER]))
                     + kin[j, K_MUL2] * _joint_value(Q, k, int(kin[j, K_LEADER2])) + kin[j, K_OFF])
        if kx == 0.0 and ky == 0.0:  # about ±z: u = Rz(±angle) x
            sn, cs = _sincos(angle)
            sn *= kz
            for c in range(4):
                x, y, z, w = _column(out, ko, c)
                _set_placed_column(out, ko, c, kin, j, cs * x - sn * y, sn * x + cs * y, z, w)
        elif kx == 0.0 and kz == 0.0:  # about ±y
            sn, cs = _sincos(angle)
            sn *= ky
            for c in range(4):
                x, y, z, w = _column(out, ko, c)
                _set_placed_column(out, ko, c, kin, j, cs * x + sn * z, y, cs * z - sn * x, w)
        elif ky == 0.0 and kz == 0.0:  # about ±x
            sn, cs = _sincos(angle)
            sn *= kx
            for c in range(4):
                x, y, z, w = _column(out, ko, c)
                _set_placed_column(out, ko, c, kin, j, x, cs * y - sn * z, sn * y + cs * z, w)
        else:
            sn, cs = _sincos(angle)
            r00, r01, r02, r10, r11, r12, r20, r21, r22 = _rot(kx, ky, kz, sn, cs)
            for c in range(4):
                x, y, z, w = _column(out, ko, c)
                _set_placed_column(out, ko, c, kin, j, r00 * x + r01 * y + r02 * z, r10 * x + r11 * y + r12 * z,
                                   r20 * x + r21 * y + r22 * z, w)
        i = int(kin[j, K_PARENT])


@kernel()
def frame_pose_core(q, kin, f, out):
    """out (4, 4) = pose of frame f at q (no input checks)."""
    frame_pose_rows(q, 0, kin, f, out, 0)


@kernel()
def fk_tool_into(q, kin, out):
    """Pose of the tool frame (header) into out (4, 4). Returns `check_q`'s status (-1 = done)."""
    st = check_q(q, kin)
    if st != -1:
        return st
    frame_pose_core(q, kin, int(kin[0, HDR_TOOL]), out)
    return -1


@kernel()
def fk_frame_into(q, kin, f, out):
    """Pose of frame f into out (4, 4). Returns `check_q`'s status (-1 = done)."""
    st = check_q(q, kin)
    if st != -1:
        return st
    frame_pose_core(q, kin, f, out)
    return -1


@kernel(nogil=True)
def fk_batch_into(Q, kin, f, out):
    """Poses of frame f for every row of Q (N, n) into out (N, 4, 4). Inputs must be finite.
    On one core: the planners that call it run beside a real-time loop (`hil ctl play` plans next
    to a running one), whose port process and emulator must keep the other core."""
    for k in range(Q.shape[0]):
        frame_pose_rows(Q, k, kin, f, out, k)


@kernel(inline="always")
def _world_axis(kin, poses, j):
    """Axis of joint row j of `kin` in the base frame: its link's rotation applied to the local axis."""
    ax = kin[j, K_AXIS]
    ay = kin[j, K_AXIS + 1]
    az = kin[j, K_AXIS + 2]
    return (poses[j, 0, 0] * ax + poses[j, 0, 1] * ay + poses[j, 0, 2] * az,
            poses[j, 1, 0] * ax + poses[j, 1, 1] * ay + poses[j, 1, 2] * az,
            poses[j, 2, 0] * ax + poses[j, 2, 1] * ay + poses[j, 2, 2] * az)


@kernel()
def jacobian_core(kin, f, poses, J):
    """Geometric Jacobian (6, nq) [linear; angular], base frame, of frame f from all frame poses.
    A follower's column is added to its leader's, times its multiplier."""
    n = int(kin[0, HDR_N])
    nq = int(kin[0, HDR_NQ])
    for r in range(6):
        for c in range(nq):
            J[r, c] = 0.0
    px = poses[f, 0, 3]
    py = poses[f, 1, 3]
    pz = poses[f, 2, 3]
    link = int(kin[1 + n + f, K_LINK])
    i = link
    while i >= 0:
        j = i + 1  # joint row in kin, and link i's row in poses
        if i < nq:
            zx, zy, zz = _world_axis(kin, poses, j)
            dx = px - poses[j, 0, 3]
            dy = py - poses[j, 1, 3]
            dz = pz - poses[j, 2, 3]
            J[0, i] = zy * dz - zz * dy
            J[1, i] = zz * dx - zx * dz
            J[2, i] = zx * dy - zy * dx
            J[3, i] = zx
            J[4, i] = zy
            J[5, i] = zz
        i = int(kin[j, K_PARENT])
    if link >= nq:   # the frame hangs beyond a follower (followers' links come after every driven one)
        _add_followers_columns(kin, f, poses, J, link, px, py, pz)


@kernel(inline="always")
def _add_followers_columns(kin, f, poses, J, link, px, py, pz):
    """Each follower on the chain below `link` turns the frame as its leaders turn: its column,
    times each multiplier, joins each leader's."""
    nq = int(kin[0, HDR_NQ])
    i = link
    while i >= nq:
        j = i + 1
        zx, zy, zz = _world_axis(kin, poses, j)
        dx = px - poses[j, 0, 3]
        dy = py - poses[j, 1, 3]
        dz = pz - poses[j, 2, 3]
        vx = zy * dz - zz * dy
        vy = zz * dx - zx * dz
        vz = zx * dy - zy * dx
        for lead in range(2):
            c = int(kin[j, K_LEADER]) if lead == 0 else int(kin[j, K_LEADER2])
            w = kin[j, K_MUL] if lead == 0 else kin[j, K_MUL2]
            J[0, c] += w * vx
            J[1, c] += w * vy
            J[2, c] += w * vz
            J[3, c] += w * zx
            J[4, c] += w * zy
            J[5, c] += w * zz
        i = int(kin[j, K_PARENT])


@kernel()
def jacobian_into(q, kin, f, poses, J):
    """Geometric Jacobian of frame f into J (6, n); `poses` (m, 4, 4) is workspace and holds all
    frame poses afterwards. Returns `check_q`'s status (-1 = done)."""
    st = check_q(q, kin)
    if st != -1:
        return st
    fk_all_core(q, kin, poses)
    jacobian_core(kin, f, poses, J)
    return -1


@kernel(inline="always")
def _link_com(mt, poses, b):
    """Centre of mass of mass-table row b (0 the base, i + 1 link i) in the base frame."""
    lx = mt[b, 1]
    ly = mt[b, 2]
    lz = mt[b, 3]
    return (poses[b, 0, 0] * lx + poses[b, 0, 1] * ly + poses[b, 0, 2] * lz + poses[b, 0, 3],
            poses[b, 1, 0] * lx + poses[b, 1, 1] * ly + poses[b, 1, 2] * lz + poses[b, 1, 3],
            poses[b, 2, 0] * lx + poses[b, 2, 1] * ly + poses[b, 2, 2] * lz + poses[b, 2, 3])


@kernel()
def com_point(mt, poses):
    """(x, y, z, total mass) of the whole robot, base frame, from all frame poses."""
    total = 0.0
    cx = 0.0
    cy = 0.0
    cz = 0.0
    for b in range(mt.shape[0]):  # row 0 = base, row i + 1 = link i: the same rows as in poses
        m = mt[b, 0]
        if m == 0.0:
            continue
        px, py, pz = _link_com(mt, poses, b)
        cx += m * px
        cy += m * py
        cz += m * pz
        total += m
    return cx / total, cy / total, cz / total, total


@kernel()
def com_core(mt, poses, com):
    """Centre of mass (3,) from all frame poses; returns the total mass."""
    com[0], com[1], com[2], total = com_point(mt, poses)
    return total


@kernel()
def com_into(q, kin, mt, poses, com):
    """Centre of mass (3,) in the base frame; `poses` (m, 4, 4) is workspace."""
    st = check_q(q, kin)
    if st != -1:
        return st
    fk_all_core(q, kin, poses)
    com_core(mt, poses, com)
    return -1


@kernel()
def com_with_jacobian_core(kin, mt, poses, com, Jc):
    """Centre of mass (3,) and its Jacobian (3, nq) in the base frame, from all frame poses;
    returns the total mass.

    Column i is z_i × (c_i − p_i) · M_i / total, with M_i and c_i the mass and centre of mass of
    everything joint i moves: the mass-weighted sums are gathered leaves first (children have
    larger indices), so each link is visited once instead of once per ancestor, and the roots'
    sums give the COM. A follower's term is added to its leader's column (`_add_followers_com`)."""
    n = int(kin[0, HDR_N])
    nq = int(kin[0, HDR_NQ])
    total = mt[0, 0]
    sx = 0.0
    sy = 0.0
    sz = 0.0
    if total != 0.0:
        px, py, pz = _link_com(mt, poses, 0)
        sx = total * px
        sy = total * py
        sz = total * pz
    for c in range(nq):
        Jc[0, c] = 0.0
        Jc[1, c] = 0.0
        Jc[2, c] = 0.0
    for i in range(nq, n):   # a follower's link joins the sums of the nearest driven joint above it
        b = i + 1
        m = mt[b, 0]
        total += m
        if m == 0.0:
            continue
        px, py, pz = _link_com(mt, poses, b)
        a = int(kin[b, K_PARENT])
        while a >= nq:
            a = int(kin[a + 1, K_PARENT])
        if a >= 0:
            Jc[0, a] += m * px
            Jc[1, a] += m * py
            Jc[2, a] += m * pz
        else:
            sx += m * px
            sy += m * py
            sz += m * pz
    for i in range(nq - 1, -1, -1):  # Jc[:, i] ← Σ m·p over the subtree of joint i
        b = i + 1
        m = mt[b, 0]
        if m != 0.0:
            px, py, pz = _link_com(mt, poses, b)
            Jc[0, i] += m * px
            Jc[1, i] += m * py
            Jc[2, i] += m * pz
        total += m
        parent = int(kin[b, K_PARENT])
        if parent >= 0:
            Jc[0, parent] += Jc[0, i]
            Jc[1, parent] += Jc[1, i]
            Jc[2, parent] += Jc[2, i]
        else:
            sx += Jc[0, i]
            sy += Jc[1, i]
            sz += Jc[2, i]
    inv_total = 1.0 / total
    for i in range(nq):
        j = i + 1
        zx, zy, zz = _world_axis(kin, poses, j)
        msub = mt[j, MT_SUBTREE]
        dx = Jc[0, i] - msub * poses[j, 0, 3]
        dy = Jc[1, i] - msub * poses[j, 1, 3]
        dz = Jc[2, i] - msub * poses[j, 2, 3]
        Jc[0, i] = (zy * dz - zz * dy) * inv_total
        Jc[1, i] = (zz * dx - zx * dz) * inv_total
        Jc[2, i] = (zx * dy - zy * dx) * inv_total
    _add_followers_com(kin, mt, poses, Jc, inv_total)
    com[0] = sx * inv_total
    com[1] = sy * inv_total
    com[2] = sz * inv_total
    return total


@kernel(inline="always")
def _add_followers_com(kin, mt, poses, Jc, inv_total):
    """Each follower turns its subtree (its link and the followers beyond it) as its leader turns:
    its column, times its multiplier, joins the leader's. Followers are few (a gripper's fingers,
    a linked neck): their subtrees are found by walking up from each, with no scratch columns."""
    n = int(kin[0, HDR_N])
    for i in range(int(kin[0, HDR_NQ]), n):
        j = i + 1
        msub = mt[j, MT_SUBTREE]
        if msub == 0.0:
            continue
        gx = 0.0
        gy = 0.0
        gz = 0.0
        for g in range(i, n):
            a = g
            while a > i:
                a = int(kin[a + 1, K_PARENT])
            m = mt[g + 1, 0]
            if a == i and m != 0.0:
                px, py, pz = _link_com(mt, poses, g + 1)
                gx += m * px
                gy += m * py
                gz += m * pz
        zx, zy, zz = _world_axis(kin, poses, j)
        dx = gx - msub * poses[j, 0, 3]
        dy = gy - msub * poses[j, 1, 3]
        dz = gz - msub * poses[j, 2, 3]
        for lead in range(2):
            c = int(kin[j, K_LEADER]) if lead == 0 else int(kin[j, K_LEADER2])
            w = (kin[j, K_MUL] if lead == 0 else kin[j, K_MUL2]) * inv_total
            Jc[0, c] += (zy * dz - zz * dy) * w
            Jc[1, c] += (zz * dx - zx * dz) * w
            Jc[2, c] += (zx * dy - zy * dx) * w


@kernel()
def com_jacobian_into(q, kin, mt, poses, com, Jc):
    """Centre of mass (3,) and its Jacobian (3, n), base frame."""
    st = check_q(q, kin)
    if st != -1:
        return st
    fk_all_core(q, kin, poses)
    com_with_jacobian_core(kin, mt, poses, com, Jc)
    return -1


def empty_poses(n_frames: int) -> np.ndarray:
    """Workspace for the kernels that need all frame poses."""
    return np.empty((n_frames, 4, 4))
