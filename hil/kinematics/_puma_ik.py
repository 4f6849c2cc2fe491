"""Closed-form inverse kinematics of the PUMA 560 in the DH convention of Zhao et al. 2007.

With T(i-1,i) = Rz(θi) Tz(di) Tx(ai) Rx(αi), α = (−90, 0, 90, −90, 90, 0)°, a = (0, a2, a3, 0, 0, 0),
d = (0, d2, 0, d4, 0, 0), the wrist centre W (origin of DH frames 4–6) satisfies, in DH frame 1
(after Rz(θ1) Rx(−90°)):

    W1 = Rz(θ2) · (a2 + a3 c3 + d4 s3,  a3 s3 − d4 c3,  d2)

and in the base frame z = −W1y, (x, y) = Rz(θ1) · (W1x, d2). Hence:

- shoulder: W1x = ±sqrt(x² + y² − d2²)  (branch "right" for +, "left" for −),
  θ1 = atan2(y, x) − atan2(d2, W1x);
- elbow: a3 c3 + d4 s3 = (r² − a2² − a3² − d4²) / (2 a2) with r² = W1x² + z², i.e.
  sin(θ3 + φ) = that / L, L = hypot(a3, d4), φ = atan2(a3, d4): two solutions;
- θ2 = atan2(W1y, W1x) − atan2(a3 s3 − d4 c3, a2 + a3 c3 + d4 s3);
- wrist: R36 = R03ᵀ R = Rz(θ4) Ry(θ5) Rz(θ6) (ZYZ Euler angles), two solutions (θ5 ≷ 0).

Branch index b = 4·shoulder + 2·elbow + wrist, each bit 0 for the first named option:
shoulder right/left, elbow up/down, wrist noflip/flip, whatever the target: "up" means the elbow
lies above the line from the shoulder to the wrist centre (decided geometrically per solution,
which then goes to its slot), "flip" means θ5 < 0.
"""

from __future__ import annotations

import math

from hil._jit import kernel
from hil.kinematics.kernels import _sincos
from hil.kinematics._lm import rigid_status

# reason bits, as returned by the kernel
TOO_FAR = 1
TOO_CLOSE = 2
BELOW_FLOOR = 4
NOT_FINITE = 8
INNER_HOLE = 16
NOT_RIGID = 32

_TWO_PI = 2.0 * math.pi


@kernel(inline="always")
def _wrap_into(x, lo, hi, near):
    """x + 2πk inside [lo, hi] nearest `near`, and True; if no k fits, x's principal value in
    [−π, π) and False. Only the k that land inside the range are visited (one or two here)."""
    k_lo = math.ceil((lo - 1e-12 - x) / _TWO_PI)
    k_hi = math.floor((hi + 1e-12 - x) / _TWO_PI)
    if k_lo > k_hi:
        return x - _TWO_PI * math.floor((x + math.pi) / _TWO_PI), False
    best = x + k_lo * _TWO_PI
    bestd = abs(best - near)
    k = k_lo + 1.0
    while k <= k_hi:
        v = x + k * _TWO_PI
        d = abs(v - near)
        if d < bestd:
            bestd = d
            best = v
        k += 1.0
    return min(max(best, lo), hi), True


@kernel()
def puma_ik_kernel(T, params, q_near, Q):
    """All 8 branches for the wrist-frame target T (4, 4).

    params: (a2, a3, d2, d4, floor_z, lower (6), upper (6)). Writes Q (8, 6). Returns
    `reasons | up_mask << 8 | valid_mask << 16 | in_limits_mask << 24`, bit b of each mask for
    branch b (one int instead of a flags array saves an allocation per call): reasons is 0 when
    some branch is valid, else a bit set (NOT_RIGID and NOT_FINITE mean the target itself is
    bad); up_mask marks the valid rows of the elbow-up slot; in_limits_mask those valid and in range.
    """
    a2 = params[0]
    a3 = params[1]
    d2 = params[2]
    d4 = params[3]
    floor_z = params[4]
    lower = params[5:11]
    upper = params[11:17]
    up_mask = 0
    valid_mask = 0
    in_mask = 0
    for b in range(8):
        for j in range(6):
            Q[b, j] = 0.0
    st = rigid_status(T)
    if st != 0:
        return NOT_FINITE if st == 1 else NOT_RIGID
    x = T[0, 3]
    y = T[1, 3]
    z = T[2, 3]
    reasons = 0
    if z < floor_z:
        return BELOW_FLOOR
    rho2 = x * x + y * y
    disc = rho2 - d2 * d2
    if disc < -1e-12:
        return TOO_CLOSE
    w1x_abs = math.sqrt(max(disc, 0.0))
    L = math.hypot(a3, d4)
    phi = math.atan2(a3, d4)
    azimuth = math.atan2(y, x)
    w1y = -z
    for sh in range(2):
        w1x = w1x_abs if sh == 0 else -w1x_abs
        th1 = azimuth - math.atan2(d2, w1x)
        s1, c1 = _sincos(th1)
        w_angle = math.atan2(w1y, w1x)
        r2 = w1x * w1x + w1y * w1y
        s = (r2 - a2 * a2 - a3 * a3 - d4 * d4) / (2.0 * a2 * L)
        if s > 1.0 + 1e-10:
            reasons |= TOO_FAR
            continue
        if s < -1.0 - 1e-10:
            reasons |= INNER_HOLE
            continue
        s = min(1.0, max(-1.0, s))
        base_angle = math.asin(s)
        slot_up = 0
        for el in range(2):
            th3 = (base_angle if el == 0 else math.pi - base_angle) - phi
            s3, c3 = _sincos(th3)
            u = a2 + a3 * c3 + d4 * s3
            v = a3 * s3 - d4 * c3
            th2 = w_angle - math.atan2(v, u)
            # Is the elbow above the shoulder-wrist line in the base frame (base z = -y1,
            # horizontal = x1 along the arm)? With E = a2 (c2, s2) and W = |W| (cos α, sin α) in
            # frame 1, (Wx, Wz) × (Ex, Ez) = a2 |W| sin(α − θ2) = a2 |W| sin(atan2(v, u)), whose
            # sign is v's: no trigonometry needed.
            up = v > 0.0 if w1x >= 0.0 else v < 0.0
            # rows in the fixed order of BRANCH_LABELS: the elbow-up solution in slot 0, the other
            # in slot 1 (at the edge of reach both are one pose and share nothing but the slots)
            if el == 0:
                slot_up = 0 if up else 1
            slot = slot_up if el == 0 else 1 - slot_up
            # R03 = Rz(th1) Rx(-90) Rz(th2 + th3) Rx(90)
            s23, c23 = _sincos(th2 + th3)
            # columns of R03 written out: R01 = [[c1, 0, -s1], [s1, 0, c1], [0, -1, 0]]
            # R13 = Rz(th23) Rx(90) = [[c23, 0, s23], [s23, 0, -c23], [0, 1, 0]]
            r00 = c1 * c23
            r01 = -s1
            r02 = c1 * s23
            r10 = s1 * c23
            r11 = c1
            r12 = s1 * s23
            r20 = -s23
            r21 = 0.0
            r22 = c23
            # R36 = R03^T R, as scalars (no allocation in the loop)
            m00 = r00 * T[0, 0] + r10 * T[1, 0] + r20 * T[2, 0]
            m01 = r00 * T[0, 1] + r10 * T[1, 1] + r20 * T[2, 1]
            m02 = r00 * T[0, 2] + r10 * T[1, 2] + r20 * T[2, 2]
            m10 = r01 * T[0, 0] + r11 * T[1, 0] + r21 * T[2, 0]
            m11 = r01 * T[0, 1] + r11 * T[1, 1] + r21 * T[2, 1]
            m12 = r01 * T[0, 2] + r11 * T[1, 2] + r21 * T[2, 2]
            m20 = r02 * T[0, 0] + r12 * T[1, 0] + r22 * T[2, 0]
            m21 = r02 * T[0, 1] + r12 * T[1, 1] + r22 * T[2, 1]
            m22 = r02 * T[0, 2] + r12 * T[1, 2] + r22 * T[2, 2]
            s5 = math.hypot(m02, m12)
            # the flipped wrist is (θ4 ± π, −θ5, θ6 ± π): atan2(−y, −x) = atan2(y, x) ∓ π
            th5_nf = math.atan2(s5, m22)
            th4_nf = math.atan2(m12, m02)
            th6_nf = math.atan2(m21, -m20)
            for fl in range(2):
                b = 4 * sh + 2 * slot + fl
                if s5 < 1e-9:
                    # wrist singular (θ5 = 0): only θ4 + θ6 is defined; keep θ4 from q_near
                    th4 = q_near[3]
                    th5 = 0.0
                    th6 = math.atan2(m10, m00) - th4
                    if m22 < 0.0:  # θ5 = π: Rz(θ4) Ry(π) Rz(θ6) depends on θ4 − θ6 only
                        th5 = math.pi
                        th6 = th4 - math.atan2(-m10, -m00)
                elif fl == 0:
                    th5 = th5_nf
                    th4 = th4_nf
                    th6 = th6_nf
                else:
                    th5 = -th5_nf
                    th4 = th4_nf - math.pi if th4_nf > 0.0 else th4_nf + math.pi
                    th6 = th6_nf - math.pi if th6_nf > 0.0 else th6_nf + math.pi
                Q[b, 0] = th1
                Q[b, 1] = th2
                Q[b, 2] = th3
                Q[b, 3] = th4
                Q[b, 4] = th5
                Q[b, 5] = th6
                valid_mask |= 1 << b
                if slot == 0:
                    up_mask |= 1 << b
                ok = True
                for j in range(6):
                    w, found = _wrap_into(Q[b, j], lower[j], upper[j], q_near[j])
                    Q[b, j] = w
                    ok = ok and found
                if ok:
                    in_mask |= 1 << b
    if valid_mask:
        return (up_mask << 8) | (valid_mask << 16) | (in_mask << 24)
    return reasons if reasons != 0 else TOO_FAR
