"""The rocking walk's pattern (hil.motion.rocking) on legs without an ankle roll: each term moves
the legs as it says in the body's axes, whatever each joint's own sign (the Duck's right hip pitch
turns the other way from its left), and the side file's [walk] numbers are checked."""

from __future__ import annotations

import math
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import hil.robots as robots
from hil.errors import ConfigError
from hil.motion import rocking
from hil.robots.legs import legs

ROOT = Path(__file__).resolve().parents[2]
STILL = replace(rocking.DUCK, sway=0.0, splay=0.0, lift=0.0, swing=0.0, twist=0.0)


@pytest.fixture(scope="module")
def duck(tmp_path_factory):
    """The Duck's side file over the stand-in for its makers' MJCF (tests/unit/mjcf/ducklike.xml)."""
    pytest.importorskip("mujoco")
    folder = tmp_path_factory.mktemp("duck")
    xmls = folder / "open_duck_mini_v2" / "xmls"
    xmls.mkdir(parents=True)
    shutil.copy(ROOT / "tests" / "unit" / "mjcf" / "ducklike.xml", xmls / "scene_flat_terrain.xml")
    shutil.copy(ROOT / "examples" / "robots" / "open_duck_mini_v2.toml", folder / "duck.toml")
    return robots.load(str(folder / "duck.toml"))


def _soles(model, q):
    return [model.fk_frame(q, s) for s in ("l_sole", "r_sole")]


def _sample(gait, cycles: float) -> int:
    """The sample at `cycles` (a whole number and a share) of the gait's phase, after its ramp (where
    the terms have their full size)."""
    n = math.ceil(gait.ramp / gait.period)
    return int(round((n + cycles) * gait.period * 200))


def test_a_leg_with_a_hip_roll_and_three_pitch_joints_rocks(duck):
    assert rocking.applies(duck)
    assert not rocking.applies(robots.load("humanoid17"))   # two rolls a leg: the ZMP walk
    assert rocking.applies(robots.load(str(ROOT / "tests" / "unit" / "mjcf" / "biped.xml")))   # no hip yaw either


def test_the_walk_starts_and_ends_at_home_within_the_joints_ranges(duck):
    gait, _ = rocking.gait_of(duck)
    t, Q = rocking.pattern(duck, gait, 6, 200.0)
    assert np.array_equal(Q[0], duck.home) and np.array_equal(Q[-1], duck.home)
    assert t[-1] == pytest.approx(2 * gait.ramp + 3 * gait.period, abs=0.005)
    assert np.all(Q >= duck.lower - 1e-9) and np.all(Q <= duck.upper + 1e-9)


def test_lift_shortens_the_leg_with_its_sole_level(duck):
    """Each leg in turn: its sole rises, level, straight up under the hip; the other stays put."""
    g = replace(STILL, lift=0.15, lift_phase=0.0)
    t, Q = rocking.pattern(duck, g, 6, 200.0)
    home = _soles(duck, duck.home)
    for side, phase in ((0, 0.25), (1, 0.75)):   # sin(own phase) = 1 a quarter cycle in (the right half a cycle on)
        k = _sample(g, phase)
        soles = _soles(duck, Q[k])
        up, other = soles[side], soles[1 - side]
        assert up[2, 3] - home[side][2, 3] > 0.005, side
        assert abs(up[0, 3] - home[side][0, 3]) < 0.002 and np.allclose(up[:3, :3], home[side][:3, :3], atol=1e-6)
        assert np.allclose(other, home[1 - side], atol=1e-9)


def test_swing_moves_each_foot_forward_level_and_sway_rolls_both_hips_one_way(duck):
    g = replace(STILL, swing=0.1, swing_phase=0.0)
    t, Q = rocking.pattern(duck, g, 6, 200.0)
    k = _sample(g, 0.25)   # the left leg's swing at its largest
    left, right = _soles(duck, Q[k])
    home = _soles(duck, duck.home)
    assert left[0, 3] - home[0][0, 3] > 0.005 and right[0, 3] - home[1][0, 3] < -0.005   # one forward, one back
    assert np.allclose(left[:3, :3], home[0][:3, :3], atol=1e-6)
    g = replace(STILL, sway=0.1, sway_phase=0.0)
    t, Q = rocking.pattern(duck, g, 6, 200.0)
    q = Q[_sample(g, 0.25)]
    for leg in legs(duck).values():   # both soles rolled +0.1 rad about the body's x axis
        R = duck.fk_frame(q, leg.sole)[:3, :3] @ duck.fk_frame(duck.home, leg.sole)[:3, :3].T
        assert math.atan2(R[2, 1], R[2, 2]) == pytest.approx(0.1, abs=1e-4), leg.side


@pytest.mark.parametrize("table, said", [
    ({"gait": "zmp"}, "gait = 'zmp'"),
    ({"period_s": 0.0}, "period_s = 0.0 must be a number in 0.2 … 5"),
    ({"sway_deg": "lots"}, "sway_deg = 'lots'"),
    ({"swing_deg": True}, "swing_deg = True"),
    ({"stride": 0.03}, "unknown key 'stride'"),
])
def test_a_walk_table_is_checked_naming_the_key(table, said):
    with pytest.raises(ConfigError) as e:
        rocking.from_table(table, "duck.toml")
    assert "duck.toml: [walk]" in str(e.value) and said in str(e.value), str(e.value)


def test_a_walk_that_stays_up_but_gets_nowhere_is_refused(duck):
    """Every amplitude zero: the robot stands through all its rollouts, and the plan says it goes
    nowhere rather than calling that a walk."""
    import copy

    from hil.errors import UnreachableError

    still = copy.copy(duck)
    still.meta = dict(duck.meta, walk={"gait": "rocking", "sway_deg": 0, "splay_deg": 0, "lift_deg": 0,
                                        "swing_deg": 0, "twist_deg": 0})
    with pytest.raises(UnreachableError) as e:
        rocking.plan(still, 2, 200.0)
    assert "stays up but gets nowhere in physics" in str(e.value), str(e.value)


def test_a_gait_search_improves_on_its_start_and_prints_what_it_scored(duck):
    """Two short generations on the stand-in: the best is no worse than the gait it started from
    (the Duck's, which falls there), within the search's ranges, and the [walk] table it prints
    reads back as the very gait it scored (a rocking walk can hang on the fourth digit)."""
    import tomllib

    from hil.motion import rocking_search

    said = []
    found = rocking_search.search(duck, steps=2, generations=2, population=6, rollouts=2, say=said.append)
    assert found.score_m >= found.start_score_m and found.tried == 13 and len(said) == 2
    bounds = rocking_search._bounds(duck)
    values = [getattr(found.gait, n) for n in rocking_search.NAMES]
    assert all(lo - 1e-3 <= v <= hi + 1e-3 for v, (lo, hi) in zip(values, bounds))
    table = tomllib.loads(rocking_search.as_table(found.gait))["walk"]
    again = rocking.from_table(table, "found")
    assert all(getattr(again, n) == pytest.approx(getattr(found.gait, n), rel=1e-9, abs=1e-12)
               for n in rocking_search.NAMES)


def test_find_gait_is_for_legs_that_rock(capsys):
    from hil.cli import main

    assert main(["walk", "--robot", "humanoid17", "--find-gait"]) == 2
    err = capsys.readouterr().err
    assert "--find-gait searches a rocking walk" in err and len(err.strip().splitlines()) == 1, err
    assert main(["walk", "--robot", "humanoid17", "--generations", "5"]) == 2
    err = capsys.readouterr().err
    assert "--generations: the gait search's, only with --find-gait" in err, err


def test_a_rocking_walks_file_runs_the_commands_physics_checked(duck, tmp_path):
    """What physics rolled out is what the servos are told: loaded for a run (its balance rolled
    out again), the file's commands get no compliance compensation on top (with it, the Duck fell
    2.8 s into its walk in --dry-run --physics), and the static balance check is off for it."""
    from hil.runtime.motion_sources import make_motion

    t, Q = rocking.pattern(duck, replace(STILL, ramp=0.3), 2, 100.0)
    walk = rocking.RockingWalk(t, Q, STILL, "", None, np.zeros(2), np.zeros((len(t), 3)))
    path = tmp_path / "walk.npz"
    walk.save(str(path))
    traj = make_motion(str(path), duck, compensate=True)
    assert np.array_equal(traj.q, Q) and traj.dynamic_balance_checked and traj.balance_checked_by == "physics"


def test_a_file_claiming_physics_checked_it_on_a_robot_that_cannot_fall_is_refused(tmp_path):
    from hil.errors import InputError
    from hil.runtime.motion_sources import make_motion

    pytest.importorskip("mujoco")
    arm = robots.load("puma560")
    t = np.arange(0, 1, 0.01)
    q = np.tile(arm.home, (len(t), 1))
    path = tmp_path / "claim.npz"
    np.savez(path, t=t, q=q, q_plan=q, balance_checked_in_physics=np.array(True))
    with pytest.raises(InputError) as e:
        make_motion(str(path), arm)
    said = str(e.value)
    assert str(path) in said and "the file says physics checked its balance" in said and "\n" not in said, said
