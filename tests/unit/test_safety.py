"""The safety layers one at a time: the loop's kernel (`SafetyChecker.step`, every cycle), the
planners' whole-path check (`check_path`), and the board's own clamp (`board_behaviour.clamp_target`).
End-to-end runs cannot tell these apart: each layer hides a fault in the one behind it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from firmware_protocol import board_behaviour as BB
from hil import robots
from hil.safety import (BALANCE, COLLISION, FLOOR, HELD, I_STEP, I_TO_TARGET, I_TRACK, LIMIT, NONFINITE, RATE,
                        WORKSPACE, SafetyChecker, check_shapes, flag_names)
from hil.safety import _kernel as SK

# bad poses found by sampling each robot's range, kept as data: each violates the one check named
PUMA_FLOOR = [-1.669, 0.73, 2.788, -0.162, 0.494, -1.105]
PUMA_WORKSPACE = [0.09, -3.381, 2.153, 1.876, 0.394, 3.875]
PUMA_COLLISION = [1.822, -3.636, -0.347, 2.787, 0.884, -1.506]


@pytest.fixture(scope="module")
def puma():
    m = robots.load("puma560")
    return m, SafetyChecker(m)


@pytest.fixture(scope="module")
def humanoid():
    m = robots.load("humanoid17")
    return m, SafetyChecker(m)


def step(checker, target, prev, dt=100.0, scale=1.0, meas=None):
    """One loop step; a long dt unless the rate limit is what is tested."""
    q_cmd = np.full(len(prev), 7.0)
    flags = checker.step(np.asarray(target, float), np.asarray(prev, float), dt, scale, q_cmd,
                         None if meas is None else np.asarray(meas, float))
    return flags, q_cmd


def leaning(model, deg):
    """The humanoid's home pose with both ankles pitched by `deg`: the COM moves over the toes."""
    q = model.home.copy()
    for name in ("l_ankle_pitch", "r_ankle_pitch"):
        q[model.joint_names.index(name)] += math.radians(deg)
    return q


# ------------------------------------------------------------------ the loop's kernel
@pytest.mark.parametrize("side", ["lower", "upper"])
def test_a_target_beyond_a_joints_range_is_clamped_onto_it(puma, side):
    model, checker = puma
    for j in range(model.n):
        prev = model.home.copy()
        target = prev.copy()
        bound = model.lower[j] if side == "lower" else model.upper[j]
        prev[j] = bound + (0.01 if side == "lower" else -0.01)
        target[j] = bound + (-0.5 if side == "lower" else 0.5)
        flags, q_cmd = step(checker, target, prev)
        assert flags & LIMIT, (j, flag_names(flags))
        if not flags & HELD:
            assert q_cmd[j] == bound, (model.joint_names[j], q_cmd[j], bound)
        assert model.lower[j] <= q_cmd[j] <= model.upper[j]


def test_a_target_inside_the_range_is_passed_through_unflagged(puma):
    model, checker = puma
    target = model.home + 0.01
    flags, q_cmd = step(checker, target, model.home)
    assert flags == 0 and np.array_equal(q_cmd, target)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_a_step_faster_than_a_joint_may_go_is_cut_to_its_velocity_limit(puma, sign):
    model, checker = puma
    dt = 0.002
    prev = model.home.copy()
    target = prev + sign * model.velocity_limit * dt * 3
    flags, q_cmd = step(checker, target, prev, dt=dt)
    assert flags == RATE
    np.testing.assert_allclose(q_cmd - prev, sign * model.velocity_limit * dt, rtol=1e-12)
    assert checker.info[I_STEP] == pytest.approx(np.max(model.velocity_limit * dt))
    # the ramp-in speed is a fraction of it
    flags, q_cmd = step(checker, target, prev, dt=dt, scale=0.25)
    np.testing.assert_allclose(q_cmd - prev, sign * model.velocity_limit * dt * 0.25, rtol=1e-12)
    # exactly the limit is allowed as it is
    exact = prev + sign * model.velocity_limit * dt * 0.999
    flags, q_cmd = step(checker, exact, prev, dt=dt)
    assert flags == 0 and np.array_equal(q_cmd, exact)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_non_finite_target_holds_the_previous_command(puma, bad):
    model, checker = puma
    for j in (0, model.n - 1):
        target = model.home.copy()
        target[j] = bad
        prev = model.home + 0.01
        flags, q_cmd = step(checker, target, prev)
        assert flags == NONFINITE | HELD
        assert np.array_equal(q_cmd, prev)


@pytest.mark.parametrize("pose, bit", [(PUMA_FLOOR, FLOOR), (PUMA_WORKSPACE, WORKSPACE),
                                       (PUMA_COLLISION, COLLISION)])
def test_a_step_into_a_bad_pose_is_held_where_it_was(puma, pose, bit):
    model, checker = puma
    assert checker.check(model.home).flags == 0
    flags, q_cmd = step(checker, pose, model.home)
    assert flags & bit and flags & HELD, flag_names(flags)
    assert np.array_equal(q_cmd, model.home)
    assert checker.check(pose).flags & bit          # the planners' check agrees


def test_the_floor_the_workspace_and_collisions_are_told_apart(puma):
    model, checker = puma
    assert checker.check(PUMA_FLOOR).flags & (FLOOR | WORKSPACE | COLLISION) == FLOOR
    assert checker.check(PUMA_WORKSPACE).flags & (FLOOR | WORKSPACE | COLLISION) == WORKSPACE
    assert checker.check(PUMA_COLLISION).flags & (FLOOR | WORKSPACE | COLLISION) == COLLISION
    reasons = " ".join(checker.check(PUMA_WORKSPACE).reasons)
    assert "wrist centre" in reasons and "cos 20°" in reasons
    assert "pedestal" in " ".join(checker.check(PUMA_COLLISION).reasons)


def test_the_humanoid_leaning_past_its_toes_is_held(humanoid):
    model, checker = humanoid
    assert checker.check(leaning(model, 5)).flags == 0
    flags, q_cmd = step(checker, leaning(model, 20), leaning(model, 5))
    assert flags & BALANCE and flags & HELD
    assert np.array_equal(q_cmd, leaning(model, 5))
    assert "outside the support polygon" in " ".join(checker.check(leaning(model, 20)).reasons)


def test_a_robot_already_out_of_balance_may_move_back_but_never_further_out(humanoid):
    model, checker = humanoid
    out = leaning(model, 20)
    flags, q_cmd = step(checker, leaning(model, 16), out)        # back towards the polygon
    assert flags & BALANCE and not flags & HELD
    assert np.array_equal(q_cmd, leaning(model, 16))
    flags, q_cmd = step(checker, leaning(model, 24), out)        # further out
    assert flags & BALANCE and flags & HELD
    assert np.array_equal(q_cmd, out)
    flags, q_cmd = step(checker, leaning(model, 16), out, dt=0.002)   # back, cut to the joints' speed
    assert flags == BALANCE | RATE, flag_names(flags)


def test_a_robot_measured_below_the_floor_may_rise_but_not_sink(puma):
    model, checker = puma
    floor = np.asarray(PUMA_FLOOR)
    def on_the_way(a):  # from home (a = 0) towards the bad pose: lowest (−152 mm) near a = 0.9
        return model.home + a * (floor - model.home)

    towards = on_the_way(0.7)
    assert checker.check(towards).flags & FLOOR
    h_there = checker.info[SK.I_FLOOR]
    flags, q_cmd = step(checker, on_the_way(0.65), towards)
    assert flags & FLOOR and not flags & HELD                     # rising out
    assert checker.info[SK.I_FLOOR] > h_there
    assert np.array_equal(q_cmd, on_the_way(0.65))
    flags, q_cmd = step(checker, on_the_way(0.75), towards)
    assert flags & FLOOR and flags & HELD                          # sinking further
    assert np.array_equal(q_cmd, towards)


def test_leaving_the_workspace_is_held_even_from_outside(puma):
    model, checker = puma
    ws = np.asarray(PUMA_WORKSPACE)
    flags, q_cmd = step(checker, ws + 0.01, ws)
    assert flags & WORKSPACE and flags & HELD and np.array_equal(q_cmd, ws)


def test_the_step_reports_its_size_the_tracking_error_and_the_way_left(puma):
    model, checker = puma
    dt = 0.002
    prev = model.home.copy()
    target = prev.copy()
    target[1] += 1.0
    meas = prev.copy()
    meas[2] -= 0.2
    flags, q_cmd = step(checker, target, prev, dt=dt, meas=meas)
    lim = model.velocity_limit[1] * dt
    info = checker.info
    assert info[I_STEP] == pytest.approx(lim)
    assert info[I_TRACK] == pytest.approx(0.2)
    assert info[I_TO_TARGET] == pytest.approx(1.0 - lim)


def test_switching_the_static_balance_check_off_and_on(humanoid):
    model, _ = humanoid
    checker = SafetyChecker(model)
    checker.check_static_balance(False)
    assert checker.check(leaning(model, 20)).flags == 0
    checker.check_static_balance(True)
    assert checker.check(leaning(model, 20)).flags & BALANCE
    arm = SafetyChecker(robots.load("puma560"))
    arm.check_static_balance(True)            # an arm has no soles: nothing to switch on
    assert arm.check(robots.load("puma560").home).flags == 0


# ------------------------------------------------------------------ the planners' path check
def test_a_path_check_flags_each_row_and_names_the_first_bad_one(puma):
    model, checker = puma
    Q = np.tile(model.home, (6, 1))
    roll = model.n - 1                        # the flange roll: it moves no link, so only its range counts
    Q[:, roll] = 0.0
    Q[2, roll] = model.upper[roll] + 1e-6    # beyond the range by more than the tolerance
    Q[3, roll] = model.upper[roll] + 1e-10   # within the 1e-9 tolerance: fine
    Q[4] = PUMA_FLOOR
    Q[5, 3] = math.nan
    first, flags = checker.check_path(Q)
    assert first == 2
    assert list(flags[:2]) == [0, 0] and flags[2] == LIMIT and flags[3] == 0
    assert flags[4] & FLOOR and flags[5] == NONFINITE
    Q[2, roll] = model.lower[roll] - 1e-6
    first, flags = checker.check_path(Q)
    assert first == 2 and flags[2] == LIMIT


def test_a_path_check_keeps_every_flag_of_a_row_and_the_first_bad_row(puma):
    model, checker = puma
    roll = model.n - 1
    Q = np.tile(model.home, (4, 1))
    Q[:, roll] = 0.0
    Q[0, 3] = model.upper[3] + 1.0                        # row 0: out of range …
    Q[0, roll] = math.nan                                 # … and a NaN after it
    Q[2, 0], Q[2, roll] = math.nan, model.lower[roll] - 1.0   # row 2: a NaN, then out of range
    first, flags = checker.check_path(Q)
    assert first == 0 and flags[0] == LIMIT | NONFINITE and flags[2] == LIMIT | NONFINITE and flags[1] == 0


def test_a_path_on_its_limits_and_within_their_tolerance_is_clean(puma):
    model, checker = puma
    roll = model.n - 1
    for bound, sign in ((model.lower, -1.0), (model.upper, 1.0)):
        Q = np.tile(model.home, (4, 1))
        Q[0, roll] = bound[roll]
        Q[1, roll] = bound[roll] + sign * 1e-9            # the kernel's own tolerance, to the last bit
        Q[2, roll] = bound[roll] + sign * 1.5e-9          # past it
        Q[3, roll] = bound[roll] - sign * 1e-9            # inside
        first, flags = checker.check_path(Q)
        assert list(flags) == [0, 0, LIMIT, 0] and first == 2, flag_names(int(flags[2]))


def test_a_clean_path_has_no_first_bad_row(puma):
    model, checker = puma
    Q = model.home + np.linspace(0, 0.2, 20)[:, None]
    first, flags = checker.check_path(Q)
    assert first == -1 and not flags.any()


# ------------------------------------------------------------------ the board's clamp
def test_the_boards_clamp_keeps_a_target_in_range_and_near_the_last():
    lo, hi, step_max = -1.0, 2.0, 0.1
    assert BB.clamp_target(0.5, 0.45, lo, hi, step_max) == (0.5, 0)
    assert BB.clamp_target(-5.0, -0.95, lo, hi, step_max) == (-1.0, BB.LIMIT_FLAG)
    assert BB.clamp_target(5.0, 1.95, lo, hi, step_max) == (2.0, BB.LIMIT_FLAG)
    assert BB.clamp_target(1.0, 0.0, lo, hi, step_max) == pytest.approx((0.1, BB.STEP_FLAG))
    assert BB.clamp_target(-1.0, 0.0, lo, hi, step_max) == pytest.approx((-0.1, BB.STEP_FLAG))
    target, flags = BB.clamp_target(9.0, 0.0, lo, hi, step_max)
    assert target == pytest.approx(0.1) and flags == BB.LIMIT_FLAG | BB.STEP_FLAG
    assert BB.clamp_target(0.1, 0.0, lo, hi, step_max) == (0.1, 0)   # exactly one step is allowed


# ------------------------------------------------------------------ the kernel's constants and geometry
def test_the_flag_bits_and_names_are_the_recordings_and_the_readmes():
    """The bits are a recording's `safety_flags` column (README: the recording's fields) and what
    the Zenoh state carries; the names are what the run and the twin say."""
    import re

    readme = (__import__("pathlib").Path(__file__).resolve().parents[2] / "README.md").read_text()
    documented = dict(re.findall(r"(\d+) ([a-z -]+?)(?:,|\))", readme.split("`safety_flags` (", 1)[1].split("`", 1)[0]))
    kernel = {SK.LIMIT: "joint limit", SK.RATE: "velocity limit", SK.WORKSPACE: "workspace", SK.FLOOR: "floor",
              SK.COLLISION: "self-collision", SK.BALANCE: "balance", SK.NONFINITE: "non-finite target", SK.HELD: "held"}
    assert SK.FLAG_NAMES == kernel and len(documented) == 8, documented
    for bit, name in documented.items():
        assert SK.FLAG_NAMES[int(bit)].startswith(name.strip()), (bit, name)
    assert sorted(SK.FLAG_NAMES) == [1 << k for k in range(8)]


def test_the_kernels_slots_are_distinct_and_inside_their_arrays():
    for prefix, length in (("I_", SK.INFO_LEN), ("WS_", SK.WS_LEN), ("BAL_", SK.BAL_LEN)):
        slots = {k: v for k, v in vars(SK).items() if k.startswith(prefix) and k != prefix + "LEN"
                 and isinstance(v, int) and k not in ("WS_OFF", "WS_PUMA", "WS_SPHERE")}
        assert sorted(slots.values()) == list(range(length)), (prefix, slots)
    assert len({SK.WS_OFF, SK.WS_PUMA, SK.WS_SPHERE}) == 3


def _seg_dist_reference(p0, p1, q0, q1) -> float:
    """The segments' distance, independently: the least of the squared-distance quadratic over the
    unit square, at its interior stationary point (if inside) or on each edge (clamped)."""
    d1, d2, r = p1 - p0, q1 - q0, p0 - q0

    def at(s, t):
        return float(np.sum((r + d1 * s - d2 * t) ** 2))

    best = min(at(s, t) for s in (0.0, 1.0) for t in (0.0, 1.0))
    A = np.array([[d1 @ d1, -(d1 @ d2)], [-(d1 @ d2), d2 @ d2]])
    g = np.array([-(d1 @ r), d2 @ r])
    if abs(np.linalg.det(A)) > 1e-12:
        s, t = np.linalg.solve(A, g)
        if 0 <= s <= 1 and 0 <= t <= 1:
            best = min(best, at(s, t))
    for s in (0.0, 1.0):        # each edge: a quadratic in the other variable, clamped
        if d2 @ d2 > 0:
            best = min(best, at(s, min(max((d2 @ (r + d1 * s)) / (d2 @ d2), 0.0), 1.0)))
    for t in (0.0, 1.0):
        if d1 @ d1 > 0:
            best = min(best, at(min(max(-(d1 @ (r - d2 * t)) / (d1 @ d1), 0.0), 1.0), t))
    return best


def test_segment_distances_match_an_independent_reference_including_points_and_parallels():
    rng = np.random.default_rng(7)
    cases = []
    for _ in range(400):
        p0, p1, q0, q1 = rng.normal(size=(4, 3))
        cases.append((p0, p1, q0, q1))
        cases.append((p0, p0.copy(), q0, q1))                  # a point and a segment
        cases.append((p0, p1, q0, q0.copy()))                  # a segment and a point
        cases.append((p0, p0.copy(), q0, q0.copy()))           # two points
        shift = rng.normal(size=3)
        cases.append((p0, p1, p0 + shift, p1 + shift * 1.0 + (p1 - p0) * rng.uniform(-2, 2)))   # parallel
        cases.append((p0, p1, p0 + (p1 - p0) * 2.0, p0 + (p1 - p0) * 3.0))                   # collinear, apart
    for p0, p1, q0, q1 in cases:
        got = SK._seg_seg_dist2(*p0, *p1, *q0, *q1)
        assert got == pytest.approx(_seg_dist_reference(p0, p1, q0, q1), rel=1e-9, abs=1e-12), (p0, p1, q0, q1)


def _hull_margin_reference(points: np.ndarray, p: np.ndarray) -> float:
    """Signed distance of p inside the convex hull of points, independently: the hull by monotone
    chain (twin.ground.convex_hull), then the least signed distance to its edge lines."""
    from twin.ground import convex_hull

    ring = convex_hull(points)
    out = math.inf
    for a, b in zip(ring, np.roll(ring, -1, axis=0)):
        e = b - a
        if np.hypot(*e) > 1e-12:     # (a repeated corner: no edge)
            out = min(out, (e[0] * (p[1] - a[1]) - e[1] * (p[0] - a[0])) / np.hypot(*e))
    return out


@pytest.mark.parametrize("size", [1e-6, 0.1, 1e3])
def test_the_support_polygon_margin_matches_an_independent_hull(size):
    """At a sole's size and far smaller and larger ones: the collinearity tolerance scales with the
    polygon, so a micrometre polygon is not all one line and a kilometre one not all corners."""
    rng = np.random.default_rng(11)
    for trial in range(300):
        n = int(rng.integers(3, 9))
        pts = rng.normal(size=(n, 2)) * size
        if trial % 5 == 0:
            pts[1] = pts[0]                           # a repeated corner
        if trial % 7 == 0:
            pts[2] = (pts[0] + pts[1]) / 2            # a corner on an edge
        p = rng.normal(size=2) * 0.8 * size
        flat = np.zeros(16 + n)
        flat[:2 * n] = pts.reshape(-1)
        got = SK.hull_margin(flat, n, p[0], p[1])
        assert got == pytest.approx(_hull_margin_reference(pts, p), abs=1e-11 * size), (pts, p)


def _world_shapes(checker, q) -> list:
    """Each checked shape at q in the base frame, independently of the kernel: ("capsule", p0, p1, r)
    or ("box", centre, axes, half)."""
    F = checker.model.fk_frames(q)
    out = []
    for sh in check_shapes(checker.model):
        T = F[1 + sh.link]
        if sh.kind == "capsule":
            out.append(("capsule", T[:3, :3] @ sh.p0 + T[:3, 3], T[:3, :3] @ sh.p1 + T[:3, 3], sh.radius))
        else:
            out.append(("box", T[:3, :3] @ sh.p0 + T[:3, 3], T[:3, :3] @ sh.rotation(), np.asarray(sh.half)))
    return out


def _lowest_reference(shape) -> float:
    if shape[0] == "capsule":
        return min(shape[1][2], shape[2][2]) - shape[3]
    _, c, R, half = shape
    corners = c + (np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)]) * half) @ R.T
    return float(corners[:, 2].min())


def _lowest_part_reference(checker, q) -> float:
    """The lowest point of any part off the base at q: per part (a mesh's box and capsules), the
    highest of its bounds' lowest points."""
    parts: dict = {}
    for w, sh in zip(_world_shapes(checker, q), check_shapes(checker.model)):
        if sh.link >= 0:
            key = (sh.link, sh.group) if sh.group else id(sh)
            parts[key] = max(parts.get(key, -math.inf), _lowest_reference(w))
    return min(parts.values())


def test_the_floor_margin_is_the_lowest_shape_above_the_floor(puma, humanoid):
    """info's floor slot: the lowest point of any link's part (a capsule's axis end minus its
    radius, a box's lowest corner; a mesh's part no lower than the higher of its bounds' lowest
    points) over the floor, the base's (the pedestal) left out; below zero is FLOOR."""
    so101 = robots.load("so101")   # meshes: each bounded by its box and its capsules
    low = so101.home.copy()
    low[1] = so101.upper[1] if abs(so101.upper[1]) > abs(so101.lower[1]) else so101.lower[1]
    for (model, checker), poses in ((puma, (puma[0].home, np.asarray(PUMA_FLOOR))), (humanoid, (leaning(humanoid[0], 20),)),
                                    ((so101, SafetyChecker(so101)), (so101.home, low))):
        floor_z = float(model.meta.get("floor_z_m", 0.0))
        ws = checker.ws.copy()
        ws[SK.WS_FLOOR_ON], ws[SK.WS_FLOOR_Z] = 1.0, floor_z
        for q in poses:
            flags, info = _pose_check(checker, q, ws=ws)
            lowest = _lowest_part_reference(checker, q) - floor_z
            assert info[SK.I_FLOOR] == pytest.approx(lowest, abs=1e-9)
            assert bool(flags & FLOOR) == (lowest < 0)


# ------------------------------------------------------------------ the workspace bounds, at their edges
def _bound_at(checker, q, **settings) -> int:
    """The workspace bound the kernel names at q (-1: none), with some WS_* settings changed (no
    collision pairs, no floor: only the workspace decides)."""
    ws = checker.ws.copy()
    ws[SK.WS_FLOOR_ON] = 0.0
    for name, value in settings.items():
        ws[getattr(SK, name)] = value
    flags = SK.check_pose_core(np.asarray(q, float), checker.no_sag[0], checker.kin, checker.mt, checker.caps,
                               np.zeros((0, 2), dtype=np.int64), ws, checker.bal, checker.poses, checker.wpts,
                               checker.info, checker.scratch, checker.q_loaded)
    bound = int(checker.info[SK.I_WS])
    assert bool(flags & WORKSPACE) == (bound >= 0)
    return bound


def _reach_making(v: float) -> float:
    """The WS_REACH whose reach as the kernel counts it (+1 mm for noise) is exactly v."""
    r = v - 1e-3
    for _ in range(64):
        if r + 1e-3 == v:
            return r
        r = np.nextafter(r, math.inf if r + 1e-3 < v else -math.inf)
    pytest.skip("no float lands on the edge exactly")


def _wrist_where(checker, model, rng, accept):
    """A pose in the PUMA's range whose wrist centre (x, y, z) satisfies `accept`."""
    f = int(checker.ws[SK.WS_FRAME])
    for _ in range(20_000):
        q = rng.uniform(model.lower, model.upper)
        _bound_at(checker, q)
        p = checker.poses[f, :3, 3].copy()
        if accept(*p):
            return q, p
    raise AssertionError("no such pose sampled")


@pytest.mark.parametrize("bound, coordinate, accept", [
    (0, lambda x, y, z: z, lambda x, y, z: z > 0.1 and z > abs(y) + 0.05 and z > x + 0.05),
    (1, lambda x, y, z: abs(y), lambda x, y, z: abs(y) > 0.1 and abs(y) > z + 0.05 and abs(y) > x + 0.05),
    (2, lambda x, y, z: x, lambda x, y, z: x > 0.1 and x > abs(y) + 0.05 and x > z + 0.05),
])
def test_each_reach_bound_holds_its_edge_exactly(puma, bound, coordinate, accept):
    """Zhao et al.'s bounds 0-2 (z, |y|, x against the reach): a wrist on the bound is inside, half a
    millimetre past it (with the 1 mm allowed for noise) is outside and named; the bounds after it
    opened wide (a3, the lower angle) so that only this one decides."""
    model, checker = puma
    q, p = _wrist_where(checker, model, np.random.default_rng(bound), accept)
    v = coordinate(*p)
    wide = {"WS_A3": 10.0, "WS_COS_LOWER": 10.0}   # bounds 3 and 4 out of the way
    assert _bound_at(checker, q, WS_REACH=_reach_making(v), **wide) == -1
    assert _bound_at(checker, q, WS_REACH=v - 1e-3 + 5e-4, **wide) == -1
    assert _bound_at(checker, q, WS_REACH=v - 1e-3 - 5e-4, **wide) == bound
    assert _bound_at(checker, q, WS_REACH=_reach_making(np.nextafter(v, -math.inf)), **wide) == bound


def test_the_shoulder_cylinder_and_the_lower_angle_hold_their_edges(puma):
    """Bound 3 (y² + z² ≤ reach² + a3²) and bound 4 (x ≥ −reach · cos of the lower angle), each
    against its own setting, the earlier bounds satisfied by a wide reach."""
    model, checker = puma
    rng = np.random.default_rng(3)
    q, (x, y, z) = _wrist_where(checker, model, rng, lambda x, y, z: min(abs(y), z) > 0.25)
    reach = max(abs(x), abs(y), z) + 0.01       # bounds 0-2 hold
    eff = reach + 1e-3
    a3 = math.sqrt(y * y + z * z - eff * eff)   # the cylinder through the wrist
    assert _bound_at(checker, q, WS_REACH=reach, WS_A3=a3 + 1e-6, WS_COS_LOWER=10.0) == -1
    assert _bound_at(checker, q, WS_REACH=reach, WS_A3=a3 - 1e-6, WS_COS_LOWER=10.0) == 3
    q, (x, y, z) = _wrist_where(checker, model, rng, lambda x, y, z: x < -0.1)
    reach = max(abs(x), abs(y), z) + 0.01
    eff = reach + 1e-3
    cos_edge = -x / eff                         # the lower bound through the wrist
    assert _bound_at(checker, q, WS_REACH=reach, WS_A3=10.0, WS_COS_LOWER=cos_edge + 1e-6) == -1
    assert _bound_at(checker, q, WS_REACH=reach, WS_A3=10.0, WS_COS_LOWER=cos_edge - 1e-6) == 4


def test_a_reach_sphere_holds_its_edge(puma):
    """Robots without the paper's bounds: a sphere about the base origin (bound 5)."""
    model, checker = puma
    q = np.asarray(PUMA_WORKSPACE)
    _bound_at(checker, q)
    r = float(np.linalg.norm(checker.poses[int(checker.ws[SK.WS_FRAME]), :3, 3]))
    sphere = {"WS_KIND": SK.WS_SPHERE}
    assert _bound_at(checker, q, WS_REACH=r - 1e-3 + 5e-4, **sphere) == -1
    assert _bound_at(checker, q, WS_REACH=r - 1e-3 - 5e-4, **sphere) == 5
    assert _bound_at(checker, q, WS_REACH=r + 1.0, WS_KIND=SK.WS_OFF) == -1


def _rotation(rng) -> np.ndarray:
    """A uniformly random rotation (QR of a Gaussian matrix, signs fixed)."""
    qm, r = np.linalg.qr(rng.normal(size=(3, 3)))
    qm = qm * np.sign(np.diag(r))
    return qm if np.linalg.det(qm) > 0 else -qm


def _rigid(R, t) -> np.ndarray:
    T = np.eye(4)
    T[:3, :3], T[:3, 3] = R, t
    return T


def _support_margin_reference(mt, poses, bal) -> tuple[float, bool]:
    """The static balance margin from its definition, with matrices: the COM and the soles' corners
    in the lower sole's frame (lower along the base's z), the other sole's corners added when its
    origin lies within the contact tolerance of that sole's plane, the margin in their hull."""
    com = sum(mt[b, 0] * (poses[b] @ np.r_[mt[b, 1:4], 1.0])[:3] for b in range(len(mt))) / mt[:, 0].sum()
    left, right = int(bal[SK.BAL_SOLE_L]), int(bal[SK.BAL_SOLE_R])
    s, o = (left, right) if poses[left][2, 3] <= poses[right][2, 3] else (right, left)
    to_sole = np.linalg.inv(poses[s])
    corners = [np.array([sx * bal[SK.BAL_HALF_LENGTH], sy * bal[SK.BAL_HALF_WIDTH], 0.0, 1.0])
               for sx in (-1, 1) for sy in (-1, 1)]
    points = [c[:2] for c in corners]
    other = to_sole @ poses[o]
    double = abs(other[2, 3]) < bal[SK.BAL_CONTACT_TOL]
    if double:
        points += [(other @ c)[:2] for c in corners]
    return _hull_margin_reference(np.array(points), (to_sole @ np.r_[com, 1.0])[:2]), double


def _random_stance(rng, model, bal) -> tuple[np.ndarray, np.ndarray]:
    """A mass table and frame poses with the soles anywhere: the body tilted any way, single support
    (the other sole lifted or tilted) or double support (the other sole turned and placed in the
    support sole's plane, within or just beyond the contact tolerance), the COM near the soles."""
    _, mt = model.tables
    mt = mt.copy()
    mt[:, 0] = rng.uniform(0.0, 1.0, len(mt))
    mt[0, 0] += 0.1                                     # a robot has mass
    mt[:, 1:4] = rng.normal(size=(len(mt), 3)) * 0.03
    body = _rigid(_rotation(rng) if rng.random() < 0.8 else np.eye(3), rng.normal(size=3) * 0.1)
    poses = np.array([body @ _rigid(np.eye(3), rng.normal(size=3) * 0.05) for _ in model.frame_names])
    left, right = int(bal[SK.BAL_SOLE_L]), int(bal[SK.BAL_SOLE_R])
    support, other = (left, right) if rng.random() < 0.5 else (right, left)
    poses[support] = body @ _rigid(_rotation(rng) if rng.random() < 0.7 else np.eye(3), rng.normal(size=3) * 0.05)
    kind = rng.random()
    if kind < 0.6:       # double support, or nearly
        yaw = rng.uniform(-math.pi, math.pi) if rng.random() < 0.8 else 0.0
        Rz = np.array([[math.cos(yaw), -math.sin(yaw), 0.0], [math.sin(yaw), math.cos(yaw), 0.0], [0.0, 0.0, 1.0]])
        lift = rng.uniform(-2.0, 2.0) * bal[SK.BAL_CONTACT_TOL]
        offset = np.r_[rng.normal(size=2) * 0.08, lift]
        poses[other] = poses[support] @ _rigid(Rz, offset)
    elif kind < 0.7:     # both soles at exactly the same height along the base's z
        poses[other] = body @ _rigid(_rotation(rng), rng.normal(size=3) * 0.05)
        poses[other][2, 3] = poses[support][2, 3]
    else:
        poses[other] = body @ _rigid(_rotation(rng), rng.normal(size=3) * 0.05)
    return mt, poses


def test_the_balance_margin_matches_its_definition_for_soles_placed_anyhow(humanoid):
    model, checker = humanoid
    bal = checker.bal.copy()
    rng = np.random.default_rng(5)
    inside = double = 0
    for trial in range(400):
        mt, poses = _random_stance(rng, model, bal)
        want, on_both = _support_margin_reference(mt, poses, bal)
        scratch = rng.normal(size=32)   # whatever an earlier call left: none of it may count
        got = SK.support_margin(mt, poses, bal, scratch)
        assert got == pytest.approx(want, abs=1e-9), trial
        inside += want > 0
        double += on_both
    # both sides of the polygon's edge, and single and double support, were tried
    assert 40 < inside < 360 and 40 < double < 360


def test_a_sole_exactly_the_contact_tolerance_above_the_other_is_lifted(humanoid):
    model, checker = humanoid
    bal = checker.bal.copy()
    _, mt = model.tables
    poses = np.array([np.eye(4) for _ in model.frame_names])
    left, right = int(bal[SK.BAL_SOLE_L]), int(bal[SK.BAL_SOLE_R])
    poses[right][:3, 3] = [0.0, -0.1, 0.0]
    for lift, on_both in ((bal[SK.BAL_CONTACT_TOL], False), (np.nextafter(bal[SK.BAL_CONTACT_TOL], 0.0), True)):
        poses[left][:3, 3] = [0.0, 0.1, lift]
        want, double = _support_margin_reference(mt, poses, bal)
        assert double == on_both
        assert SK.support_margin(mt, poses, bal, np.zeros(32)) == pytest.approx(want, abs=1e-12)


def test_the_loop_s_balance_check_uses_the_robot_s_own_soles_and_com(humanoid):
    """The kernel's check at random leg poses: its margin is the definition's at the FK's poses."""
    model, checker = humanoid
    kin, mt = model.tables
    rng = np.random.default_rng(8)
    poses = np.empty((len(model.frame_names), 4, 4))
    for _ in range(60):
        q = model.home + rng.uniform(-0.35, 0.35, model.n)
        q = np.clip(q, model.lower, model.upper)
        SK.check_pose_core(q, checker.no_sag[0], kin, mt, checker.caps, checker.pairs, checker.ws, checker.bal, poses,
                           checker.wpts, checker.info, checker.scratch, checker.q_loaded)
        want, _ = _support_margin_reference(mt, poses, checker.bal)
        assert checker.info[SK.I_COM_MARGIN] == pytest.approx(want, abs=1e-9)
        assert bool(checker.check(q).flags & BALANCE) == (want < checker.bal[SK.BAL_MARGIN])


def _pose_check(checker, q, info=None, **settings):
    """The kernel's pose check at q with some of the checker's tables replaced (caps, pairs, ws, bal):
    (flags, info)."""
    t = {"caps": checker.caps, "pairs": checker.pairs, "ws": checker.ws, "bal": checker.bal, **settings}
    info = np.empty(SK.INFO_LEN) if info is None else info
    wpts = t.get("wpts", np.empty((len(t["caps"]), SK.W_WIDTH)))
    flags = SK.check_pose_core(np.asarray(q, float), checker.no_sag[0], checker.kin, checker.mt, t["caps"],
                               t["pairs"], t["ws"], t["bal"], np.empty_like(checker.poses),
                               wpts, info, np.empty(32), np.empty(checker.model.n))
    return flags, info


# ------------------------------------------------------------------ each flag whatever else happened
def test_a_limit_and_a_rate_on_different_joints_are_both_flagged(puma):
    model, checker = puma
    dt = 0.002
    prev = model.home.copy()
    for limit_joint, rate_joint in ((3, 5), (5, 3)):   # the wrist: its limits keep the arm where it was
        for bound, past, sign in ((model.upper, 0.5, 1.0), (model.lower, -0.5, -1.0)):
            target = prev.copy()
            target[limit_joint] = bound[limit_joint] + past                  # clamped onto its range
            prev_here = prev.copy()
            prev_here[limit_joint] = bound[limit_joint]
            target[rate_joint] = prev[rate_joint] + sign * model.velocity_limit[rate_joint] * dt * 3
            flags, _ = step(checker, target, prev_here, dt=dt)
            assert flags == LIMIT | RATE, flag_names(flags)


def test_a_target_on_its_limit_and_a_step_of_exactly_the_speed_limit_pass_unflagged(puma):
    model, checker = puma
    for bound in (model.lower, model.upper):
        for j in range(model.n):
            target = model.home.copy()
            target[j] = bound[j]
            flags, q_cmd = step(checker, target, target)
            assert flags & LIMIT == 0 and q_cmd[j] == bound[j], model.joint_names[j]
    dt, moved = 0.002, 0
    for sign in (1.0, -1.0):
        for j in range(model.n):
            prev = model.home.copy()
            prev[j] = 0.0
            target = prev.copy()
            target[j] = sign * model.velocity_limit[j] * dt * 1.0    # the loop's own product, from 0
            flags, q_cmd = step(checker, target, prev, dt=dt)
            assert flags & (RATE | LIMIT) == 0, (model.joint_names[j], flag_names(flags))
            if not flags & HELD:
                assert q_cmd[j] == target[j]
                moved += 1
    assert moved > model.n


def _every_check_failing(model, checker, floor: bool, workspace: bool, balance: bool):
    """The kernel's settings with chosen checks made to fail at any pose: the floor 10 m up, a
    workspace sphere of 1 mm, a centre of mass asked to stay 1 km inside the soles."""
    ws, bal = checker.ws.copy(), np.zeros(SK.BAL_LEN)
    if floor:
        ws[SK.WS_FLOOR_ON], ws[SK.WS_FLOOR_Z] = 1.0, 10.0
    if workspace:
        ws[SK.WS_KIND], ws[SK.WS_FRAME], ws[SK.WS_REACH] = SK.WS_SPHERE, model.frame_index(model.tool_frame), 1e-3
    if balance:
        bal[SK.BAL_ON], bal[SK.BAL_SOLE_L], bal[SK.BAL_SOLE_R] = 1.0, 1, 2
        bal[SK.BAL_HALF_LENGTH] = bal[SK.BAL_HALF_WIDTH] = 0.01
        bal[SK.BAL_MARGIN], bal[SK.BAL_CONTACT_TOL] = 1e3, 0.003
    return ws, bal


@pytest.mark.parametrize("floor", [False, True])
@pytest.mark.parametrize("workspace", [False, True])
@pytest.mark.parametrize("balance", [False, True])
def test_each_failing_pose_check_is_flagged_whatever_else_fails(puma, floor, workspace, balance):
    model, checker = puma
    ws, bal = _every_check_failing(model, checker, floor, workspace, balance)
    base = checker.check(PUMA_COLLISION).flags & WORKSPACE   # the pose's own, with the usual settings
    want = (FLOOR if floor else 0) | (WORKSPACE if workspace else base) | (BALANCE if balance else 0)
    for q, colliding in ((model.home, 0), (PUMA_COLLISION, COLLISION)):
        flags, _ = _pose_check(checker, q, ws=ws, bal=bal)
        expected = want | colliding if colliding else want & ~base | (WORKSPACE if workspace else 0)
        assert flags == expected, (flag_names(flags), flag_names(expected))


def _clearance_reference(a, b) -> tuple[float, float]:
    """(clearance, tolerance) of two world shapes, independently of the kernel: segments exactly;
    a segment to a box on 4001 samples along it; two boxes by their separating axes in NumPy."""
    if a[0] == "box" and b[0] == "capsule":
        a, b = b, a
    if a[0] == "capsule" and b[0] == "capsule":
        return math.sqrt(_seg_dist_reference(a[1], a[2], b[1], b[2])) - a[3] - b[3], 1e-9
    if a[0] == "capsule":
        s = np.linspace(0.0, 1.0, 4001)[:, None]
        dist, depth = _box_distance(a[1] + s * (a[2] - a[1]), b[1], b[2], b[3])
        near = dist.min() - a[3] if dist.min() > 0 else -depth.max() - a[3]
        return near, np.linalg.norm(a[2] - a[1]) / 4000 + 1e-9
    (_, ca, Ra, ha), (_, cb, Rb, hb) = a, b
    axes = [Ra[:, i] for i in range(3)] + [Rb[:, i] for i in range(3)] + \
        [np.cross(Ra[:, i], Rb[:, j]) for i in range(3) for j in range(3)]
    gaps = [abs((cb - ca) @ L) - np.abs(Ra.T @ L) @ ha - np.abs(Rb.T @ L) @ hb
            for L in (v / np.linalg.norm(v) for v in axes if np.linalg.norm(v) >= 1e-9)]
    return max(gaps), 1e-9


def _parts_clearance(pairs, clearance) -> dict:
    """{part pair: (clearance, tolerance)}: the widest of its pairings' clearances, each the least
    of its shape pairs' (`clearance(a, b)` → (clearance, tolerance))."""
    pairings: dict = {}
    for a, b, pp, pairing in pairs:
        c, tol = clearance(int(a), int(b))
        held = pairings.get((int(pp), int(pairing)))
        if held is None or c < held[0]:
            pairings[int(pp), int(pairing)] = (c, tol)
    parts: dict = {}
    for (pp, _), (c, tol) in pairings.items():
        if pp not in parts or c > parts[pp][0]:
            parts[pp] = (c, tol)
    return parts


def test_the_clearance_is_the_closest_pair_of_shapes(puma, humanoid):
    """info's clearance and pair slots against an independent computation of every checked pair
    at the FK's poses (capsules: segment distance less both radii; boxes: see
    `_clearance_reference`), the least of them and which pair it is."""
    rng = np.random.default_rng(3)
    kinds = set()
    for model, checker in (puma, humanoid):
        for _ in range(40):
            q = rng.uniform(model.lower, model.upper)
            checker.check(q)
            world = _world_shapes(checker, q)
            kinds |= {(world[a][0], world[b][0]) for a, b, *_ in checker.pairs}
            parts = _parts_clearance(checker.pairs, lambda a, b: _clearance_reference(world[a], world[b]))
            best = min(parts, key=lambda pp: parts[pp][0])
            clear, tol = parts[best]
            assert checker.info[SK.I_CLEARANCE] == pytest.approx(clear, abs=tol)
            named = checker.pairs[int(checker.info[SK.I_PAIR]), SK.P_PARTS]
            assert int(checker.info[SK.I_PAIR]) == int(np.flatnonzero(checker.pairs[:, SK.P_PARTS] == named)[0])
            assert parts[named][0] <= clear + tol + parts[named][1]
            assert bool(checker.check(q).flags & COLLISION) == (checker.info[SK.I_CLEARANCE] < 0)
    assert {("capsule", "capsule"), ("capsule", "box"), ("box", "box")} <= kinds | {(b, a) for a, b in kinds}


def test_a_capsule_resting_exactly_on_the_floor_is_not_below_it(puma):
    model, checker = puma
    ws = checker.ws.copy()
    ws[SK.WS_FLOOR_Z] = 0.0
    _, info = _pose_check(checker, PUMA_FLOOR, ws=ws)
    ws[SK.WS_FLOOR_Z] = info[SK.I_FLOOR]           # the floor raised to the lowest capsule's bottom
    flags, info = _pose_check(checker, PUMA_FLOOR, ws=ws)
    assert flags & FLOOR == 0 and info[SK.I_FLOOR] == 0.0
    ws[SK.WS_FLOOR_Z] = np.nextafter(ws[SK.WS_FLOOR_Z], 1.0)
    assert _pose_check(checker, PUMA_FLOOR, ws=ws)[0] & FLOOR


def test_a_robot_in_collision_may_move_apart_but_not_further_in(puma):
    model, checker = puma
    home, bad = model.home, np.asarray(PUMA_COLLISION)
    path = [home + a * (bad - home) for a in np.linspace(0.0, 1.0, 201)]
    clearance = []
    for q in path:
        checker.check(q)
        clearance.append(checker.info[SK.I_CLEARANCE])
    # a colliding pose whose neighbours on the path, both colliding, lie one shallower, one deeper
    k = next(k for k in range(1, 200) if clearance[k - 1] > clearance[k] > clearance[k + 1] and clearance[k - 1] < 0)
    shallower, there, deeper = path[k - 1], path[k], path[k + 1]
    flags, q_cmd = step(checker, shallower, there)
    assert flags & COLLISION and not flags & HELD and np.array_equal(q_cmd, shallower)
    flags, q_cmd = step(checker, deeper, there)
    assert flags & COLLISION and flags & HELD and np.array_equal(q_cmd, there)


def test_a_check_left_out_says_so_in_its_info_slot(puma):
    """The slots' "unchecked" values (the kernel's header): no pairs, no floor, no workspace, no
    balance: clearance and floor +inf, no pair, no bound, the COM margin +inf."""
    _, checker = puma
    flags, info = _pose_check(checker, PUMA_COLLISION, np.full(SK.INFO_LEN, 7.0), pairs=np.zeros((0, 2), np.int64),
                              ws=np.zeros(SK.WS_LEN), bal=np.zeros(SK.BAL_LEN))
    assert flags == 0
    assert info[SK.I_CLEARANCE] == math.inf and info[SK.I_PAIR] == -1.0 and info[SK.I_FLOOR] == math.inf
    assert info[SK.I_WS] == -1.0 and info[SK.I_COM_MARGIN] == math.inf


def test_the_floor_check_looks_at_every_shape_of_a_many_linked_robot(humanoid):
    model, checker = humanoid
    # more shapes than a row of the table has numbers: the humanoid's, twice over
    caps = np.vstack([checker.caps, checker.caps])
    assert len(caps) > caps.shape[1] and len(caps) > SK.W_WIDTH
    q = leaning(model, 5)
    bottoms = [_lowest_reference(w) for w, sh in zip(_world_shapes(checker, q), check_shapes(model)) if sh.link >= 0]
    ws = checker.ws.copy()
    ws[SK.WS_FLOOR_ON], ws[SK.WS_FLOOR_Z] = 1.0, min(bottoms) + 1e-3   # only the lowest shape is under it
    flags, info = _pose_check(checker, q, ws=ws, caps=caps, wpts=np.zeros((len(caps), SK.W_WIDTH)))
    assert flags & FLOOR and info[SK.I_FLOOR] == pytest.approx(-1e-3, abs=1e-9)


def test_capsules_exactly_touching_do_not_collide(puma):
    _, checker = puma
    assert checker.check(PUMA_COLLISION).flags & COLLISION
    pair = checker.pairs[[int(checker.info[SK.I_PAIR])]]
    caps = checker.caps.copy()
    caps[pair[0, 1], SK.C_RADIUS] += checker.info[SK.I_CLEARANCE]     # one radius shrunk until the two just touch
    flags, info = _pose_check(checker, PUMA_COLLISION, caps=caps, pairs=pair)
    assert info[SK.I_CLEARANCE] == 0.0 and not flags & COLLISION


def test_a_centre_of_mass_exactly_at_the_required_margin_is_in_balance(humanoid):
    model, checker = humanoid
    q = leaning(model, 8)
    checker.check(q)
    margin = checker.info[SK.I_COM_MARGIN]
    saved = checker.bal[SK.BAL_MARGIN]
    try:
        checker.bal[SK.BAL_MARGIN] = margin
        assert not checker.check(q).flags & BALANCE
        checker.bal[SK.BAL_MARGIN] = np.nextafter(margin, 1.0)
        assert checker.check(q).flags & BALANCE
    finally:
        checker.bal[SK.BAL_MARGIN] = saved


def _step_with(checker, bal, target, prev):
    """The loop's step with the balance settings `bal` (the PUMA's base links as soles)."""
    m = checker.model
    kin, mt = m.tables
    q_cmd, info = np.empty(m.n), np.empty(SK.INFO_LEN)
    flags = SK.safety_step(np.asarray(target, float), np.asarray(prev, float), np.asarray(prev, float),
                           checker.no_sag[0], m.lower, m.upper, m.velocity_limit, 100.0, 1.0, kin, mt, checker.caps,
                           checker.pairs, checker.ws, bal, q_cmd, np.empty_like(checker.poses),
                           np.empty_like(checker.wpts), info, np.empty(32), np.empty(m.n), np.empty(m.n))
    return flags, q_cmd, info


def _margins(checker, bal, q):
    """(clearance, COM margin) at q with the balance settings `bal`."""
    _, info = _pose_check(checker, q, bal=bal)
    return info[SK.I_CLEARANCE], info[SK.I_COM_MARGIN]


@pytest.mark.parametrize("required", [1e3, -1e3], ids=["out of balance", "in balance"])
def test_a_step_that_worsens_nothing_flagged_is_allowed_whatever_else_changes(puma, required):
    """Out of balance (required margin 1 km), a step may bring two capsules closer as long as none
    collide; in collision, a step out of it may take the COM nearer the soles' edge as long as the
    balance holds; and a step that changes neither measure (the last wrist joint turns a link whose
    mass and capsule lie on its axis) is allowed in collision and out of balance alike."""
    model, checker = puma
    _, bal = _every_check_failing(model, checker, False, False, True)
    bal[SK.BAL_MARGIN] = required
    if required < 0:
        prev = np.asarray(PUMA_COLLISION, float)
    else:   # on the way to that collision, the two capsules 1 to 3 cm apart
        path = [model.home + a * (np.asarray(PUMA_COLLISION) - model.home) for a in np.linspace(0, 1, 101)]
        prev = next(q for q in path if 0.01 < _margins(checker, bal, q)[0] < 0.03)
    c_prev, m_prev = _margins(checker, bal, prev)
    found = 0
    for j in range(model.n):
        for d in (-0.05, 0.05):
            target = prev.copy()
            target[j] += d
            c, m = _margins(checker, bal, target)
            # the measure not flagged gets worse, without crossing its limit
            worse = (0 <= c < c_prev) if required > 0 else (m < m_prev)
            better = (m >= m_prev) if required > 0 else (c >= c_prev)   # the flagged one, not worse
            flags, q_cmd, _ = _step_with(checker, bal, target, prev)
            if worse and better and not flags & (WORKSPACE | FLOOR | LIMIT | RATE):
                assert not flags & HELD and np.array_equal(q_cmd, target), (j, d, flag_names(flags))
                found += 1
    assert found
    prev = np.asarray(PUMA_COLLISION, float)
    bal[SK.BAL_MARGIN] = 1e3
    target = prev.copy()
    target[5] += 0.3
    assert _margins(checker, bal, target) == _margins(checker, bal, prev)
    flags, q_cmd, _ = _step_with(checker, bal, target, prev)
    assert flags & COLLISION and flags & BALANCE and not flags & HELD and np.array_equal(q_cmd, target)


def test_the_path_check_takes_each_rows_own_compensation(humanoid):
    """A row whose balance fails is judged again at the row less its own compliance compensation
    (the pose the loaded servos reach), or less one row given for all."""
    model, checker = humanoid
    lean = np.zeros(model.n)
    for j in ("l_hip_roll", "r_hip_roll"):
        lean[model.joint_index(j)] = math.radians(10.0)
    Q = np.array([model.home, model.home + lean])
    assert checker.check_path(Q)[0] == 1                       # the leaning row fails as it is
    assert checker.check_path(Q, np.array([np.zeros(model.n), lean]))[0] == -1
    assert checker.check_path(Q, np.array([lean, np.zeros(model.n)]))[0] == 1
    assert checker.check_path(Q, lean[None, :])[0] == -1        # one row for all (the upright row stands as it is)
    with pytest.raises(ValueError, match="3 rows for 2 poses"):
        checker.check_path(Q, np.zeros((3, model.n)))


# ------------------------------------------------------------------ boxes
def _random_rotation(rng) -> np.ndarray:
    q, r = np.linalg.qr(rng.normal(size=(3, 3)))
    return q * np.sign(np.diag(r))


def _shape_rows(shapes) -> tuple[np.ndarray, np.ndarray]:
    """(caps, wpts) for shapes placed in the base frame: ("capsule", p0, p1, r) or ("box", c, R, half)."""
    caps = np.zeros((len(shapes), SK.C_WIDTH))
    wpts = np.zeros((len(shapes), SK.W_WIDTH))
    for i, sh in enumerate(shapes):
        caps[i, SK.C_LINK], caps[i, SK.C_PART] = 0, i
        if sh[0] == "capsule":
            _, p0, p1, r = sh
            caps[i, SK.C_P0:SK.C_P0 + 3], caps[i, SK.C_P1:SK.C_P1 + 3], caps[i, SK.C_RADIUS] = p0, p1, r
            wpts[i, :3], wpts[i, 3:6] = p0, p1
        else:
            _, c, R, half = sh
            caps[i, SK.C_KIND] = SK.SHAPE_BOX
            caps[i, SK.C_P0:SK.C_P0 + 3] = caps[i, SK.C_P1:SK.C_P1 + 3] = c
            caps[i, SK.C_AXES:SK.C_AXES + 9] = R.ravel()
            caps[i, SK.C_HALF:SK.C_HALF + 3] = half
            wpts[i, :3] = wpts[i, 3:6] = c
            wpts[i, SK.W_AXES:] = R.ravel()
    return caps, wpts


def _box_distance(points: np.ndarray, c, R, half) -> np.ndarray:
    """Distance from each point to the box (0 inside) and its depth inside (0 outside)."""
    u = (points - c) @ R
    out = np.linalg.norm(np.maximum(np.abs(u) - half, 0.0), axis=1)
    depth = np.maximum(np.min(half - np.abs(u), axis=1), 0.0)
    return out, depth


def test_a_capsule_s_clearance_to_a_box_is_their_distance_or_how_deep_it_reaches_in():
    rng = np.random.default_rng(7)
    s = np.linspace(0.0, 1.0, 20001)[:, None]
    for _ in range(300):
        R = _random_rotation(rng)
        c, half = rng.normal(0, 0.02, 3), rng.uniform(0.002, 0.04, 3)
        p0, p1, r = rng.normal(0, 0.05, 3), rng.normal(0, 0.05, 3), rng.uniform(0.001, 0.02)
        caps, wpts = _shape_rows([("capsule", p0, p1, r), ("box", c, R, half)])
        got = SK.pair_clearance(caps, wpts, 0, 1)
        assert SK.pair_clearance(caps, wpts, 1, 0) == got
        dist, depth = _box_distance(p0 + s * (p1 - p0), c, R, half)
        want = dist.min() - r if dist.min() > 0 else -depth.max() - r
        step = np.linalg.norm(p1 - p0) / (len(s) - 1)   # the samples' spacing bounds their error
        assert got <= want + 1e-9 and got == pytest.approx(want, abs=step + 1e-9), (got, want)


def test_two_boxes_clearance_is_minus_their_least_overlap_and_at_most_their_distance():
    rng = np.random.default_rng(11)
    grid = np.stack(np.meshgrid(*[np.linspace(-1, 1, 13)] * 3), -1).reshape(-1, 3)
    touching = apart = 0
    for _ in range(300):
        Ra, Rb = _random_rotation(rng), _random_rotation(rng)
        ha, hb = rng.uniform(0.005, 0.03, 3), rng.uniform(0.005, 0.03, 3)
        ca, cb = np.zeros(3), rng.normal(0, 0.035, 3)
        caps, wpts = _shape_rows([("box", ca, Ra, ha), ("box", cb, Rb, hb)])
        got = SK.pair_clearance(caps, wpts, 0, 1)
        # points of box a (its surface and inside, on a grid), measured against box b
        pts = ca + (grid * ha) @ Ra.T
        dist, _ = _box_distance(pts, cb, Rb, hb)
        if dist.min() == 0.0:                      # a grid point of a inside b: they overlap
            touching += 1
            assert got < 0.0, got
        elif got > 0:
            apart += 1
            assert got <= dist.min() + 1e-12      # a separating axis's gap never exceeds the distance
    assert touching > 30 and apart > 30, (touching, apart)
    # face to face, turned about the axis between them: the gap is the distance, the overlap the depth
    spin = np.array([[1, 0, 0], [0, math.cos(0.3), -math.sin(0.3)], [0, math.sin(0.3), math.cos(0.3)]])
    for dx, want in ((0.050, 0.010), (0.037, -0.003)):
        caps, wpts = _shape_rows([("box", np.zeros(3), np.eye(3), np.array([0.02, 0.01, 0.01])),
                                  ("box", np.array([dx, 0.004, 0.0]), spin, np.array([0.02, 0.01, 0.01]))])
        assert SK.pair_clearance(caps, wpts, 0, 1) == pytest.approx(want, abs=1e-12)


def test_a_box_s_lowest_point_is_its_lowest_corner():
    rng = np.random.default_rng(3)
    for _ in range(50):
        R, c, half = _random_rotation(rng), rng.normal(0, 0.1, 3), rng.uniform(0.001, 0.05, 3)
        caps, wpts = _shape_rows([("box", c, R, half)])
        corners = c + (np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)]) * half) @ R.T
        assert SK.lowest_point(caps, wpts, 0) == pytest.approx(corners[:, 2].min(), abs=1e-12)


def test_a_part_bounded_two_ways_is_as_far_as_the_farther_of_its_bounds_says():
    """A mesh lies inside its box and inside its capsules: two parts are apart when any pairing of
    their bounds is. A slab's capsule reaches into its neighbour while its box stays clear: no
    collision, and the clearance is the box's; the closest part pair is named by its first row."""
    R = np.eye(3)
    slab_box = ("box", np.zeros(3), R, np.array([0.005, 0.03, 0.04]))
    slab_capsule = ("capsule", np.array([0.0, 0.0, -0.03]), np.array([0.0, 0.0, 0.03]), 0.031)
    other = ("capsule", np.array([0.03, -0.02, 0.0]), np.array([0.03, 0.02, 0.0]), 0.01)
    far = ("capsule", np.array([0.5, 0.0, 0.0]), np.array([0.6, 0.0, 0.0]), 0.01)
    caps, wpts = _shape_rows([slab_box, slab_capsule, other, far])
    # part pairs: (slab, other) pairings box–other, capsule–other; then (slab, far) likewise
    pairs = np.array([[0, 2, 0, 0], [1, 2, 0, 1], [0, 3, 1, 0], [1, 3, 1, 1]], dtype=np.int64)
    info = np.full(SK.INFO_LEN, 0.0)
    info[SK.I_CLEARANCE], info[SK.I_PAIR] = math.inf, -1.0
    SK.closest_parts(caps, pairs, wpts, info)
    assert SK.pair_clearance(caps, wpts, 1, 2) < 0 < SK.pair_clearance(caps, wpts, 0, 2)
    assert info[SK.I_CLEARANCE] == pytest.approx(0.03 - 0.005 - 0.01, abs=1e-12)
    assert info[SK.I_PAIR] == 0.0
    # the slab's box moved into the other capsule as well: both bounds say they touch
    caps[0, SK.C_HALF] = caps[0, SK.C_HALF + 1] = 0.025
    info[SK.I_CLEARANCE], info[SK.I_PAIR] = math.inf, -1.0
    SK.closest_parts(caps, pairs, wpts, info)
    assert info[SK.I_CLEARANCE] == pytest.approx(max(SK.pair_clearance(caps, wpts, 0, 2),
                                                     SK.pair_clearance(caps, wpts, 1, 2)), abs=1e-12)
    assert info[SK.I_CLEARANCE] < 0 and info[SK.I_PAIR] == 0.0
    # the far part alone: its own clearance, named by its first row
    info[SK.I_CLEARANCE], info[SK.I_PAIR] = math.inf, -1.0
    SK.closest_parts(caps, pairs[2:], wpts, info)
    assert info[SK.I_CLEARANCE] == pytest.approx(max(SK.pair_clearance(caps, wpts, 0, 3),
                                                     SK.pair_clearance(caps, wpts, 1, 3)), abs=1e-12)
    assert info[SK.I_PAIR] == 0.0
