"""Inverse kinematics: PUMA closed form, prioritised LM, floating base, continuity.

References are independent: forward kinematics (checked against the papers' matrices in
test_robots_kinematics.py) and geometry computed here with NumPy.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import hil.robots as robots
from hil.errors import InputError
from hil.kinematics import LMSolver, Task, ik_lm, ik_puma
from hil.kinematics.floating import FloatingBase


@pytest.fixture(scope="module")
def puma():
    return robots.load("puma560")


@pytest.fixture(scope="module")
def humanoid():
    return robots.load("humanoid17")


def wrap_diff(a, b):
    return np.abs(np.angle(np.exp(1j * (np.asarray(a) - np.asarray(b)))))


def pose_error(T1, T2):
    """(position error m, rotation error rad) between two poses."""
    dp = float(np.linalg.norm(T1[:3, 3] - T2[:3, 3]))
    R = T1[:3, :3].T @ T2[:3, :3]
    w = 0.5 * np.array([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]])
    dr = math.atan2(float(np.linalg.norm(w)), (np.trace(R) - 1) / 2)  # accurate near 0, unlike acos
    return dp, dr


def random_reachable(puma, rng, k):
    """In-limit configurations whose wrist centre is above the floor."""
    out = []
    while len(out) < k:
        q = rng.uniform(puma.lower, puma.upper)
        if puma.fk(q)[2, 3] > puma.meta["floor_z_m"]:
            out.append(q)
    return np.array(out)


# --------------------------------------------------------------------- PUMA closed form
def test_puma_branches_contain_the_configuration(puma):
    rng = np.random.default_rng(20)
    for q in random_reachable(puma, rng, 3000):
        sols = ik_puma(puma, puma.fk(q), q_near=q)
        d = wrap_diff(sols.q, q).max(axis=1)
        b = int(np.argmin(d))
        assert d[b] < 1e-7, (np.degrees(q), sols)
        assert sols.valid[b] and sols.in_limits[b]
        np.testing.assert_allclose(sols.q[b], q, atol=1e-7)  # wrapped to the very same angles


def test_puma_every_valid_branch_maps_back(puma):
    rng = np.random.default_rng(21)
    worst_p, worst_r, nvalid = 0.0, 0.0, 0
    for q in random_reachable(puma, rng, 1500):
        T = puma.fk(q)
        sols = ik_puma(puma, T)
        assert np.all(np.isfinite(sols.q))
        for b in np.flatnonzero(sols.valid):
            dp, dr = pose_error(puma.fk(sols.q[b]), T)
            worst_p, worst_r = max(worst_p, dp), max(worst_r, dr)
            nvalid += 1
        for b in np.flatnonzero(sols.in_limits):
            assert puma.within_limits(sols.q[b])
    assert nvalid > 1500 * 4
    assert worst_p < 1e-9 and worst_r < 1e-9, (worst_p, worst_r)


def test_puma_branch_labels_describe_the_geometry(puma):
    rng = np.random.default_rng(22)
    for q in random_reachable(puma, rng, 200):
        sols = ik_puma(puma, puma.fk(q))
        for b in np.flatnonzero(sols.valid):
            qb = sols.q[b]
            label = sols.labels[b]
            F = puma.fk_frames(qb)
            # the arm moves in the plane through joint 2's axis at the shoulder offset d2
            shoulder = (F[puma.frame_index("link2")] @ [0, 0, 0.15, 1.0])[:3]
            elbow = F[puma.frame_index("link3"), :3, 3]
            wrist = F[puma.frame_index("wrist"), :3, 3]
            d = wrist - shoulder
            up_dir = np.array([0, 0, 1.0]) - d[2] / (d @ d) * d
            height = (elbow - shoulder) @ up_dir
            if abs(height) > 1e-6 and np.linalg.norm(up_dir) > 1e-3:
                assert ("-up-" in label) == (height > 0), (label, height)
            if abs(qb[4]) > 1e-9:
                assert label.endswith("-flip") == (qb[4] < 0)


def test_puma_branches_come_in_one_fixed_order_whatever_the_target(puma):
    from hil.kinematics import BRANCH_LABELS

    rng = np.random.default_rng(23)
    targets = [puma.fk(q) for q in random_reachable(puma, rng, 100)]
    far = np.eye(4)
    far[:3, 3] = [1.4, 0.3, 0.2]               # out of reach
    near = np.eye(4)
    near[:3, 3] = [0.05, 0.0, 0.3]             # inside the shoulder offset
    for T in targets + [far, near]:
        sols = ik_puma(puma, T)
        assert sols.labels == BRANCH_LABELS     # unique names, right-up-noflip first, for every target
        assert sols.index("left-down-flip") == BRANCH_LABELS.index("left-down-flip")
    for T in targets:                          # reachable: each shoulder's up row is its up solution
        sols = ik_puma(puma, T)
        for sh in ("right", "left"):
            up, down = (sols.index(f"{sh}-{e}-noflip") for e in ("up", "down"))
            if sols.valid[up] and sols.valid[down] and not np.allclose(sols.q[up], sols.q[down]):
                assert sols.q[up][2] != sols.q[down][2]
    assert not ik_puma(puma, far).valid.any() and ik_puma(puma, far).reason


def test_puma_singular_cases_are_finite(puma):
    # θ5 = 0: wrist singular; θ4 is kept from q_near
    q = np.radians([30, -60, 120, 40, 0, -20])
    near = q.copy()
    near[3] = math.radians(15)
    sols = ik_puma(puma, puma.fk(q), q_near=near)
    assert np.all(np.isfinite(sols.q))
    for b in np.flatnonzero(sols.valid):
        dp, dr = pose_error(puma.fk(sols.q[b]), puma.fk(q))
        assert dp < 1e-9 and dr < 1e-9
    res = puma.ik(puma.fk(q), q_near=near)
    assert res.success and res.q[3] == pytest.approx(math.radians(15))
    # elbow stretched: sin(θ3 + φ) = 1
    phi = math.atan2(0.02, 0.5)
    q = np.array([0.3, -1.0, math.pi / 2 - phi, 0.2, 0.5, 0.1])
    sols = ik_puma(puma, puma.fk(q))
    assert sols.valid.any() and np.all(np.isfinite(sols.q))
    for b in np.flatnonzero(sols.valid):
        assert pose_error(puma.fk(sols.q[b]), puma.fk(q))[0] < 1e-7
    # wrist centre exactly at the shoulder offset distance from the shoulder axis (W1x = 0)
    T = np.eye(4)
    T[:3, 3] = [0.15 * math.cos(0.7), 0.15 * math.sin(0.7), 0.4]
    sols = ik_puma(puma, T)
    assert sols.valid.any() and np.all(np.isfinite(sols.q))
    for b in np.flatnonzero(sols.valid):
        assert pose_error(puma.fk(sols.q[b]), T)[0] < 1e-9


def test_puma_unreachable_targets_name_the_reason(puma):
    rng = np.random.default_rng(23)
    for _ in range(300):
        d = rng.normal(size=3)
        d /= np.linalg.norm(d)
        T = np.eye(4)
        T[:3, 3] = d * rng.uniform(1.05, 5.0)
        if T[2, 3] < -0.72:
            continue
        sols = ik_puma(puma, T)
        assert not sols.valid.any() and np.all(np.isfinite(sols.q))
        assert "too far" in sols.reason
    T = np.eye(4)
    T[:3, 3] = [0.05, 0.02, 0.3]
    assert "too close" in ik_puma(puma, T).reason
    T[:3, 3] = [0.3, 0.3, -0.9]
    s = ik_puma(puma, T)
    assert not s.valid.any() and "below the floor" in s.reason
    res = puma.ik(T)
    assert not res.success and np.all(np.isfinite(res.q)) and "below the floor" in res.reason


def test_puma_ik_picks_nearest_in_limit_branch(puma):
    rng = np.random.default_rng(24)
    for q in random_reachable(puma, rng, 100):
        T = puma.fk(q)
        res = puma.ik(T, q_near=q + 0.01)
        assert res.success
        np.testing.assert_allclose(res.q, q, atol=1e-6)
        sols = ik_puma(puma, T, q_near=q)
        for b in np.flatnonzero(sols.in_limits):
            r = puma.ik(T, q_near=q, branch=sols.labels[b])
            assert r.success and r.branch == sols.labels[b]
            np.testing.assert_allclose(r.q, sols.q[b], atol=1e-12)


def test_bad_targets_raise_clear_errors(puma):
    T = puma.fk(puma.home)
    with pytest.raises(InputError, match="shape"):
        ik_puma(puma, T[:3])
    bad = T.copy()
    bad[0, 3] = np.nan
    with pytest.raises(InputError, match=r"target\[0, 3\] is nan"):
        ik_puma(puma, bad)
    bad = T.copy()
    bad[:3, :3] *= 1.1
    with pytest.raises(InputError, match="not orthonormal"):
        puma.ik(bad)
    bad = T.copy()
    bad[:3, 0] *= -1
    with pytest.raises(InputError, match="reflection"):
        ik_puma(puma, bad)
    with pytest.raises(InputError, match="q_near must be finite"):
        ik_puma(puma, T, q_near=[np.nan] * 6)
    with pytest.raises(InputError, match="unknown branch"):
        puma.ik(T, branch="sideways")
    with pytest.raises(InputError, match="q0\\[1\\]"):
        ik_lm(puma, [Task("tool", T)], [0, np.inf, 0, 0, 0, 0])
    with pytest.raises(InputError, match="unknown frame 'hand'"):
        ik_lm(puma, [Task("hand", T)], puma.home)
    with pytest.raises(InputError, match="unknown component"):
        ik_lm(puma, [Task("tool", T, mask="xyz")], puma.home)
    with pytest.raises(InputError, match=r"task 0 \(tool\): target must be a pose \(4, 4\) or a point \(3,\) of numbers"):
        ik_lm(puma, [Task("tool", "above the table")], puma.home)
    with pytest.raises(InputError, match=r"task 0 \(tool\): weight must be one or six non-negative numbers"):
        ik_lm(puma, [Task("tool", T, weight=-1.0)], puma.home)
    # a solver's targets replaced in place: refused with the task named, the old target kept
    solver = LMSolver(puma, [Task("tool", T)])
    for bad, msg in ((np.where(np.eye(4) > 0, np.nan, T), r"task 0 target\[0, 0\] is nan"),
                     ([1.0, "x", 2.0], "task 0: target must be a pose"),
                     (np.zeros(5), r"got shape \(5,\)"), (np.eye(3), r"got shape \(3, 3\)"),
                     (np.zeros((4, 4, 1)), r"got shape \(4, 4, 1\)"), (np.eye(4)[:2], r"got shape \(2, 4\)")):
        with pytest.raises(InputError, match=msg):
            solver.set_target(0, bad)
    with pytest.raises(InputError, match="task index 3 out of range"):
        solver.set_target(3, T)
    np.testing.assert_array_equal(solver.targets[0], T)
    # bad start poses through the solver's fast path: named, and the solver still works afterwards
    q_nan = puma.home.copy()
    q_nan[2] = np.nan
    with pytest.raises(InputError, match=r"q0\[2\] \(elbow\) is nan"):
        solver.solve(q_nan)
    with pytest.raises(InputError, match=r"shape \(6,\)"):
        solver.solve(np.zeros(5))
    assert solver.solve(puma.home).success


# ------------------------------------------------------------------------------ LM IK
def test_lm_converges_to_known_solutions(puma, humanoid):
    rng = np.random.default_rng(25)
    for q in random_reachable(puma, rng, 40):
        T = puma.fk(q)
        res = ik_lm(puma, [Task("tool", T)], q + rng.normal(0, 0.05, 6))
        assert res.success, res.reason
        dp, dr = pose_error(puma.fk(res.q), T)
        assert dp < 1e-9 and dr < 1e-9
    # humanoid: both soles (6D) and the centre of mass, from a nearby start
    for _ in range(20):
        q = humanoid.home + rng.normal(0, 0.1, humanoid.n)
        q = np.clip(q, humanoid.lower, humanoid.upper)
        tasks = [Task("l_sole", humanoid.fk_frame(q, "l_sole")), Task("r_sole", humanoid.fk_frame(q, "r_sole")),
                 Task("com", humanoid.com(q), mask="position")]
        res = ik_lm(humanoid, tasks, q + rng.normal(0, 0.03, humanoid.n))
        assert res.success, res.reason
        for t in tasks[:2]:
            dp, dr = pose_error(humanoid.fk_frame(res.q, t.frame), t.target)
            assert dp < 1e-9 and dr < 1e-9
        assert np.linalg.norm(humanoid.com(res.q) - tasks[2].target) < 1e-9


@pytest.mark.parametrize("mask", ["x y", "x z rz", "x y z rz", "x y z rx ry", "z rx ry rz"])
def test_lm_partial_masks_meet_exactly_their_components(puma, mask):
    # tasks of 2, 3, 4 and 5 rows (the kernel's normal equations have a written-out path for tasks of
    # 3 and 6 rows and a general one for the rest): the constrained components of the reached pose,
    # judged by forward kinematics in the base frame, match the target's
    rng = np.random.default_rng(27)
    components = mask.split()
    for _ in range(20):
        q_goal = rng.uniform(puma.lower, puma.upper) * 0.8
        T = puma.fk(q_goal)
        res = ik_lm(puma, [Task("tool", T, mask=mask)], np.clip(q_goal + rng.normal(0, 0.1, 6), puma.lower, puma.upper))
        assert res.success, res.reason
        R = puma.fk(res.q)
        err_p = T[:3, 3] - R[:3, 3]
        Rerr = T[:3, :3] @ R[:3, :3].T  # base-frame rotation error, small: its axis·angle ≈ its skew part
        err_r = 0.5 * np.array([Rerr[2, 1] - Rerr[1, 2], Rerr[0, 2] - Rerr[2, 0], Rerr[1, 0] - Rerr[0, 1]])
        err = dict(zip(["x", "y", "z", "rx", "ry", "rz"], [*err_p, *err_r]))
        assert max(abs(err[c]) for c in components) < 1e-9, (mask, err)


def test_lm_respects_joint_limits(puma, humanoid):
    rng = np.random.default_rng(26)
    for _ in range(30):
        T = np.eye(4)
        T[:3, 3] = rng.uniform(-1.2, 1.2, 3)
        res = ik_lm(puma, [Task("tool", T, mask="position")], rng.uniform(puma.lower, puma.upper))
        assert np.all(np.isfinite(res.q)) and puma.within_limits(res.q)
    for _ in range(10):
        res = ik_lm(humanoid, [Task("l_hand", rng.uniform(-0.3, 0.3, 3), mask="position")], humanoid.home)
        assert humanoid.within_limits(res.q)


def test_lm_unreachable_gives_nearest_pose_without_oscillation(puma):
    target = np.array([1.4, -0.9, 0.6])
    costs = []
    q = puma.poses["rest"]
    for it in range(1, 40):
        res = ik_lm(puma, [Task("tool", target, mask="position")], puma.poses["rest"], max_iter=it)
        assert np.all(np.isfinite(res.q))
        costs.append(res.residual)
        q = res.q
    assert all(b <= a + 1e-12 for a, b in zip(costs, costs[1:])), costs  # never gets worse
    assert not res.success and "priority-1 target not met" in res.reason
    # the nearest pose stretches the arm towards the target: the farthest the wrist centre gets
    # from the shoulder is sqrt(reach² + d2²) (arm stretched, shoulder offset d2 = 0.15 m aside)
    reach = 0.5 + math.hypot(0.02, 0.5)
    assert res.residual == pytest.approx(np.linalg.norm(target) - math.hypot(reach, 0.15), abs=1e-6)


def test_lm_knee_stretched_leg_pulled_past_full_extension(humanoid):
    # pull the left sole straight down, 2 cm beyond what the stretched leg reaches
    q0 = humanoid.poses["straight"].copy()
    T = humanoid.fk_frame(q0, "l_sole")
    T[2, 3] -= 0.02
    res = ik_lm(humanoid, [Task("l_sole", T)], humanoid.home)
    knee = humanoid.joint_index("l_knee")
    assert not res.success and np.all(np.isfinite(res.q))
    assert humanoid.within_limits(res.q)
    assert res.q[knee] < math.radians(-24.0)  # knee (nearly) straight: −26.0° is straight
    reached = humanoid.fk_frame(res.q, "l_sole")[2, 3]
    assert reached < T[2, 3] + 0.0205 and reached > T[2, 3] + 0.015
    # and it does not oscillate: a few more iterations do not make it worse
    more = ik_lm(humanoid, [Task("l_sole", T)], res.q, max_iter=20)
    assert more.residual <= res.residual + 1e-12


def test_lm_at_singular_wrist(puma):
    # start exactly at θ5 = 0 (the wrist Jacobian loses rank) and ask for a rotation that needs θ5
    q = np.radians([20, -70, 110, 0, 0, 0])
    T = puma.fk(np.radians([20, -70, 110, 30, 20, -10]))
    res = ik_lm(puma, [Task("tool", T)], q)
    assert res.success and np.all(np.isfinite(res.q))
    dp, dr = pose_error(puma.fk(res.q), T)
    assert dp < 1e-9 and dr < 1e-9
    # an orientation the wrist cannot take in its range is approached, never NaN
    T2 = puma.fk(np.radians([20, -70, 110, 0, 0, 0]))
    T2[:3, :3] = T2[:3, :3] @ np.array([[1, 0, 0], [0, -1, 0], [0, 0, -1.0]])  # flip the approach axis
    res = ik_lm(puma, [Task("tool", T2)], q)
    assert np.all(np.isfinite(res.q)) and puma.within_limits(res.q)


def test_lm_lower_priority_does_not_disturb_higher(humanoid):
    # priority 1: left hand position; priority 2: a hand orientation it cannot also take
    q0 = humanoid.home
    p = humanoid.fk_frame(q0, "l_hand")[:3, 3] + [0.02, 0.01, 0.02]
    T_orient = np.eye(4)
    T_orient[:3, :3] = np.array([[0, 0, 1], [0, 1, 0], [-1, 0, 0.0]])
    alone = ik_lm(humanoid, [Task("l_hand", T_orient, mask="orientation")], q0)
    res = ik_lm(humanoid, [Task("l_hand", p, mask="position", priority=1),
                           Task("l_hand", T_orient, mask="orientation", priority=2)], q0)
    assert res.success, res.reason
    assert np.linalg.norm(humanoid.fk_frame(res.q, "l_hand")[:3, 3] - p) < 1e-9
    assert res.residuals[1] > alone.residual  # the orientation gave way, not the position


# --------------------------------------------------------------------- floating base
def test_support_switching_keeps_everything_still(humanoid):
    rng = np.random.default_rng(27)
    q = humanoid.home.copy()
    base = FloatingBase(humanoid, "l_sole", q)
    worst = 0.0
    for k in range(100):
        q = np.clip(q + rng.normal(0, 0.05, humanoid.n), humanoid.lower, humanoid.upper)
        before = {f: base.frame_pose(q, f) for f in ("l_sole", "r_sole", "body")}
        base.switch("r_sole" if base.support == "l_sole" else "l_sole", q)
        for f, T in before.items():
            worst = max(worst, float(np.abs(base.frame_pose(q, f)[:3, 3] - T[:3, 3]).max()))
            np.testing.assert_allclose(base.frame_pose(q, f)[:3, :3], T[:3, :3], atol=1e-12)
        # the support sole stays exactly where it was frozen while the joints move on
        frozen = base.world_T_support
        q2 = np.clip(q + rng.normal(0, 0.05, humanoid.n), humanoid.lower, humanoid.upper)
        np.testing.assert_allclose(base.frame_pose(q2, base.support), frozen, atol=1e-12)
    assert base.switches == 100
    assert worst < 1e-9


def test_floating_base_matches_paper_chain(humanoid):
    # world_T_body = world_T_foot · (leg4_T_foot)⁻¹ ... (body_T_leg1)⁻¹: compare with inverting
    # the body→foot product link by link
    rng = np.random.default_rng(28)
    q = np.clip(humanoid.home + rng.normal(0, 0.1, humanoid.n), humanoid.lower, humanoid.upper)
    base = FloatingBase(humanoid, "l_foot", q)
    F = humanoid.fk_frames(q)
    chain = ["l_hip", "l_thigh", "l_shank", "l_ankle", "l_foot"]
    prev = np.eye(4)
    inv_chain = np.eye(4)
    for name in chain:
        Tl = F[humanoid.frame_index(name)]
        step = np.linalg.inv(prev) @ Tl
        inv_chain = np.linalg.inv(step) @ inv_chain
        prev = Tl
    np.testing.assert_allclose(base.body_pose(q), base.world_T_support @ inv_chain, atol=1e-12)


# ----------------------------------------------------------- continuity (Tanaka & Sugihara 2014 eqs. 2-3)
def _track(humanoid, eps, add_at=60, drop_at=140, steps=200):
    # arms bent (elbows 60°), away from the stretched-arm singularity where any controller needs
    # large joint speeds for small hand motions
    q = humanoid.home.copy()
    for side in "lr":
        q[humanoid.joint_index(f"{side}_elbow")] = math.radians(60)
        q[humanoid.joint_index(f"{side}_shoulder_pitch")] = math.radians(20)
    centre = humanoid.fk_frame(q, "l_hand")[:3, 3]
    contact = humanoid.fk_frame(q, "r_hand")[:3, 3] + [0.03, -0.02, 0.03]
    speeds = []
    for k in range(steps):
        t = k * 0.005
        target = centre + 0.01 * np.array([math.cos(4 * t), math.sin(4 * t), 0.0])
        tasks = [Task("l_hand", target, mask="position", priority=2, max_error_step=eps)]
        if add_at <= k < drop_at:
            tasks.append(Task("r_hand", contact, mask="position", priority=1, max_error_step=eps))
        q_new = ik_lm(humanoid, tasks, q, max_iter=1).q
        speeds.append(np.abs(q_new - q).max() / 0.005)
        q = q_new
    return np.array(speeds)


def test_joint_velocity_bounded_when_constraints_change(humanoid):
    limited = _track(humanoid, eps=0.0005)
    unlimited = _track(humanoid, eps=0.0)
    assert np.all(np.isfinite(limited))
    # with ε the peak speed around the changes stays within the joint speed limit
    assert limited.max() <= humanoid.velocity_limit.min(), limited.max()
    # and it is really the ε rule that does it: without it the added contact jerks the arm
    assert unlimited.max() > 2 * limited.max(), (unlimited.max(), limited.max())


def test_tool_offset_models_have_their_own_ik(puma):
    # a solver cached on the plain model must not leak into a model with a tool
    ik_puma(puma, puma.fk(puma.home))
    tool = np.eye(4)
    tool[:3, 3] = [0.0, 0.02, 0.15]
    tooled = puma.with_tool(tool)
    q = np.radians([30, -60, 120, 20, 40, 10])
    sols = ik_puma(tooled, tooled.fk(q), q_near=q)
    assert np.abs(sols.q - q).max(axis=1).min() < 1e-9
    res = tooled.ik(tooled.fk(q), q_near=q)
    assert res.success and np.abs(res.q - q).max() < 1e-9


def test_lm_with_restarts_reaches_reachable_targets_from_random_starts(puma):
    """Reachable, in-limit PUMA poses from random starts: ≥ 99 % with restarts (LM alone stops on a
    joint limit about half the time); the humanoid's hand to reachable points: ≥ 95 %."""
    rng = np.random.default_rng(31)
    ok = 0
    for _ in range(300):
        T = puma.fk(rng.uniform(puma.lower, puma.upper))
        res = ik_lm(puma, [Task(puma.tool_frame, T)], rng.uniform(puma.lower, puma.upper), restarts=30, seed=1)
        ok += bool(res.success) and puma.within_limits(res.q) and np.abs(puma.fk(res.q) - T).max() < 1e-6
    assert ok >= 297, ok
    hum = robots.load("humanoid17")
    ok = 0
    for _ in range(200):
        q = rng.uniform(hum.lower, hum.upper)
        p = hum.fk_frame(q, "l_hand")[:3, 3]
        res = ik_lm(hum, [Task("l_hand", p, mask="position")], rng.uniform(hum.lower, hum.upper), restarts=30)
        ok += bool(res.success) and np.abs(hum.fk_frame(res.q, "l_hand")[:3, 3] - p).max() < 1e-6
    assert ok >= 190, ok
