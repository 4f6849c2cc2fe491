"""The loop-time safety step as one Numba kernel: limits, rate, floor, workspace, self-collision,
balance. One call per control cycle (one dispatch, no allocation: all buffers come from outside).
Limits and rates are the driven joints' (q); the shapes are checked where `fk_all_core` puts
every link, a follower's (turned by its leader) included.

Flags (bit set returned by `safety_step`):
"""

from __future__ import annotations

import math

from hil._jit import kernel
from hil.kinematics.kernels import com_point, fk_all_core

LIMIT = 1          # a target was clamped into the joint range
RATE = 2           # a step was clamped to the velocity limit (or the ramp speed)
WORKSPACE = 4      # the wrist centre would leave the workspace: step rejected, command held
FLOOR = 8          # a link would go below the floor: step rejected, command held
COLLISION = 16     # two links' shapes would touch: step rejected, command held
BALANCE = 32       # the centre of mass would leave the support polygon: step rejected, command held
NONFINITE = 64     # the target was NaN/inf: command held
HELD = 128         # the command was held at the previous one (any rejecting check above)

FLAG_NAMES = {LIMIT: "joint limit", RATE: "velocity limit", WORKSPACE: "workspace", FLOOR: "floor",
              COLLISION: "self-collision", BALANCE: "balance", NONFINITE: "non-finite target", HELD: "held"}

# info slots written by safety_step
I_CLEARANCE = 0     # smallest clearance between two shapes (m), +inf if no pairs
I_PAIR = 1          # index of that pair
I_FLOOR = 2         # smallest height of a shape above the floor (m)
I_COM_MARGIN = 3    # signed distance of the COM inside the support polygon (m), +inf if unchecked
I_WS = 4            # index of the violated workspace bound, -1 none
I_STEP = 5          # largest |q_cmd − q_prev| (rad) of this step
I_TRACK = 6         # largest |q_cmd − q_meas| (rad)
I_TO_TARGET = 7     # largest |q_target − q_cmd| (rad): the ramp is done when this is small
INFO_LEN = 8

# the workspace and floor settings (`ws`, built once by SafetyChecker): slots
WS_KIND = 0         # WS_OFF, WS_PUMA (the PUMA wrist-centre bounds) or WS_SPHERE (a reach sphere)
WS_FRAME = 1        # the frame the workspace bounds (the wrist centre, or the tool frame)
WS_REACH = 2        # reach (m): a2 + d4 for the PUMA, the sphere's radius otherwise
WS_A3 = 3           # the PUMA's a3 (m)
WS_COS_LOWER = 4    # cos of the angle bounding x from below (the PUMA's 20°)
WS_FLOOR_Z = 5      # the floor's height (m)
WS_FLOOR_ON = 6     # 1: check the floor
WS_LEN = 7
WS_OFF, WS_PUMA, WS_SPHERE = 0.0, 1.0, 2.0

# the static balance settings (`bal`): slots
BAL_ON = 0          # 1: check the COM over the support polygon
BAL_SOLE_L = 1      # frame of the left sole
BAL_SOLE_R = 2      # frame of the right sole
BAL_HALF_LENGTH = 3  # a sole's half length (m, along its x)
BAL_HALF_WIDTH = 4  # a sole's half width (m, along its y)
BAL_MARGIN = 5      # how far inside the polygon the COM must stay (m)
BAL_CONTACT_TOL = 6  # the other sole counts as on the ground within this height (m)
BAL_LEN = 7

# the collision shapes' table (`caps`, one row per shape, built once by SafetyChecker): columns
C_LINK = 0          # the link (-1: the base)
C_P0 = 1            # a capsule's segment p0–p1 (3 + 3 columns), a box's centre (both ends)
C_P1 = 4
C_RADIUS = 7        # a capsule's radius (0 for a box)
C_KIND = 8          # SHAPE_CAPSULE or SHAPE_BOX
C_AXES = 9          # a box's axes in the link frame: rotation matrix, row-major (9 columns)
C_HALF = 18         # a box's half extents along its axes (3 columns)
C_PART = 21         # the part it bounds (a part's rows are consecutive: a mesh's box and capsules)
C_WIDTH = 22
SHAPE_CAPSULE, SHAPE_BOX = 0.0, 1.0
# `wpts` (one row per shape, filled per pose): the segment's ends in the base frame (6 columns),
# then a box's axes in the base frame (rotation matrix, row-major, 9 columns)
W_AXES = 6
W_WIDTH = 15
# the pairs the self-collision check measures (`pairs`, built once by SafetyChecker): columns
P_A = 0             # the two shapes (rows of the shape table)
P_B = 1
P_PARTS = 2         # the two parts they bound (the rows of one part pair are consecutive)
P_PAIRING = 3       # which of the parts' bounds they are (the rows of one pairing are consecutive)
P_WIDTH = 4


@kernel(inline="always")
def _seg_seg_dist2(p0x, p0y, p0z, p1x, p1y, p1z, q0x, q0y, q0z, q1x, q1y, q1z):
    """Squared distance between segments p0–p1 and q0–q1 (Ericson, Real-Time Collision Detection §5.1.9)."""
    d1x = p1x - p0x
    d1y = p1y - p0y
    d1z = p1z - p0z
    d2x = q1x - q0x
    d2y = q1y - q0y
    d2z = q1z - q0z
    rx = p0x - q0x
    ry = p0y - q0y
    rz = p0z - q0z
    a = d1x * d1x + d1y * d1y + d1z * d1z
    e = d2x * d2x + d2y * d2y + d2z * d2z
    f = d2x * rx + d2y * ry + d2z * rz
    eps = 1e-15
    if a <= eps and e <= eps:
        s = 0.0
        t = 0.0
    elif a <= eps:
        s = 0.0
        t = min(max(f / e, 0.0), 1.0)
    else:
        c = d1x * rx + d1y * ry + d1z * rz
        if e <= eps:
            t = 0.0
            s = min(max(-c / a, 0.0), 1.0)
        else:
            b = d1x * d2x + d1y * d2y + d1z * d2z
            denom = a * e - b * b
            if denom > eps:
                s = min(max((b * f - c * e) / denom, 0.0), 1.0)
            else:
                s = 0.0
            t = (b * s + f) / e
            if t < 0.0:
                t = 0.0
                s = min(max(-c / a, 0.0), 1.0)
            elif t > 1.0:
                t = 1.0
                s = min(max((b - c) / a, 0.0), 1.0)
    cx = p0x + d1x * s - (q0x + d2x * t)
    cy = p0y + d1y * s - (q0y + d2y * t)
    cz = p0z + d1z * s - (q0z + d2z * t)
    return cx * cx + cy * cy + cz * cz


@kernel()
def hull_margin(pts, npts, px, py):
    """Signed distance of (px, py) inside the convex hull of npts points (pts = x0, y0, x1, ...):
    positive inside, negative outside (for outside points, minus the distance to the nearest
    edge line). Gift wrapping. The one support-polygon margin: the loop's balance check and the
    walk planner's ZMP check both use it."""
    start = 0
    for i in range(1, npts):
        if pts[2 * i] < pts[2 * start] or (pts[2 * i] == pts[2 * start] and pts[2 * i + 1] < pts[2 * start + 1]):
            start = i
    margin = math.inf
    p = start
    for _ in range(npts + 1):
        q = (p + 1) % npts
        for r in range(npts):
            ax = pts[2 * q] - pts[2 * p]
            ay = pts[2 * q + 1] - pts[2 * p + 1]
            bx = pts[2 * r] - pts[2 * p]
            by = pts[2 * r + 1] - pts[2 * p + 1]
            cr = ax * by - ay * bx
            # near-collinear points count as on the edge (the farther one wins): the cross product's
            # sign for them is rounding (compiled, a fused multiply-add rounds it differently), and
            # taken as it comes it can send the wrap back along an edge, reversed
            tol = 1e-12 * (ax * ax + ay * ay + bx * bx + by * by)
            if cr < -tol or (cr <= tol and bx * bx + by * by > ax * ax + ay * ay):
                q = r
        # edge p -> q is a counter-clockwise hull edge: inside is to its left
        ex = pts[2 * q] - pts[2 * p]
        ey = pts[2 * q + 1] - pts[2 * p + 1]
        L = math.sqrt(ex * ex + ey * ey)
        if L > 1e-12:
            d = (ex * (py - pts[2 * p + 1]) - ey * (px - pts[2 * p])) / L
            if d < margin:
                margin = d
        p = q
        if p == start:
            break
    return margin


@kernel()
def _world_points(caps, poses, wpts):
    """Each shape in the base frame: its segment's ends (a box's centre twice) and a box's axes
    (wpts, see W_*)."""
    for i in range(caps.shape[0]):
        r = int(caps[i, C_LINK]) + 1
        for e in range(2):
            lx = caps[i, C_P0 + 3 * e]
            ly = caps[i, C_P0 + 1 + 3 * e]
            lz = caps[i, C_P0 + 2 + 3 * e]
            for d in range(3):
                wpts[i, 3 * e + d] = poses[r, d, 0] * lx + poses[r, d, 1] * ly + poses[r, d, 2] * lz + poses[r, d, 3]
        if caps[i, C_KIND] == SHAPE_BOX:
            for d in range(3):
                for c in range(3):
                    wpts[i, W_AXES + 3 * d + c] = (poses[r, d, 0] * caps[i, C_AXES + c]
                                                   + poses[r, d, 1] * caps[i, C_AXES + 3 + c]
                                                   + poses[r, d, 2] * caps[i, C_AXES + 6 + c])


@kernel()
def _box_local(wpts, b, x, y, z, axis):
    """Coordinate `axis` of world point (x, y, z) in box b's frame (centre, axes from wpts)."""
    dx = x - wpts[b, 0]
    dy = y - wpts[b, 1]
    dz = z - wpts[b, 2]
    return (wpts[b, W_AXES + axis] * dx + wpts[b, W_AXES + 3 + axis] * dy
            + wpts[b, W_AXES + 6 + axis] * dz)


@kernel()
def _outside2(u0, u1, u2, h0, h1, h2):
    """Squared distance from the box-frame point (u0, u1, u2) to the box of half extents h."""
    e0 = max(abs(u0) - h0, 0.0)
    e1 = max(abs(u1) - h1, 0.0)
    e2 = max(abs(u2) - h2, 0.0)
    return e0 * e0 + e1 * e1 + e2 * e2


@kernel()
def _slope(a0, a1, a2, d0, d1, d2, h0, h1, h2, t):
    """Derivative (halved) along t of the squared distance from a + t·d to the box."""
    s = 0.0
    u = a0 + t * d0
    if u > h0:
        s += (u - h0) * d0
    elif u < -h0:
        s += (u + h0) * d0
    u = a1 + t * d1
    if u > h1:
        s += (u - h1) * d1
    elif u < -h1:
        s += (u + h1) * d1
    u = a2 + t * d2
    if u > h2:
        s += (u - h2) * d2
    elif u < -h2:
        s += (u + h2) * d2
    return s


@kernel()
def _depth(a0, a1, a2, d0, d1, d2, h0, h1, h2, t):
    """How deep a + t·d lies inside the box (its distance to the nearest face; negative outside)."""
    return min(min(h0 - abs(a0 + t * d0), h1 - abs(a1 + t * d1)), h2 - abs(a2 + t * d2))


SEARCH_STEPS = 50   # bisections along a segment: its parameter to 1e-15 of its length


@kernel()
def capsule_box_clearance(caps, wpts, a, b):
    """Clearance (m) between capsule a and box b: their distance, or minus how deep the capsule
    reaches into the box. The squared distance from the segment to the box is convex along the
    segment: its minimum is where its slope changes sign (bisection); where the segment enters the
    box, the deepest of its points is found the same way (the depth is concave along it)."""
    a0 = _box_local(wpts, b, wpts[a, 0], wpts[a, 1], wpts[a, 2], 0)
    a1 = _box_local(wpts, b, wpts[a, 0], wpts[a, 1], wpts[a, 2], 1)
    a2 = _box_local(wpts, b, wpts[a, 0], wpts[a, 1], wpts[a, 2], 2)
    d0 = _box_local(wpts, b, wpts[a, 3], wpts[a, 4], wpts[a, 5], 0) - a0
    d1 = _box_local(wpts, b, wpts[a, 3], wpts[a, 4], wpts[a, 5], 1) - a1
    d2 = _box_local(wpts, b, wpts[a, 3], wpts[a, 4], wpts[a, 5], 2) - a2
    h0 = caps[b, C_HALF]
    h1 = caps[b, C_HALF + 1]
    h2 = caps[b, C_HALF + 2]
    lo = 0.0
    hi = 1.0
    if _slope(a0, a1, a2, d0, d1, d2, h0, h1, h2, 0.0) >= 0.0:
        hi = 0.0
    elif _slope(a0, a1, a2, d0, d1, d2, h0, h1, h2, 1.0) <= 0.0:
        lo = 1.0
    else:
        for _ in range(SEARCH_STEPS):
            mid = 0.5 * (lo + hi)
            if _slope(a0, a1, a2, d0, d1, d2, h0, h1, h2, mid) < 0.0:
                lo = mid
            else:
                hi = mid
    t = 0.5 * (lo + hi)
    dist2 = _outside2(a0 + t * d0, a1 + t * d1, a2 + t * d2, h0, h1, h2)
    if dist2 > 1e-20:   # apart by more than 1e-10 m: the bisection's last step cannot tell less
        return math.sqrt(dist2) - caps[a, C_RADIUS]
    # inside: the deepest point (golden-section search of the concave depth)
    lo = 0.0
    hi = 1.0
    for _ in range(SEARCH_STEPS):
        m1 = lo + 0.382 * (hi - lo)
        m2 = hi - 0.382 * (hi - lo)
        if _depth(a0, a1, a2, d0, d1, d2, h0, h1, h2, m1) < _depth(a0, a1, a2, d0, d1, d2, h0, h1, h2, m2):
            lo = m1
        else:
            hi = m2
    deepest = max(_depth(a0, a1, a2, d0, d1, d2, h0, h1, h2, 0.5 * (lo + hi)), 0.0)
    return -deepest - caps[a, C_RADIUS]


@kernel()
def _gap_along(caps, wpts, a, b, lx, ly, lz):
    """Separation of boxes a and b along direction (lx, ly, lz) (any length above 1e-9: normalised):
    the gap between their projections, negative where the projections overlap; -inf for a
    direction too short to tell."""
    n = math.sqrt(lx * lx + ly * ly + lz * lz)
    if n < 1e-9:
        return -math.inf
    lx /= n
    ly /= n
    lz /= n
    ra = 0.0
    rb = 0.0
    for c in range(3):
        ra += caps[a, C_HALF + c] * abs(wpts[a, W_AXES + c] * lx + wpts[a, W_AXES + 3 + c] * ly
                                        + wpts[a, W_AXES + 6 + c] * lz)
        rb += caps[b, C_HALF + c] * abs(wpts[b, W_AXES + c] * lx + wpts[b, W_AXES + 3 + c] * ly
                                        + wpts[b, W_AXES + 6 + c] * lz)
    centres = abs((wpts[b, 0] - wpts[a, 0]) * lx + (wpts[b, 1] - wpts[a, 1]) * ly + (wpts[b, 2] - wpts[a, 2]) * lz)
    return centres - ra - rb


@kernel()
def box_box_clearance(caps, wpts, a, b):
    """Clearance (m) between boxes a and b by the separating axes (each box's three axes and their
    nine cross products): the widest gap along one of them when they are apart (never more than
    their distance), minus the least overlap when they touch."""
    best = -math.inf
    for i in range(3):
        ax = wpts[a, W_AXES + i]
        ay = wpts[a, W_AXES + 3 + i]
        az = wpts[a, W_AXES + 6 + i]
        best = max(best, _gap_along(caps, wpts, a, b, ax, ay, az))
        bx = wpts[b, W_AXES + i]
        by = wpts[b, W_AXES + 3 + i]
        bz = wpts[b, W_AXES + 6 + i]
        best = max(best, _gap_along(caps, wpts, a, b, bx, by, bz))
        for j in range(3):
            cx = wpts[b, W_AXES + j]
            cy = wpts[b, W_AXES + 3 + j]
            cz = wpts[b, W_AXES + 6 + j]
            best = max(best, _gap_along(caps, wpts, a, b, ay * cz - az * cy, az * cx - ax * cz, ax * cy - ay * cx))
    return best


@kernel()
def pair_clearance(caps, wpts, a, b):
    """Clearance (m) between shapes a and b (capsules or boxes): their distance, negative when they
    overlap (how deep)."""
    box_a = caps[a, C_KIND] == SHAPE_BOX
    box_b = caps[b, C_KIND] == SHAPE_BOX
    if box_a and box_b:
        return box_box_clearance(caps, wpts, a, b)
    if box_b:
        return capsule_box_clearance(caps, wpts, a, b)
    if box_a:
        return capsule_box_clearance(caps, wpts, b, a)
    d2 = _seg_seg_dist2(wpts[a, 0], wpts[a, 1], wpts[a, 2], wpts[a, 3], wpts[a, 4], wpts[a, 5],
                        wpts[b, 0], wpts[b, 1], wpts[b, 2], wpts[b, 3], wpts[b, 4], wpts[b, 5])
    return math.sqrt(d2) - caps[a, C_RADIUS] - caps[b, C_RADIUS]


@kernel()
def lowest_part(caps, wpts):
    """Height (m, base frame z) of the lowest point of any part off the base (the pedestal stands on
    the floor by design): a part lies inside each of its bounds, so its lowest point is no lower
    than the highest of its bounds' lowest points (their rows are consecutive, C_PART)."""
    lowest = math.inf
    part = -1.0
    here = -math.inf
    for i in range(caps.shape[0]):
        if caps[i, C_PART] != part:
            if here > -math.inf:   # (-inf: the part had no bound off the base)
                lowest = min(lowest, here)
            part = caps[i, C_PART]
            here = -math.inf
        if caps[i, C_LINK] < 0.0:
            continue
        here = max(here, lowest_point(caps, wpts, i))
    if here > -math.inf:
        lowest = min(lowest, here)
    return lowest


@kernel()
def closest_parts(caps, pairs, wpts, info):
    """The clearance of the two parts that come closest (info's I_CLEARANCE), and the first row of
    their pair (I_PAIR). A part is bounded one way or more (a mesh: by its box, and by its
    capsules): it lies inside each bound, so two parts are apart by at least the widest clearance
    among their bounds' pairings, and each pairing's clearance is the least among its shapes'
    pairs. `pairs` rows (P_* columns) come grouped by part pair, then by pairing. A part pair
    whose pairings so far are already no closer than the closest found is left at that."""
    best = info[I_CLEARANCE]
    cur = -1
    pairing = -1
    first = 0
    widest = -math.inf       # the part pair's clearance so far: the widest of its pairings'
    least = math.inf         # the pairing's clearance so far: the least of its shapes' pairs'
    settled = False          # the part pair cannot be the closest
    for p in range(pairs.shape[0]):
        if pairs[p, P_PARTS] != cur or pairs[p, P_PAIRING] != pairing:
            if cur >= 0:
                widest = max(widest, least)
            if pairs[p, P_PARTS] != cur:
                if cur >= 0 and not settled and widest < best:
                    best = widest
                    info[I_PAIR] = first
                cur = pairs[p, P_PARTS]
                first = p
                widest = -math.inf
                settled = False
            pairing = pairs[p, P_PAIRING]
            least = math.inf
            settled = settled or widest >= best
        if settled:
            continue
        c = pair_clearance(caps, wpts, pairs[p, P_A], pairs[p, P_B])
        if c < least:
            least = c
    if cur >= 0:
        widest = max(widest, least)
        if not settled and widest < best:
            best = widest
            info[I_PAIR] = first
    info[I_CLEARANCE] = best


@kernel()
def lowest_point(caps, wpts, i):
    """Height (m, base frame z) of shape i's lowest point."""
    if caps[i, C_KIND] == SHAPE_BOX:
        return wpts[i, 2] - (caps[i, C_HALF] * abs(wpts[i, W_AXES + 6]) + caps[i, C_HALF + 1] * abs(wpts[i, W_AXES + 7])
                             + caps[i, C_HALF + 2] * abs(wpts[i, W_AXES + 8]))
    return min(wpts[i, 2], wpts[i, 5]) - caps[i, C_RADIUS]


@kernel()
def support_margin(mt, poses, bal, scratch):
    """Signed distance (m) of the centre of mass inside the support polygon, in the lower sole's
    frame (positive inside): the support sole's rectangle, plus the other sole's when it lies in the
    support sole's plane (double support). `poses` are all frames' poses in the base frame."""
    fl = int(bal[BAL_SOLE_L])
    fr = int(bal[BAL_SOLE_R])
    # support = the sole lower along the body's z axis; express everything in its frame
    s = fl if poses[fl, 2, 3] <= poses[fr, 2, 3] else fr
    o = fr if s == fl else fl
    # COM in the base frame
    cx, cy, cz, _ = com_point(mt, poses)
    # COM in the support sole frame
    dx = cx - poses[s, 0, 3]
    dy = cy - poses[s, 1, 3]
    dz = cz - poses[s, 2, 3]
    px = poses[s, 0, 0] * dx + poses[s, 1, 0] * dy + poses[s, 2, 0] * dz
    py = poses[s, 0, 1] * dx + poses[s, 1, 1] * dy + poses[s, 2, 1] * dz
    # support polygon: the support sole's rectangle, plus the other sole's when it is level with
    # it (double support); margin = signed distance of the COM inside their convex hull
    hl = bal[BAL_HALF_LENGTH]
    hw = bal[BAL_HALF_WIDTH]
    npts = 0
    for sx_ in (-1.0, 1.0):
        for sy_ in (-1.0, 1.0):
            scratch[2 * npts] = sx_ * hl
            scratch[2 * npts + 1] = sy_ * hw
            npts += 1
    ox = poses[o, 0, 3] - poses[s, 0, 3]
    oy = poses[o, 1, 3] - poses[s, 1, 3]
    oz = poses[o, 2, 3] - poses[s, 2, 3]
    ocx = poses[s, 0, 0] * ox + poses[s, 1, 0] * oy + poses[s, 2, 0] * oz
    ocy = poses[s, 0, 1] * ox + poses[s, 1, 1] * oy + poses[s, 2, 1] * oz
    ocz = poses[s, 0, 2] * ox + poses[s, 1, 2] * oy + poses[s, 2, 2] * oz
    if abs(ocz) < bal[BAL_CONTACT_TOL]:
        # the other sole's x and y axes in the support frame
        axx = poses[s, 0, 0] * poses[o, 0, 0] + poses[s, 1, 0] * poses[o, 1, 0] + poses[s, 2, 0] * poses[o, 2, 0]
        axy = poses[s, 0, 1] * poses[o, 0, 0] + poses[s, 1, 1] * poses[o, 1, 0] + poses[s, 2, 1] * poses[o, 2, 0]
        ayx = poses[s, 0, 0] * poses[o, 0, 1] + poses[s, 1, 0] * poses[o, 1, 1] + poses[s, 2, 0] * poses[o, 2, 1]
        ayy = poses[s, 0, 1] * poses[o, 0, 1] + poses[s, 1, 1] * poses[o, 1, 1] + poses[s, 2, 1] * poses[o, 2, 1]
        for sx_ in (-1.0, 1.0):
            for sy_ in (-1.0, 1.0):
                scratch[2 * npts] = ocx + sx_ * hl * axx + sy_ * hw * ayx
                scratch[2 * npts + 1] = ocy + sx_ * hl * axy + sy_ * hw * ayy
                npts += 1
    return hull_margin(scratch, npts, px, py)


@kernel()
def check_pose_core(q, sag, kin, mt, caps, pairs, ws, bal, poses, wpts, info, scratch, q_loaded):
    """Checks at q (no clamping): returns WORKSPACE | FLOOR | COLLISION | BALANCE bits; fills info's
    pose slots (I_CLEARANCE to I_WS; each check left out keeps its "unchecked" value). `ws` and `bal`
    hold the settings in the WS_* and BAL_* slots.

    `sag` (n,): the compliance compensation inside q (zeros: none). Soft servos under load stand
    near q − sag, not at q: a pose whose balance fails at q passes when it holds at q − sag (on a
    kit with soft hip rolls and its feet apart, the compensation's targets lift a sole of the
    unloaded pose while the loaded robot stands on both). `q_loaded` (n,) is scratch for it."""
    flags = 0
    fk_all_core(q, kin, poses)
    _world_points(caps, poses, wpts)
    info[I_CLEARANCE] = math.inf
    info[I_PAIR] = -1.0
    info[I_FLOOR] = math.inf
    info[I_COM_MARGIN] = math.inf
    info[I_WS] = -1.0
    # floor: every part stays above it
    if ws[WS_FLOOR_ON] != 0.0:
        info[I_FLOOR] = lowest_part(caps, wpts) - ws[WS_FLOOR_Z]
        if info[I_FLOOR] < 0.0:
            flags |= FLOOR
    # workspace of the wrist centre (Zhao et al. 2007, eqs. 2-6)
    if ws[WS_KIND] != WS_OFF:
        f = int(ws[WS_FRAME])
        x = poses[f, 0, 3]
        y = poses[f, 1, 3]
        z = poses[f, 2, 3]
        reach = ws[WS_REACH] + 1e-3  # the stretched arm (home, ready) lies on the bound; 1 mm for measurement noise
        bound = -1
        if ws[WS_KIND] == WS_SPHERE:   # a reach sphere about the base origin (robots without the paper's bounds)
            if not x * x + y * y + z * z <= reach * reach:
                bound = 5
        elif not z <= reach:
            bound = 0
        elif not abs(y) <= reach:
            bound = 1
        elif not x <= reach:
            bound = 2
        elif not y * y + z * z <= reach * reach + ws[WS_A3] * ws[WS_A3]:
            bound = 3
        elif not x >= -reach * ws[WS_COS_LOWER]:
            bound = 4
        if bound >= 0:
            flags |= WORKSPACE
            info[I_WS] = bound
    # self-collision between the parts' pairs
    closest_parts(caps, pairs, wpts, info)
    if info[I_CLEARANCE] < 0.0:
        flags |= COLLISION
    # static balance: COM over the support polygon of the soles in contact
    if bal[BAL_ON] != 0.0:
        info[I_COM_MARGIN] = support_margin(mt, poses, bal, scratch)
        if info[I_COM_MARGIN] < bal[BAL_MARGIN]:
            sagging = False
            for i in range(q.shape[0]):
                q_loaded[i] = q[i] - sag[i]
                sagging = sagging or sag[i] != 0.0
            if sagging:
                fk_all_core(q_loaded, kin, poses)
                loaded = support_margin(mt, poses, bal, scratch)
                if loaded > info[I_COM_MARGIN]:
                    info[I_COM_MARGIN] = loaded
            if info[I_COM_MARGIN] < bal[BAL_MARGIN]:
                flags |= BALANCE
    return flags


@kernel(nogil=True)
def safety_step(q_target, q_prev, q_meas, sag, lower, upper, vmax, dt, rate_scale, kin, mt, caps, pairs, ws, bal,
                q_cmd, poses, wpts, info, scratch, q_loaded, q_tried):
    """One control cycle's safety filter: q_cmd from q_target given the previous command q_prev.

    Clamps into the joint ranges (LIMIT) and to |Δq| ≤ vmax·dt·rate_scale (RATE); then checks
    floor, workspace, self-collision and balance at the clamped pose and, if any fails, holds the
    previous command (HELD). Returns the flag bits; `info` explains (see I_* slots). `sag`: the
    compliance compensation inside the target (see `check_pose_core`). `q_tried` gets the clamped
    step that was checked (held or not): what a refusal is about.
    """
    n = q_target.shape[0]
    flags = 0
    for i in range(n):
        v = q_target[i]
        if not (v - v == 0.0):
            for j in range(n):
                q_cmd[j] = q_prev[j]
            return NONFINITE | HELD
    for i in range(n):
        v = q_target[i]
        if v < lower[i]:
            v = lower[i]
            flags |= LIMIT
        elif v > upper[i]:
            v = upper[i]
            flags |= LIMIT
        step = v - q_prev[i]
        lim = vmax[i] * dt * rate_scale
        if step > lim:
            v = q_prev[i] + lim
            flags |= RATE
        elif step < -lim:
            v = q_prev[i] - lim
            flags |= RATE
        q_cmd[i] = v
        q_tried[i] = v
    bad = check_pose_core(q_cmd, sag, kin, mt, caps, pairs, ws, bal, poses, wpts, info, scratch, q_loaded)
    if bad != 0:
        # a step that already starts in violation may go on if it does not make things worse
        # (so a robot measured slightly outside can be moved back, never further out)
        c0 = info[I_CLEARANCE]
        f0 = info[I_FLOOR]
        m0 = info[I_COM_MARGIN]
        prev_bad = check_pose_core(q_prev, sag, kin, mt, caps, pairs, ws, bal, poses, wpts, info, scratch, q_loaded)
        recovering = (bad & ~prev_bad) == 0 and (bad & WORKSPACE) == 0
        if recovering:
            if bad & COLLISION and c0 < info[I_CLEARANCE]:
                recovering = False
            if bad & FLOOR and f0 < info[I_FLOOR]:
                recovering = False
            if bad & BALANCE and m0 < info[I_COM_MARGIN]:
                recovering = False
        if recovering:
            flags |= bad
            check_pose_core(q_cmd, sag, kin, mt, caps, pairs, ws, bal, poses, wpts, info, scratch, q_loaded)
        else:
            for j in range(n):
                q_cmd[j] = q_prev[j]
            flags |= bad | HELD
    step = 0.0
    track = 0.0
    to_target = 0.0
    for i in range(n):
        step = max(step, abs(q_cmd[i] - q_prev[i]))
        track = max(track, abs(q_cmd[i] - q_meas[i]))
        to_target = max(to_target, abs(q_target[i] - q_cmd[i]))
    info[I_STEP] = step
    info[I_TRACK] = track
    info[I_TO_TARGET] = to_target
    return flags


@kernel(nogil=True)
def check_path(Q, SAG, kin, mt, caps, pairs, ws, bal, lower, upper, poses, wpts, info, scratch, q_loaded, flags_out):
    """Plan-time check of many configurations Q (N, n): flags per row (limits + pose checks).
    Returns the first bad row or -1. `SAG`: each row's compliance compensation (N, n), or one row
    for all (see `check_pose_core`)."""
    first = -1
    n = Q.shape[1]
    for k in range(Q.shape[0]):
        f = 0
        for i in range(n):
            v = Q[k, i]
            if not (v - v == 0.0):
                f |= NONFINITE
            elif v < lower[i] - 1e-9 or v > upper[i] + 1e-9:
                f |= LIMIT
        if f & NONFINITE == 0:
            f |= check_pose_core(Q[k], SAG[k if SAG.shape[0] > 1 else 0], kin, mt, caps, pairs, ws, bal, poses, wpts,
                                 info, scratch, q_loaded)
        flags_out[k] = f
        if f != 0 and first < 0:
            first = k
    return first


@kernel("int64(float64[:], float64[:], float64[:], float64[:], float64[:], int64[:], float64, float64, float64)")
def stall_step(q_cmd, q_meas, qd_meas, current_mA, stall_mA, count, load, error_rad, still_rad_s):
    """One cycle of the loop's stall watch (hil.runtime.stall), in place: count[j] goes up where
    joint j pushes with at least `load` of its stall current, stands more than `error_rad` short of
    its command and moves slower than `still_rad_s`, and back to 0 elsewhere (a NaN is no push).
    Returns the joint with the longest count (the first of equals)."""
    worst = 0
    for j in range(count.shape[0]):
        if abs(current_mA[j]) >= load * stall_mA[j] and abs(q_cmd[j] - q_meas[j]) > error_rad \
                and abs(qd_meas[j]) < still_rad_s:
            count[j] += 1
        else:
            count[j] = 0
        if count[j] > count[worst]:
            worst = j
    return worst
