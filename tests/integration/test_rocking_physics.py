"""The rocking walk in physics (hil.motion.rocking, hil.motion.rocking_search): planned and
checked by rollouts, searched, loaded for a run. Their rollouts take every CPU, as --predict's do:
this file runs in a chain of loop tests (tests/conftest.py), not beside them."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import hil.robots as robots
from hil.motion import rocking
STILL = replace(rocking.DUCK, sway=0.0, splay=0.0, lift=0.0, swing=0.0, twist=0.0)



def test_a_walk_that_stays_up_but_gets_nowhere_is_refused(standin_duck):
    """Every amplitude zero: the robot stands through all its rollouts, and the plan says it goes
    nowhere rather than calling that a walk."""
    import copy

    from hil.errors import UnreachableError

    still = copy.copy(standin_duck)
    still.meta = dict(standin_duck.meta, walk={"gait": "rocking", "sway_deg": 0, "splay_deg": 0, "lift_deg": 0,
                                        "swing_deg": 0, "twist_deg": 0})
    with pytest.raises(UnreachableError) as e:
        rocking.plan(still, 2, 200.0)
    assert "stays up but gets nowhere in physics" in str(e.value), str(e.value)



def test_a_gait_search_improves_on_its_start_and_prints_what_it_scored(standin_duck):
    """Two short generations on the stand-in: the best is no worse than the gait it started from
    (the Duck's, which falls there), within the search's ranges, and the [walk] table it prints
    reads back as the very gait it scored (a rocking walk can hang on the fourth digit)."""
    import tomllib

    from hil.motion import rocking_search

    said = []
    found = rocking_search.search(standin_duck, steps=2, generations=2, population=6, rollouts=2, say=said.append)
    assert found.score_m >= found.start_score_m and found.tried == 13 and len(said) == 2
    bounds = rocking_search._bounds(standin_duck)
    values = [getattr(found.gait, n) for n in rocking_search.NAMES]
    assert all(lo - 1e-3 <= v <= hi + 1e-3 for v, (lo, hi) in zip(values, bounds))
    table = tomllib.loads(rocking_search.as_table(found.gait))["walk"]
    again = rocking.from_table(table, "found")
    assert all(getattr(again, n) == pytest.approx(getattr(found.gait, n), rel=1e-9, abs=1e-12)
               for n in rocking_search.NAMES)



def test_a_rocking_walks_file_runs_the_commands_physics_checked(standin_duck, tmp_path):
    """What physics rolled out is what the servos are told: loaded for a run (its balance rolled
    out again), the file's commands get no compliance compensation on top (with it, the Duck fell
    2.8 s into its walk in --dry-run --physics), and the static balance check is off for it."""
    from hil.runtime.motion_sources import make_motion

    t, Q = rocking.pattern(standin_duck, replace(STILL, ramp=0.3), 2, 100.0)
    walk = rocking.RockingWalk(t, Q, STILL, "", None, np.zeros(2), np.zeros((len(t), 3)))
    path = tmp_path / "walk.npz"
    walk.save(str(path))
    traj = make_motion(str(path), standin_duck, compensate=True)
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


def test_legs_without_an_ankle_roll_whose_rocking_walk_falls_are_one_line(capsys):
    """biped.xml's four-joint legs rock; the Open Duck Mini's numbers, scaled to them, fall in its
    physics: refused in one line before anything starts."""
    from pathlib import Path

    from hil.cli import main

    biped = Path(__file__).resolve().parents[1] / "unit" / "mjcf" / "biped.xml"
    assert main(["walk", "--robot", str(biped), "--steps", "2"]) == 2
    out, err = capsys.readouterr()
    assert "walk: refused: the rocking walk falls in 8 of 8 rollouts in physics" in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err and "walks rocking" in out
