"""Prioritised Levenberg–Marquardt IK kernel (Sugihara 2011 damping), for any tree model.

One step for priority level l, with J_l its stacked task rows, e_l their errors, W_l their weights
and P the null-space projector of the levels above (P = I for the first):

    (P J_lᵀ W_l J_l P + (E_l + w̄) I) x = P J_lᵀ W_l (e_l − J_l Δq),    Δq += P x,
    E_l = ½ e_lᵀ W_l e_l,   P ← P − (J_l P)ᵀ (J_l P (J_l P)ᵀ + λ I)⁻¹ (J_l P)

so a level only moves in what the levels above leave free, and the damping E_l + w̄ makes the
step shrink gracefully when the level cannot be met (unreachable, singular, at a limit) instead of
blowing up. A step is kept only if it does not make the cost worse in lexicographic order (level
1 first); otherwise w̄ is raised tenfold and the step recomputed, so the iteration never
oscillates; after each accepted step w̄ shrinks tenfold (down to 1e-6 of its nominal value), so
near-singular but reachable targets still converge fast. Joints at a limit whose step would push them further out are locked for the step;
every iterate is clamped into the ranges.

Tasks (rows of `tasks`, width TASK_W): frame index (−1 = centre of mass), reference frame index
(0 = base), level (0 = highest), ε (largest error norm used per step, 0 = none: limits how fast a
newly added target is pulled in), mask (6: x y z rx ry rz, in the reference frame), weight (6).
`targets[t]` is the target pose of the frame in the reference frame (for the centre of mass, the
translation is the target point). Units: metres, radians.
"""

from __future__ import annotations

import math

import numpy as np

from hil._jit import kernel
from hil.kinematics.kernels import HDR_M, HDR_NQ, com_with_jacobian_core, fk_all_core, jacobian_core

TASK_W = 16
T_FRAME = 0
T_REF = 1
T_LEVEL = 2
T_EPS = 3
T_MASK = 4
T_WEIGHT = 10

# Layout of the solver's setup vector: these six numbers, then the joints' lower and upper
# bounds (n each), then the task table (ntask × TASK_W), row by row.
SETUP_MAX_ITER = 0
SETUP_TOL = 1
SETUP_WBAR = 2
SETUP_LAMBDA = 3  # damping of the null-space projectors
SETUP_NLEV = 4
SETUP_NTASK = 5
SETUP_HEAD = 6

# status codes
OK = 0
STALLED = 1
MAX_ITER = 2
NOT_FINITE = 3
BAD_INPUT = 4


@kernel(inline="always")
def _rot_log(r00, r01, r02, r10, r11, r12, r20, r21, r22):
    """Rotation vector (angle · axis) of a rotation matrix, robust near 0 and π."""
    wx = 0.5 * (r21 - r12)
    wy = 0.5 * (r02 - r20)
    wz = 0.5 * (r10 - r01)
    s = math.sqrt(wx * wx + wy * wy + wz * wz)
    c = 0.5 * (r00 + r11 + r22 - 1.0)
    angle = math.atan2(s, c)
    if s > 1e-7:
        k = angle / s
        return wx * k, wy * k, wz * k
    if c > 0.0:  # angle ≈ 0: log ≈ w
        return wx, wy, wz
    # angle ≈ π: axis from the diagonal of (R + I) / 2 = a aᵀ
    ax = math.sqrt(max(0.0, 0.5 * (r00 + 1.0)))
    ay = math.sqrt(max(0.0, 0.5 * (r11 + 1.0)))
    az = math.sqrt(max(0.0, 0.5 * (r22 + 1.0)))
    if ax >= ay and ax >= az:
        ay = math.copysign(ay, r01 + r10)
        az = math.copysign(az, r02 + r20)
    elif ay >= az:
        ax = math.copysign(ax, r01 + r10)
        az = math.copysign(az, r12 + r21)
    else:
        ax = math.copysign(ax, r02 + r20)
        ay = math.copysign(ay, r12 + r21)
    n = math.sqrt(ax * ax + ay * ay + az * az)
    return ax / n * angle, ay / n * angle, az / n * angle


@kernel()
def _evaluate(q, kin, mt, tasks, targets, poses, Jf, Jr, Jc, com, Jrows, erows, wrows, lrows, costs):
    """Fill the stacked rows (Jacobian in the reference frame, error, weight, level) of all active
    task components at q; costs[l] = ½ Σ w e² of level l. Returns the number of rows."""
    n = int(kin[0, HDR_NQ])
    fk_all_core(q, kin, poses)
    for lv in range(costs.shape[0]):
        costs[lv] = 0.0
    nrow = 0
    for t in range(tasks.shape[0]):
        f = int(tasks[t, T_FRAME])
        rf = int(tasks[t, T_REF])
        lev = int(tasks[t, T_LEVEL])
        # reference frame pose and Jacobian (the base, rf = 0, is fixed: no Jacobian needed)
        if rf != 0:
            jacobian_core(kin, rf, poses, Jr)
        R00 = poses[rf, 0, 0]
        R01 = poses[rf, 0, 1]
        R02 = poses[rf, 0, 2]
        R10 = poses[rf, 1, 0]
        R11 = poses[rf, 1, 1]
        R12 = poses[rf, 1, 2]
        R20 = poses[rf, 2, 0]
        R21 = poses[rf, 2, 1]
        R22 = poses[rf, 2, 2]
        prx = poses[rf, 0, 3]
        pry = poses[rf, 1, 3]
        prz = poses[rf, 2, 3]
        # In the base frame, a full pose task's six rows are its frame's Jacobian and a centre-of-mass
        # task's x y z rows the COM Jacobian: written in place, not copied (a copy per task and iteration)
        xyz = tasks[t, T_MASK] != 0.0 and tasks[t, T_MASK + 1] != 0.0 and tasks[t, T_MASK + 2] != 0.0
        if f >= 0:
            in_place = (rf == 0 and xyz and tasks[t, T_MASK + 3] != 0.0 and tasks[t, T_MASK + 4] != 0.0
                        and tasks[t, T_MASK + 5] != 0.0)
        else:
            in_place = rf == 0 and xyz
        if f >= 0:
            jacobian_core(kin, f, poses, Jrows[nrow:nrow + 6] if in_place else Jf)
            px = poses[f, 0, 3]
            py = poses[f, 1, 3]
            pz = poses[f, 2, 3]
        else:
            com_with_jacobian_core(kin, mt, poses, com, Jrows[nrow:nrow + 3] if in_place else Jc)
            if not in_place:
                for c in range(n):
                    Jf[0, c] = Jc[0, c]
                    Jf[1, c] = Jc[1, c]
                    Jf[2, c] = Jc[2, c]
                    Jf[3, c] = 0.0
                    Jf[4, c] = 0.0
                    Jf[5, c] = 0.0
            px = com[0]
            py = com[1]
            pz = com[2]
        dx = px - prx
        dy = py - pry
        dz = pz - prz
        # position of the frame in the reference frame and its error there
        lx = R00 * dx + R10 * dy + R20 * dz
        ly = R01 * dx + R11 * dy + R21 * dz
        lz = R02 * dx + R12 * dy + R22 * dz
        e0 = targets[t, 0, 3] - lx
        e1 = targets[t, 1, 3] - ly
        e2 = targets[t, 2, 3] - lz
        e3 = 0.0
        e4 = 0.0
        e5 = 0.0
        if f >= 0 and (tasks[t, T_MASK + 3] != 0.0 or tasks[t, T_MASK + 4] != 0.0 or tasks[t, T_MASK + 5] != 0.0):
            # current rotation in the reference frame C = Rrᵀ Rf, error log(Rt Cᵀ)
            c00 = R00 * poses[f, 0, 0] + R10 * poses[f, 1, 0] + R20 * poses[f, 2, 0]
            c01 = R00 * poses[f, 0, 1] + R10 * poses[f, 1, 1] + R20 * poses[f, 2, 1]
            c02 = R00 * poses[f, 0, 2] + R10 * poses[f, 1, 2] + R20 * poses[f, 2, 2]
            c10 = R01 * poses[f, 0, 0] + R11 * poses[f, 1, 0] + R21 * poses[f, 2, 0]
            c11 = R01 * poses[f, 0, 1] + R11 * poses[f, 1, 1] + R21 * poses[f, 2, 1]
            c12 = R01 * poses[f, 0, 2] + R11 * poses[f, 1, 2] + R21 * poses[f, 2, 2]
            c20 = R02 * poses[f, 0, 0] + R12 * poses[f, 1, 0] + R22 * poses[f, 2, 0]
            c21 = R02 * poses[f, 0, 1] + R12 * poses[f, 1, 1] + R22 * poses[f, 2, 1]
            c22 = R02 * poses[f, 0, 2] + R12 * poses[f, 1, 2] + R22 * poses[f, 2, 2]
            T = targets
            m00 = T[t, 0, 0] * c00 + T[t, 0, 1] * c01 + T[t, 0, 2] * c02
            m01 = T[t, 0, 0] * c10 + T[t, 0, 1] * c11 + T[t, 0, 2] * c12
            m02 = T[t, 0, 0] * c20 + T[t, 0, 1] * c21 + T[t, 0, 2] * c22
            m10 = T[t, 1, 0] * c00 + T[t, 1, 1] * c01 + T[t, 1, 2] * c02
            m11 = T[t, 1, 0] * c10 + T[t, 1, 1] * c11 + T[t, 1, 2] * c12
            m12 = T[t, 1, 0] * c20 + T[t, 1, 1] * c21 + T[t, 1, 2] * c22
            m20 = T[t, 2, 0] * c00 + T[t, 2, 1] * c01 + T[t, 2, 2] * c02
            m21 = T[t, 2, 0] * c10 + T[t, 2, 1] * c11 + T[t, 2, 2] * c12
            m22 = T[t, 2, 0] * c20 + T[t, 2, 1] * c21 + T[t, 2, 2] * c22
            e3, e4, e5 = _rot_log(m00, m01, m02, m10, m11, m12, m20, m21, m22)
        err = (e0, e1, e2, e3, e4, e5)
        for k in range(6):
            if tasks[t, T_MASK + k] == 0.0:
                continue
            w = tasks[t, T_WEIGHT + k]
            e = err[k]
            costs[lev] += 0.5 * w * e * e
            erows[nrow] = e
            wrows[nrow] = w
            lrows[nrow] = lev
            # row k of the relative Jacobian in the reference frame
            if rf == 0:
                if not in_place:
                    for c in range(n):
                        Jrows[nrow, c] = Jf[k, c]
                nrow += 1
                continue
            for c in range(n):
                wrx = Jr[3, c]
                wry = Jr[4, c]
                wrz = Jr[5, c]
                if k < 3:
                    vx = Jf[0, c] - Jr[0, c] - (wry * dz - wrz * dy)
                    vy = Jf[1, c] - Jr[1, c] - (wrz * dx - wrx * dz)
                    vz = Jf[2, c] - Jr[2, c] - (wrx * dy - wry * dx)
                else:
                    vx = Jf[3, c] - wrx
                    vy = Jf[4, c] - wry
                    vz = Jf[5, c] - wrz
                kk = k % 3
                if kk == 0:
                    Jrows[nrow, c] = R00 * vx + R10 * vy + R20 * vz
                elif kk == 1:
                    Jrows[nrow, c] = R01 * vx + R11 * vy + R21 * vz
                else:
                    Jrows[nrow, c] = R02 * vx + R12 * vy + R22 * vz
            nrow += 1
    return nrow


@kernel()
def rigid_status(T):
    """0 for a proper rigid transform (4, 4); 1 non-finite, 2 bad last row, 3 not orthonormal
    (tolerance 1e-6), 4 a reflection."""
    for r in range(4):
        for c in range(4):
            v = T[r, c]
            if not (v - v == 0.0):
                return 1
    if T[3, 0] != 0.0 or T[3, 1] != 0.0 or T[3, 2] != 0.0 or T[3, 3] != 1.0:
        return 2
    for i in range(3):
        for j in range(3):
            d = T[i, 0] * T[j, 0] + T[i, 1] * T[j, 1] + T[i, 2] * T[j, 2]
            if abs(d - (1.0 if i == j else 0.0)) > 1e-6:
                return 3
    det = (T[0, 0] * (T[1, 1] * T[2, 2] - T[1, 2] * T[2, 1]) - T[0, 1] * (T[1, 0] * T[2, 2] - T[1, 2] * T[2, 0])
           + T[0, 2] * (T[1, 0] * T[2, 1] - T[1, 1] * T[2, 0]))
    if det < 0.0:
        return 4
    return 0


@kernel()
def set_pose_target(targets, k, T):
    """targets[k] = T (4, 4) if T is a proper rigid transform; returns `rigid_status(T)`, or 5 if T
    is not 4 × 4."""
    if T.shape[0] != 4 or T.shape[1] != 4:
        return 5
    st = rigid_status(T)
    if st == 0:
        for r in range(4):
            for c in range(4):
                targets[k, r, c] = T[r, c]
    return st


@kernel()
def set_point_target(targets, k, p):
    """targets[k]'s translation = p (3,) if finite; returns 0, 1 for a non-finite p, 2 if p is not (3,)."""
    if p.shape[0] != 3:
        return 2
    for i in range(3):
        v = p[i]
        if not (v - v == 0.0):
            return 1
    for i in range(3):
        targets[k, i, 3] = p[i]
    return 0


@kernel()
def _chol_factor(A, L, n):
    """Cholesky factor of the symmetric positive definite A (n, n), from its lower triangle; False
    if A is not positive definite.

    L keeps the factor's strict lower triangle and, on its diagonal, the inverses
    of the factor's diagonal: multiplying instead of dividing takes the divisions off the
    critical path. At these sizes the time goes into chains of dependent additions, so four
    entries of a row are computed together (four independent chains sharing the loads of the
    row)."""
    for i in range(n):
        j = 0
        while j + 3 < i:
            s0 = A[i, j]
            s1 = A[i, j + 1]
            s2 = A[i, j + 2]
            s3 = A[i, j + 3]
            for k in range(j):
                lik = L[i, k]
                s0 -= lik * L[j, k]
                s1 -= lik * L[j + 1, k]
                s2 -= lik * L[j + 2, k]
                s3 -= lik * L[j + 3, k]
            # the four entries depend on each other through the 4×4 triangle at column j
            v0 = s0 * L[j, j]
            v1 = (s1 - v0 * L[j + 1, j]) * L[j + 1, j + 1]
            v2 = (s2 - v0 * L[j + 2, j] - v1 * L[j + 2, j + 1]) * L[j + 2, j + 2]
            v3 = (s3 - v0 * L[j + 3, j] - v1 * L[j + 3, j + 1] - v2 * L[j + 3, j + 2]) * L[j + 3, j + 3]
            L[i, j] = v0
            L[i, j + 1] = v1
            L[i, j + 2] = v2
            L[i, j + 3] = v3
            j += 4
        while j < i:
            s = A[i, j]
            for k in range(j):
                s -= L[i, k] * L[j, k]
            L[i, j] = s * L[j, j]
            j += 1
        s0 = A[i, i]
        s1 = 0.0
        k = 0
        while k + 1 < i:
            s0 -= L[i, k] * L[i, k]
            s1 -= L[i, k + 1] * L[i, k + 1]
            k += 2
        if k < i:
            s0 -= L[i, k] * L[i, k]
        s = s0 + s1
        if s <= 0.0 or not (s - s == 0.0):
            return False
        L[i, i] = 1.0 / math.sqrt(s)
    return True


@kernel()
def _chol_apply(L, b, x, n):
    """x = A⁻¹ b with L from `_chol_factor`."""
    for i in range(n):
        s = b[i]
        for k in range(i):
            s -= L[i, k] * x[k]
        x[i] = s * L[i, i]
    # Lᵀ x = z column by column: independent updates instead of a chain per entry
    for k in range(n - 1, -1, -1):
        xk = x[k] * L[k, k]
        x[k] = xk
        for i in range(k):
            x[i] -= L[k, i] * xk


@kernel()
def _chol_solve(A, b, x, L, n):
    """Solve A x = b for symmetric positive definite A (its lower triangle is read); False if not PD."""
    if not _chol_factor(A, L, n):
        return False
    _chol_apply(L, b, x, n)
    return True


@kernel(inline="always")
def _lex_better(new, old, nlev):
    """True when cost vector `new` is not worse than `old`, level 0 first (small slack)."""
    for lv in range(nlev):
        tol = 1e-15 + 1e-12 * old[lv]
        if new[lv] < old[lv] - tol:
            return True
        if new[lv] > old[lv] + tol:
            return False
    return True


@kernel(inline="always")
def _vec(buf, o, k):
    """The k values of buf from offset o, and the offset after them."""
    return buf[o:o + k], o + k


@kernel(inline="always")
def _mat(buf, o, rows, cols):
    """A (rows, cols) view of buf from offset o, and the offset after it."""
    return buf[o:o + rows * cols].reshape((rows, cols)), o + rows * cols


@kernel(inline="always")
def _mat3(buf, o, m):
    """An (m, 4, 4) view of buf from offset o, and the offset after it."""
    return buf[o:o + 16 * m].reshape((m, 4, 4)), o + 16 * m


@kernel(nogil=True)
def lm_solve(q0, kin, mt, setup, targets, q, info):
    """Prioritised LM IK from q0 into q. `setup`: see `SETUP_*` (one array rather than six:
    each array argument costs time to pass from Python).

    info (out): [status, iterations, residual of level 0 .. level nlev-1] (residual = sqrt(2 E)).
    """
    n = int(kin[0, HDR_NQ])
    m = int(kin[0, HDR_M])
    max_iter = int(setup[SETUP_MAX_ITER])
    tol = setup[SETUP_TOL]
    wbar = setup[SETUP_WBAR]
    lam = setup[SETUP_LAMBDA]
    nlev = int(setup[SETUP_NLEV])
    ntask = int(setup[SETUP_NTASK])
    lower = setup[SETUP_HEAD:SETUP_HEAD + n]
    upper = setup[SETUP_HEAD + n:SETUP_HEAD + 2 * n]
    tasks = setup[SETUP_HEAD + 2 * n:SETUP_HEAD + 2 * n + ntask * TASK_W].reshape((ntask, TASK_W))
    R = 6 * ntask
    # all work arrays are views into two buffers: two allocations per call instead of one per array
    buf = np.empty(16 * m + 15 * n + 3 + 2 * R * n + 4 * R + 2 * nlev + 3 * n * n + 6 * n + n * R
                   + 4 * R + 2 * R * R + R * n + 6)
    ibuf = np.empty(4 * R + 4 * ntask, dtype=np.int64)
    o = 0
    poses, o = _mat3(buf, o, m)
    Jf, o = _mat(buf, o, 6, n)
    Jr, o = _mat(buf, o, 6, n)
    Jc, o = _mat(buf, o, 3, n)
    com, o = _vec(buf, o, 3)
    Jrows, o = _mat(buf, o, R, n)
    Jrows2, o = _mat(buf, o, R, n)
    erows, o = _vec(buf, o, R)
    wrows, o = _vec(buf, o, R)
    erows2, o = _vec(buf, o, R)
    wrows2, o = _vec(buf, o, R)
    costs, o = _vec(buf, o, nlev)
    costs2, o = _vec(buf, o, nlev)
    P, o = _mat(buf, o, n, n)
    A, o = _mat(buf, o, n, n)
    Lw, o = _mat(buf, o, n, n)
    g, o = _vec(buf, o, n)
    x, o = _vec(buf, o, n)
    dq, o = _vec(buf, o, n)
    dq0, o = _vec(buf, o, n)
    qn, o = _vec(buf, o, n)
    free, o = _vec(buf, o, n)
    JpT, o = _mat(buf, o, n, R)  # this level's projected rows, transposed, for the null-space projector
    el, o = _vec(buf, o, R)
    y, o = _vec(buf, o, R)
    z, o = _vec(buf, o, R)
    wl, o = _vec(buf, o, R)
    Jl, o = _mat(buf, o, R, n)  # this level's rows, projected (and with locked joints zeroed)
    M, o = _mat(buf, o, R, R)
    LM, o = _mat(buf, o, R, R)
    wja, o = _vec(buf, o, 6)  # w_k J[k, a] for the rows k of one task
    lrows = ibuf[:R]
    lrows2 = ibuf[R:2 * R]
    row_lo = ibuf[2 * R:3 * R]  # the first and last nonzero column of each row of Jl
    row_hi = ibuf[3 * R:4 * R]
    # this level's rows task by task: rows grp_k0 ≤ k < grp_k1, columns grp_lo..grp_hi (their joint span)
    grp_k0 = ibuf[4 * R:4 * R + ntask]
    grp_k1 = ibuf[4 * R + ntask:4 * R + 2 * ntask]
    grp_lo = ibuf[4 * R + 2 * ntask:4 * R + 3 * ntask]
    grp_hi = ibuf[4 * R + 3 * ntask:]
    for c in range(n):
        for r in range(3):
            Jc[r, c] = 0.0
    for r in range(3):
        com[r] = 0.0
    for lv in range(nlev):
        costs[lv] = 0.0
        costs2[lv] = 0.0

    for i in range(n):
        v = q0[i]
        if not (v - v == 0.0):
            info[0] = NOT_FINITE
            info[1] = 0
            return NOT_FINITE
        q[i] = min(max(v, lower[i]), upper[i])
    nrow = _evaluate(q, kin, mt, tasks, targets, poses, Jf, Jr, Jc, com, Jrows, erows, wrows, lrows, costs)
    status = MAX_ITER
    it = 0
    scale = 1.0
    while it < max_iter:
        done = True
        for lv in range(nlev):
            if math.sqrt(2.0 * costs[lv]) > tol:
                done = False
        if done:
            status = OK
            break
        it += 1
        accepted = False
        for attempt in range(12):
            # joints at a limit are locked when the unconstrained step pushes them outwards
            for i in range(n):
                free[i] = 1.0
            for lock_pass in range(2):
                for i in range(n):
                    dq[i] = 0.0
                    dq0[i] = 0.0
                if nlev > 1:  # one level never projects (it is always the first)
                    for a in range(n):
                        for b in range(n):
                            P[a, b] = free[a] if a == b else 0.0
                first = True
                for lv in range(nlev):
                    # rows of this level, projected: Jp = J P, el = e − J dq (ε-limited per task)
                    r = 0
                    for k in range(nrow):
                        if lrows[k] != lv:
                            continue
                        s = erows[k]
                        if not first:  # before the first solved level dq is still zero
                            for c in range(n):
                                s -= Jrows[k, c] * dq[c]
                        el[r] = s
                        wl[r] = wrows[k]
                        if first:  # P is still diag(free): no product needed
                            for c in range(n):
                                Jl[r, c] = Jrows[k, c] * free[c]
                        else:
                            for c in range(n):
                                acc = 0.0
                                for d in range(n):
                                    acc += Jrows[k, d] * P[d, c]
                                Jl[r, c] = acc
                        lo = 0
                        while lo < n and Jl[r, lo] == 0.0:
                            lo += 1
                        hi = n - 1 if lo < n else -1  # an all-zero row spans nothing
                        while hi > lo and Jl[r, hi] == 0.0:
                            hi -= 1
                        row_lo[r] = lo
                        row_hi[r] = hi
                        r += 1
                    if r == 0:
                        continue
                    # ε: limit the error this level may ask for in one step; and the task groups
                    ri = 0
                    ngrp = 0
                    for t in range(ntask):
                        if int(tasks[t, T_LEVEL]) != lv:
                            continue
                        cnt = 0
                        for kk in range(6):
                            if tasks[t, T_MASK + kk] != 0.0:
                                cnt += 1
                        lo = n
                        hi = -1
                        for kk in range(cnt):
                            lo = min(lo, row_lo[ri + kk])
                            hi = max(hi, row_hi[ri + kk])
                        grp_k0[ngrp] = ri
                        grp_k1[ngrp] = ri + cnt
                        grp_lo[ngrp] = lo
                        grp_hi[ngrp] = hi
                        ngrp += 1
                        eps = tasks[t, T_EPS]
                        if eps > 0.0 and cnt > 0:
                            nrm = 0.0
                            for kk in range(cnt):
                                nrm += el[ri + kk] * el[ri + kk]
                            nrm = math.sqrt(nrm)
                            if nrm > eps:
                                for kk in range(cnt):
                                    el[ri + kk] *= eps / nrm
                        ri += cnt
                    damp = costs[lv] + wbar * scale
                    # A = Jpᵀ W Jp + damp I and g = Jpᵀ W el, task by task over the span of the
                    # task's nonzero columns only (a foot's rows touch just its leg's joints: a 3.5×
                    # saving on the humanoid's soles + COM problem); each entry sums over the task's
                    # rows and is stored once, not once per row, and for the usual 6- and 3-row tasks
                    # the sum is written out so that the compiler vectorises over the columns b
                    # (a loop over the rows does not vectorise)
                    for a in range(n):
                        g[a] = 0.0
                        for b in range(a + 1):
                            A[a, b] = 0.0
                    for gi in range(ngrp):
                        k0 = grp_k0[gi]
                        k1 = grp_k1[gi]
                        lo = grp_lo[gi]
                        for a in range(lo, grp_hi[gi] + 1):
                            ga = 0.0
                            for k in range(k0, k1):
                                v = wl[k] * Jl[k, a]
                                wja[k - k0] = v
                                ga += v * el[k]
                            g[a] += ga
                            if k1 - k0 == 6:
                                w0 = wja[0]
                                w1 = wja[1]
                                w2 = wja[2]
                                w3 = wja[3]
                                w4 = wja[4]
                                w5 = wja[5]
                                for b in range(lo, a + 1):
                                    A[a, b] += ((w0 * Jl[k0, b] + w1 * Jl[k0 + 1, b]) + (w2 * Jl[k0 + 2, b] + w3 * Jl[k0 + 3, b])
                                                + (w4 * Jl[k0 + 4, b] + w5 * Jl[k0 + 5, b]))
                            elif k1 - k0 == 3:
                                w0 = wja[0]
                                w1 = wja[1]
                                w2 = wja[2]
                                for b in range(lo, a + 1):
                                    A[a, b] += w0 * Jl[k0, b] + w1 * Jl[k0 + 1, b] + w2 * Jl[k0 + 2, b]
                            else:
                                for b in range(lo, a + 1):
                                    sab = 0.0
                                    for k in range(k0, k1):
                                        sab += wja[k - k0] * Jl[k, b]
                                    A[a, b] += sab
                    for a in range(n):  # the lower triangle is all the Cholesky reads
                        A[a, a] += damp
                    if not _chol_solve(A, g, x, Lw, n):
                        continue
                    was_first = first
                    first = False
                    for a in range(n):
                        if was_first:
                            dq[a] += free[a] * x[a]
                        else:
                            s = 0.0
                            for b in range(n):
                                s += P[a, b] * x[b]
                            dq[a] += s
                    if lv == 0:
                        for a in range(n):
                            dq0[a] = dq[a]
                    # P ← P − Jpᵀ (Jp Jpᵀ + λ I)⁻¹ Jp
                    if lv < nlev - 1:
                        for k in range(r):
                            for c in range(n):
                                JpT[c, k] = Jl[k, c]
                        for a in range(r):
                            for b in range(a + 1):
                                s = 0.0
                                for c in range(n):
                                    s += JpT[c, a] * JpT[c, b]
                                if a == b:
                                    s += lam
                                M[a, b] = s
                                M[b, a] = s
                        if not _chol_factor(M, LM, r):
                            continue  # λ > 0 keeps M positive definite; NaN rows would end up here
                        for c in range(n):
                            for a in range(r):
                                z[a] = JpT[c, a]
                            _chol_apply(LM, z, y, r)
                            # column c of M⁻¹ Jp is y; P[:, c] -= Jpᵀ y
                            for a in range(n):
                                s = 0.0
                                for k in range(r):
                                    s += JpT[a, k] * y[k]
                                P[a, c] -= s
                        # keep P symmetric against round-off
                        for a in range(n):
                            for b in range(a):
                                s = 0.5 * (P[a, b] + P[b, a])
                                P[a, b] = s
                                P[b, a] = s
                # lock only the joints that the top level's own step pushes out of range: a lower level
                # pressing a joint against its limit is clamped below instead, so that it can never
                # take a joint away from the top level (e.g. a knee-stretch preference at priority 2)
                changed = False
                for i in range(n):
                    if free[i] == 1.0:
                        if (q[i] <= lower[i] + 1e-12 and dq0[i] < 0.0) or (q[i] >= upper[i] - 1e-12 and dq0[i] > 0.0):
                            free[i] = 0.0
                            changed = True
                if not changed:
                    break
            step = 0.0
            for i in range(n):
                v = q[i] + dq[i] * free[i]
                qn[i] = min(max(v, lower[i]), upper[i])
                step += (qn[i] - q[i]) * (qn[i] - q[i])
            if not (step - step == 0.0):
                info[0] = NOT_FINITE
                info[1] = it
                return NOT_FINITE
            nrow2 = _evaluate(qn, kin, mt, tasks, targets, poses, Jf, Jr, Jc, com,
                              Jrows2, erows2, wrows2, lrows2, costs2)
            if _lex_better(costs2, costs, nlev):
                accepted = True
                for i in range(n):
                    q[i] = qn[i]
                # the trial's rows become the current ones: swap the buffers, copy nothing
                Jrows, Jrows2 = Jrows2, Jrows
                erows, erows2 = erows2, erows
                wrows, wrows2 = wrows2, wrows
                lrows, lrows2 = lrows2, lrows
                nrow = nrow2
                improved = False
                for lv in range(nlev):
                    if costs2[lv] < costs[lv] * (1.0 - 1e-9) - 1e-30:
                        improved = True
                    costs[lv] = costs2[lv]
                scale = max(scale * 0.01, 1e-6)
                if step < 1e-28 or not improved:
                    status = STALLED
                break
            scale *= 10.0
        if not accepted:
            status = STALLED
            break
        if status == STALLED:
            break
    if status == MAX_ITER:
        done = True
        for lv in range(nlev):
            if math.sqrt(2.0 * costs[lv]) > tol:
                done = False
        if done:
            status = OK
    info[0] = status
    info[1] = it
    for lv in range(nlev):
        info[2 + lv] = math.sqrt(2.0 * costs[lv])
    return status
