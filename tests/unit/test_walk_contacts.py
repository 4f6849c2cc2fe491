"""Toe-off and heel strike (Tanaka & Sugihara 2014's minimal support region): each foot lifts off from its
inner toe corner and lands on its outer heel corner, only what touches is constrained and counted
in the support polygon, the single-support ZMP follows eq. 1, and motion and trajectory files
keep the contacts."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hil.errors import InputError, UnreachableError
from hil.motion import contacts, keyframes, walking
from hil.motion.contacts import AIR, FLAT, HEEL, TOE
from hil.runtime.motion_sources import Trajectory


def test_support_codes_name_and_mirror_every_pair():
    assert (contacts.encode(FLAT, FLAT), contacts.encode(FLAT, AIR), contacts.encode(AIR, FLAT)) == (0, 1, 2)
    for code in contacts.VALID_CODES:
        assert contacts.encode(*contacts.decode(code)) == code
        assert contacts.parse(contacts.name(code)) == code
        assert contacts.mirror(contacts.mirror(code)) == code
    assert len(contacts.VALID_CODES) == 15   # every pair but both feet in the air
    assert contacts.name(contacts.mirror(contacts.parse("l_toe+r_flat"))) == "l_flat+r_toe"
    assert contacts.mirror(contacts.LEFT) == contacts.RIGHT
    for bad in ("l_air+r_air", "left foot", "l_toe", "r_flat+l_flat", ""):
        with pytest.raises(ValueError, match="support must be"):
            contacts.parse(bad)
    for bad in (3, 16, 99, -1):
        with pytest.raises(ValueError):
            contacts.decode(bad)
    assert not contacts.is_valid([3, 16, 32]).any() and contacts.is_valid(list(contacts.VALID_CODES)).all()


def _feet(res) -> np.ndarray:
    return np.array([contacts.decode(int(c)) for c in res.support])


def _runs(kinds: np.ndarray) -> list[tuple[int, int, int]]:
    """(kind, first sample, end sample) of each run of one kind."""
    edges = np.flatnonzero(np.diff(kinds)) + 1
    starts = np.concatenate([[0], edges])
    ends = np.concatenate([edges, [len(kinds)]])
    return [(int(kinds[a]), int(a), int(b)) for a, b in zip(starts, ends)]


def test_each_foot_lifts_off_its_toe_and_lands_on_its_heel(walk_rolling):
    feet = _feet(walk_rolling)
    swings = 0
    for f in range(2):
        order = [kind for kind, _, _ in _runs(feet[:, f])]
        for i, kind in enumerate(order):
            if kind == AIR:
                swings += 1
                assert order[i - 2:i + 3] == [FLAT, TOE, AIR, HEEL, FLAT], order
    assert swings == 6
    # one foot rolls at a time, the other flat (two single corners would make a polygon of no area)
    rolling = np.isin(feet, (TOE, HEEL))
    assert np.all(feet[rolling[:, 0], 1] == FLAT) and np.all(feet[rolling[:, 1], 0] == FLAT)


def _corner_heights(res, hum, k: int, f: int) -> dict[str, float]:
    hl, hw = hum.sole_half
    side = "lr"[f]
    return {nm: float((res.feet_w[k, f] @ [x, y, 0, 1])[2]) for nm, x, y in contacts.corners(side, FLAT, hl, hw)}


def _pitch_deg(T: np.ndarray) -> float:
    return math.degrees(math.atan2(-T[2, 0], math.hypot(T[0, 0], T[1, 0])))


@pytest.mark.parametrize("kind", [TOE, HEEL])
def test_a_rolling_foot_touches_with_one_corner_and_holds_the_rest_up(walk_rolling, hum, kind):
    feet = _feet(walk_rolling)
    hl, hw = hum.sole_half
    p = walking.WalkParams()
    seen = 0
    for f, side in enumerate("lr"):
        for kk, a, b in _runs(feet[:, f]):
            if kk != kind:
                continue
            seen += 1
            touching = contacts.corners(side, kind, hl, hw)[0][0]
            for k in range(a, b):
                h = _corner_heights(walk_rolling, hum, k, f)
                assert abs(h.pop(touching)) < 1e-8
                assert min(h.values()) > 0.0
            # the other corner of that edge is held up by the edge roll, the opposite edge by the pitch
            end = b - 1 if kind == TOE else a
            h = _corner_heights(walk_rolling, hum, end, f)
            edge = [nm for nm in h if nm.split("_")[1] == touching.split("_")[1] and nm != touching]
            assert h[edge[0]] == pytest.approx(2 * hw * math.sin(contacts.EDGE_LIFT), rel=0.05)
            # heel up on the toe, toe up on the heel, by the planned pitch at lift-off and touchdown
            # (within the sample that lies nearest those instants)
            pitch = _pitch_deg(walk_rolling.feet_w[end, f])
            assert pitch == pytest.approx(p.contact_pitch_deg if kind == TOE else -p.contact_pitch_deg, abs=0.4)
    assert seen == 6


def _margin(points: np.ndarray, z: np.ndarray) -> float:
    """Signed distance of z inside the convex hull of points, from every pair that bounds them all."""
    best = math.inf
    for i in range(len(points)):
        for j in range(len(points)):
            e = points[j] - points[i]
            L = math.hypot(*e)
            if i == j or L < 1e-12:
                continue
            side = (e[0] * (points[:, 1] - points[i, 1]) - e[1] * (points[:, 0] - points[i, 0])) / L
            if side.min() >= -1e-12:   # a hull edge, counter-clockwise
                best = min(best, (e[0] * (z[1] - points[i, 1]) - e[1] * (z[0] - points[i, 0])) / L)
    return best


def test_the_support_polygon_is_what_touches(walk_rolling, hum):
    feet = _feet(walk_rolling)
    hl, hw = hum.sole_half
    rolling = np.flatnonzero(np.isin(feet, (TOE, HEEL)).any(axis=1))
    smaller = 0
    for k in rolling[::3]:
        touching, whole = [], []
        for f, side in enumerate("lr"):
            for kind, out in ((int(feet[k, f]), touching), (FLAT, whole)):
                out += [(walk_rolling.feet_w[k, f] @ [x, y, 0, 1])[:2] for _, x, y in contacts.corners(side, kind, hl, hw)]
        m = _margin(np.array(touching), walk_rolling.zmp_w[k])
        assert walk_rolling.margin[k] == pytest.approx(m, abs=1e-9)
        smaller += _margin(np.array(whole), walk_rolling.zmp_w[k]) > m + 1e-4
    assert smaller > len(rolling[::3]) // 4   # counting the rolling sole whole would have been larger


def test_the_touching_corner_stays_put_and_lands_and_lifts_at_rest(walk_rolling, hum):
    feet = _feet(walk_rolling)
    hl, hw = hum.sole_half
    dt = walk_rolling.t[1] - walk_rolling.t[0]
    for f, side in enumerate("lr"):
        for kind, a, b in _runs(feet[:, f]):
            if kind not in (TOE, HEEL):
                continue
            _, x, y = contacts.corners(side, kind, hl, hw)[0]
            P = np.array([(walk_rolling.feet_w[k, f] @ [x, y, 0, 1])[:3] for k in range(a - 1, b + 1)])
            # one point from the flat sole to lift-off (toe), from touchdown to the flat sole (heel)
            still = P[:-1] if kind == TOE else P[1:]
            assert np.abs(still - still[0]).max() < 1e-8
            # the corner leaves (toe) or reaches (heel) the ground at rest: its speed there is what
            # a quintic from rest gives in one sample, a small part of the swing's mean speed
            step = P[-1] - P[-2] if kind == TOE else P[1] - P[0]
            assert np.linalg.norm(step) / dt < 0.01, np.linalg.norm(step) / dt


def test_single_support_zmp_follows_eq_1():
    model = __import__("hil.robots", fromlist=["load"]).load("humanoid17")
    res = walking.generate(model, walking.WalkParams(steps=2, knee_stretched=True))
    p = res.params
    N, travel = p.zmp_power, abs(p.stride) * (1 - p.double_support)
    T_ss = p.period * (1 - p.double_support)
    checked = 0
    for i in range(p.steps):
        t0 = p.stand + p.settle + i * p.period
        on = (res.t >= t0) & (res.t < t0 + T_ss)
        k0 = int(np.flatnonzero(on)[0])
        stance = 0 if contacts.decode(int(res.support[k0]))[0] != AIR else 1
        F = res.feet_w[k0, stance]
        u = (res.t[on] - t0) / T_ss
        local = np.linalg.inv(F) @ np.column_stack([res.zmp_ref[on], np.zeros(on.sum()), np.ones(on.sum())]).T
        x_k, x_s = -travel / 2, travel / 2
        np.testing.assert_allclose(local[0], x_s - (x_s - x_k) * (1 - u) ** N, atol=1e-12)
        np.testing.assert_allclose(local[1], 0.0, atol=1e-12)
        checked += on.sum()
    assert checked > 150


def test_rolling_feet_reach_a_stride_flat_feet_cannot(hum):
    p = walking.WalkParams(steps=3, stride=0.05, knee_stretched=True)
    with pytest.raises(UnreachableError, match="cannot keep contact"):
        walking.plan(hum, walking.WalkParams(**{**p.__dict__, "heel_toe": False}), say=lambda s: None)
    res = walking.plan(hum, p, say=lambda s: None)
    assert res.margin.min() > 0 and res.knee_mid_stance_deg < 4.0 and "toe-off and heel strike" in res.summary()


def test_no_sole_corner_goes_below_the_ground(walk6, walk_rolling, hum):
    # the flat walk's swing is pitched about the sole centre: its pitch is held under what the lift
    # leaves room for (it went 13 µm into the ground before)
    assert walk6.min_foot_z >= -1e-9 and walk_rolling.min_foot_z >= -1e-9
    low = walk6.lowest.copy()
    low[500] = -2e-5
    bad = walking.WalkResult(**{**walk6.__dict__, "lowest": low, "min_foot_z": -2e-5})
    with pytest.raises(UnreachableError, match=r"0.020 mm into the ground at t = 2.500 s"):
        walking.refuse_unsafe(hum, bad)


def test_motion_files_keep_each_foots_contact(walk_rolling, hum, tmp_path):
    motion = keyframes.from_walk(walk_rolling, hum, "rolling")
    names = {k.support for k in motion.keyframes}
    assert {"l_toe+r_flat", "l_flat+r_heel", "l_heel+r_flat", "l_flat+r_toe"} <= names
    out = tmp_path / "w.toml"
    keyframes.save_motion(out, motion, hum)
    back = keyframes.load_motion(out, hum)
    assert [k.support for k in back.keyframes] == [k.support for k in motion.keyframes]
    back.check_dynamic(hum, 200.0)
    mirrored = out.read_text().replace('dynamic = true', 'dynamic = true\nmirror = true')
    (tmp_path / "m.toml").write_text(mirrored)
    flipped = keyframes.load_motion(tmp_path / "m.toml", hum)
    assert [k.support for k in flipped.keyframes] == [
        contacts.name(contacts.mirror(contacts.parse(k.support))) for k in motion.keyframes]
    (tmp_path / "bad.toml").write_text('[[keyframe]]\nduration_s = 1\nsupport = "l_air+r_air"\n')
    with pytest.raises(keyframes.ConfigError, match="keyframe 1: support must be"):
        keyframes.load_motion(tmp_path / "bad.toml", hum)


def test_trajectory_files_with_contacts_are_checked_again(walk_rolling, hum, tmp_path):
    path = tmp_path / "w.npz"
    walk_rolling.save(str(path))
    traj = Trajectory.load(str(path), hum)
    assert traj.dynamic_balance_checked and np.array_equal(traj.support, walk_rolling.support)
    with np.load(path) as f:
        data = dict(f)
    data["support"] = data["support"].copy()
    data["support"][100] = contacts.encode(AIR, AIR)
    np.savez(path, **data)
    with pytest.raises(InputError, match="support code"):
        Trajectory.load(str(path), hum)
