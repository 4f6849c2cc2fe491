"""The rocking walk's pattern (hil.motion.rocking) on legs without an ankle roll: each term moves
the legs as it says in the body's axes, whatever each joint's own sign (the Duck's right hip pitch
turns the other way from its left), and the side file's [walk] numbers are checked."""

from __future__ import annotations

import math
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


def _soles(model, q):
    return [model.fk_frame(q, s) for s in ("l_sole", "r_sole")]


def _sample(gait, cycles: float) -> int:
    """The sample at `cycles` (a whole number and a share) of the gait's phase, after its ramp (where
    the terms have their full size)."""
    n = math.ceil(gait.ramp / gait.period)
    return int(round((n + cycles) * gait.period * 200))


def test_a_leg_with_a_hip_roll_and_three_pitch_joints_rocks(standin_duck):
    assert rocking.applies(standin_duck)
    assert not rocking.applies(robots.load("humanoid17"))   # two rolls a leg: the ZMP walk
    assert rocking.applies(robots.load(str(ROOT / "tests" / "unit" / "mjcf" / "biped.xml")))   # no hip yaw either


def test_the_walk_starts_and_ends_at_home_within_the_joints_ranges(standin_duck):
    gait, _ = rocking.gait_of(standin_duck)
    t, Q = rocking.pattern(standin_duck, gait, 6, 200.0)
    assert np.array_equal(Q[0], standin_duck.home) and np.array_equal(Q[-1], standin_duck.home)
    assert t[-1] == pytest.approx(2 * gait.ramp + 3 * gait.period, abs=0.005)
    assert np.all(Q >= standin_duck.lower - 1e-9) and np.all(Q <= standin_duck.upper + 1e-9)


def test_lift_shortens_the_leg_with_its_sole_level(standin_duck):
    """Each leg in turn: its sole rises, level, straight up under the hip; the other stays put."""
    g = replace(STILL, lift=0.15, lift_phase=0.0)
    t, Q = rocking.pattern(standin_duck, g, 6, 200.0)
    home = _soles(standin_duck, standin_duck.home)
    for side, phase in ((0, 0.25), (1, 0.75)):   # sin(own phase) = 1 a quarter cycle in (the right half a cycle on)
        k = _sample(g, phase)
        soles = _soles(standin_duck, Q[k])
        up, other = soles[side], soles[1 - side]
        assert up[2, 3] - home[side][2, 3] > 0.005, side
        assert abs(up[0, 3] - home[side][0, 3]) < 0.002 and np.allclose(up[:3, :3], home[side][:3, :3], atol=1e-6)
        assert np.allclose(other, home[1 - side], atol=1e-9)


def test_swing_moves_each_foot_forward_level_and_sway_rolls_both_hips_one_way(standin_duck):
    g = replace(STILL, swing=0.1, swing_phase=0.0)
    t, Q = rocking.pattern(standin_duck, g, 6, 200.0)
    k = _sample(g, 0.25)   # the left leg's swing at its largest
    left, right = _soles(standin_duck, Q[k])
    home = _soles(standin_duck, standin_duck.home)
    assert left[0, 3] - home[0][0, 3] > 0.005 and right[0, 3] - home[1][0, 3] < -0.005   # one forward, one back
    assert np.allclose(left[:3, :3], home[0][:3, :3], atol=1e-6)
    g = replace(STILL, sway=0.1, sway_phase=0.0)
    t, Q = rocking.pattern(standin_duck, g, 6, 200.0)
    q = Q[_sample(g, 0.25)]
    for leg in legs(standin_duck).values():   # both soles rolled +0.1 rad about the body's x axis
        R = standin_duck.fk_frame(q, leg.sole)[:3, :3] @ standin_duck.fk_frame(standin_duck.home, leg.sole)[:3, :3].T
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




def test_find_gait_is_for_legs_that_rock(capsys):
    from hil.cli import main

    assert main(["walk", "--robot", "humanoid17", "--find-gait"]) == 2
    err = capsys.readouterr().err
    assert "--find-gait searches a rocking walk" in err and len(err.strip().splitlines()) == 1, err
    assert main(["walk", "--robot", "humanoid17", "--generations", "5"]) == 2
    err = capsys.readouterr().err
    assert "--generations: the gait search's, only with --find-gait" in err, err
