"""The side files shipped for kits people own (examples/robots/), tried as their users would: with
the makers' file where its comments say to put it. The makers' files are not ours to ship: stand-ins
written for the tests take their place (tests/unit/mjcf/op3like.xml: Menagerie's OP3 bodies, joint
names, axes and link offsets, its servos' identified numbers, simpler shapes; ducklike.xml: the Open
Duck Mini v2's joint names, ranges and servos, its feet's spacing and size, its own geometry)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("mujoco")

ROOT = Path(__file__).resolve().parents[2]
from tests.launch import HIL  # noqa: E402 - the tests' way to start `hil` (tests/launch.py)


@pytest.fixture
def op3(tmp_path) -> Path:
    """examples/robots/op3.toml with the stand-in where a user puts Menagerie's robotis_op3 folder."""
    (tmp_path / "robotis_op3").mkdir()
    shutil.copy(ROOT / "tests" / "unit" / "mjcf" / "op3like.xml", tmp_path / "robotis_op3" / "op3.xml")
    shutil.copy(ROOT / "examples" / "robots" / "op3.toml", tmp_path / "op3.toml")
    return tmp_path / "op3.toml"


@pytest.fixture
def op3_from_urdf(tmp_path) -> Path:
    """examples/robots/op3_urdf.toml beside a URDF of the OP3 stand-in (as `hil urdf` writes it)
    where a user puts the one xacro makes of ROBOTIS's op3_description."""
    from hil import robots
    from hil.robots.urdf_export import to_urdf

    (tmp_path / "robotis_op3.urdf").write_text(to_urdf(robots.load(str(ROOT / "tests" / "unit" / "mjcf" / "op3like.xml"))))
    shutil.copy(ROOT / "examples" / "robots" / "op3_urdf.toml", tmp_path / "op3_urdf.toml")
    return tmp_path / "op3_urdf.toml"


@pytest.fixture
def duck(tmp_path) -> Path:
    """examples/robots/open_duck_mini_v2.toml with the stand-in where its makers' folder goes."""
    xmls = tmp_path / "open_duck_mini_v2" / "xmls"
    xmls.mkdir(parents=True)
    shutil.copy(ROOT / "tests" / "unit" / "mjcf" / "ducklike.xml", xmls / "scene_flat_terrain.xml")
    shutil.copy(ROOT / "examples" / "robots" / "open_duck_mini_v2.toml", tmp_path / "open_duck_mini_v2.toml")
    return tmp_path / "open_duck_mini_v2.toml"


@pytest.fixture
def duck_from_urdf(tmp_path) -> Path:
    """examples/robots/open_duck_mini_v2_urdf.toml beside a URDF of the Duck's stand-in (as `hil urdf`
    writes it) where a user copies the makers' mini_bdx/robots/open_duck_mini_v2 folder."""
    from hil import robots
    from hil.robots.urdf_export import to_urdf

    (tmp_path / "open_duck_mini_v2_urdf").mkdir()
    (tmp_path / "open_duck_mini_v2_urdf" / "robot.urdf").write_text(
        to_urdf(robots.load(str(ROOT / "tests" / "unit" / "mjcf" / "ducklike.xml"))))
    shutil.copy(ROOT / "examples" / "robots" / "open_duck_mini_v2_urdf.toml", tmp_path / "duck_urdf.toml")
    return tmp_path / "duck_urdf.toml"


@pytest.mark.slow
def test_the_op3_side_file_loads_plans_a_walk_and_walks_it_in_physics(op3, tmp_path):
    r = subprocess.run(HIL + ["robots", "--robot", str(op3)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "20 joints" in r.stdout and "MJCF" in r.stdout and "servos: custom" in r.stdout
    assert "no range" not in r.stdout            # every joint has its stops from the side file
    stats = tmp_path / "stats.json"
    r = subprocess.run(HIL + ["walk", "--robot", str(op3), "--steps", "6", "--dry-run", "--physics", "--headless",
                              "--stats-json", str(stats)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    plan = next(line for line in r.stdout.splitlines() if line.startswith("plan: 6 steps of"))
    knee = float(plan.split("support knee at mid-stance ")[1].split("°")[0])
    assert 10 < knee < 90, plan                  # bent, as the home pose has it (either knee's sign)
    physics = json.loads(stats.read_text())["physics"]
    assert not physics["fell"] and physics["max_tilt_deg"] < 15 and "its own MJCF file" in r.stdout
    # the planned travel is 5 strides and the closing half step; most of it is walked
    stride = float(plan.split("steps of ")[1].split(" cm")[0]) / 100
    assert physics["base_travel_m"][0] > 0.8 * 5 * stride


@pytest.mark.slow
def test_the_op3_side_file_for_robotis_urdf_loads_and_plans_the_walk_the_mjcf_one_does(op3_from_urdf, op3):
    """ROBOTIS's own description, as a URDF: the same joints, stops, home and servos as the MJCF's
    side file, nothing left out of the self-collision check (its knee brackets are checked as
    their boxes), and the same default walk."""
    from hil import robots

    model = robots.load(str(op3_from_urdf))
    assert model.kind == "humanoid" and model.meta["servo"]["preset"] == "XM430-W350-OP3"
    assert not model.meta.get("allowed_collisions")
    twin = robots.load(str(op3))
    assert model.joint_names == twin.joint_names
    np.testing.assert_allclose(model.lower, twin.lower)
    np.testing.assert_allclose(model.upper, twin.upper)
    np.testing.assert_allclose(model.home, twin.home)
    plans = []
    for side in (op3_from_urdf, op3):
        r = subprocess.run(HIL + ["walk", "--robot", str(side), "--steps", "6"], capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        plans.append(next(line for line in r.stdout.splitlines() if line.startswith("plan: ")))
    assert all(p.startswith("plan: 6 steps of 3.9 cm forward") for p in plans), plans


def test_the_duck_side_file_loads_and_plays_its_crouch_in_physics(duck, tmp_path):
    r = subprocess.run(HIL + ["robots", "--robot", str(duck)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "14 joints" in r.stdout and "MJCF" in r.stdout and "servos: custom" in r.stdout
    stats = tmp_path / "stats.json"
    r = subprocess.run(HIL + ["play", str(ROOT / "examples" / "duck_squat.toml"), "--robot", str(duck),
                              "--dry-run", "--physics", "--headless", "--stats-json", str(stats)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "its own MJCF file" in r.stdout and "compliance compensation on" in r.stdout, \
        r.stdout + r.stderr
    physics = json.loads(stats.read_text())["physics"]
    assert not physics["fell"] and physics["max_tilt_deg"] < 10, physics


# A rocking walk searched for the stand-in as the Duck's was in its makers' MJCF (docs/robots.md):
# an open-loop gait is its robot's own, and the Duck's falls on the stand-in
STANDIN_WALK = """
[walk]
gait = "rocking"
{numbers}
"""
STANDIN_NUMBERS = """period_s = 1.397
ramp_s = 1.287
sway_deg = 0.55
sway_phase_deg = 82.03
splay_deg = -11.34
lift_deg = 4.882
lift_phase_deg = -77.17
swing_deg = 17.09
swing_phase_deg = -160.1
twist_deg = 5.856"""


def _replayed(mjcf: Path, names, walk: Path) -> list[tuple[float, float]]:
    """The walk file's commands replayed open loop in the MJCF's own model (its actuators), as an
    outside check does: (share of the planned travel covered, worst tilt °) for servo stiffness
    ×0.8 and ×1.2, masses ×0.9 and ×1.1, floor friction 1 and 0.7."""
    import math

    import mujoco

    f = np.load(walk)
    t, Q, com = f["t"], f["q"], f["com_w"]
    planned = com[-1, :2] - com[0, :2]
    out = []
    for kp in (0.8, 1.2):
        for mass in (0.9, 1.1):
            for friction in (1.0, 0.7):
                m = mujoco.MjModel.from_xml_path(str(mjcf))
                m.actuator_gainprm[:, 0] *= kp
                m.actuator_biasprm[:, 1] *= kp
                m.body_mass[:] *= mass
                m.body_inertia[:] *= mass
                m.geom_friction[:, 0] = friction
                d = mujoco.MjData(m)
                columns = [m.actuator(n).id for n in names]
                for k, a in enumerate(columns):
                    d.qpos[m.jnt_qposadr[m.actuator_trnid[a, 0]]] = Q[0, k]
                mujoco.mj_forward(m, d)
                tilt, x0 = 0.0, None
                for k in range(-int(0.5 / (t[1] - t[0])), len(t)):   # half a second standing first
                    d.ctrl[columns] = Q[max(k, 0)]
                    for _ in range(int(round((t[1] - t[0]) / m.opt.timestep))):
                        mujoco.mj_step(m, d)
                    if k == 0:
                        x0 = d.qpos[:2].copy()
                    w, x, y, z = d.qpos[3:7]
                    tilt = max(tilt, math.degrees(math.acos(min(1.0, 1 - 2 * (x * x + y * y)))))
                covered = float((d.qpos[:2] - x0) @ planned) / float(planned @ planned)
                out.append((covered, tilt))
    return out


def test_the_duck_walks_rocking_where_its_gait_holds_and_is_refused_where_it_falls(duck, tmp_path):
    """Legs without an ankle roll walk rocking, checked in physics before anything moves: the Duck's
    own [walk] falls on the stand-in and is refused in one line; the stand-in's own walks it in
    --dry-run --physics, and its commands hold when replayed in the stand-in's MJCF, varied."""
    r = subprocess.run(HIL + ["walk", "--robot", str(duck), "--steps", "6"], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stdout + r.stderr
    assert "the rocking walk falls in" in r.stderr and "rollouts in physics" in r.stderr, r.stderr
    assert "walks rocking" in r.stdout and "Traceback" not in r.stderr
    text = duck.read_text()
    own = tmp_path / "standin.toml"
    own.write_text(text[:text.index("\n[walk]\n")] + STANDIN_WALK.format(numbers=STANDIN_NUMBERS))
    stats, walk = tmp_path / "stats.json", tmp_path / "walk.npz"
    r = subprocess.run(HIL + ["walk", "--robot", str(own), "--steps", "6", "--dry-run", "--physics", "--headless",
                              "--stats-json", str(stats), "--out", str(walk)], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0 and "balance was checked in physics when loaded" in r.stdout, r.stdout + r.stderr
    physics = json.loads(stats.read_text())["physics"]
    assert not physics["fell"] and physics["max_tilt_deg"] < 20, physics
    from hil import robots

    names = robots.load(str(own)).joint_names
    replays = _replayed(tmp_path / "open_duck_mini_v2" / "xmls" / "scene_flat_terrain.xml", names, walk)
    assert all(covered >= 0.9 and tilt <= 20 for covered, tilt in replays), replays


def test_the_duck_urdf_side_file_loads_with_the_mjcf_ones_joints_servos_and_gait(duck_from_urdf, duck):
    """The makers' URDF route: the same joints, stops, home, servos and [walk] as the MJCF side file;
    on the stand-in's URDF (physics built by hil) the Duck's gait falls too, refused in one line."""
    from hil import robots
    from hil.motion import rocking

    model, twin = robots.load(str(duck_from_urdf)), robots.load(str(duck))
    assert model.joint_names == twin.joint_names and model.kind == "humanoid"
    np.testing.assert_allclose(model.home, twin.home)
    assert model.meta["servo"]["preset"] == "STS3215-duck" and model.meta.get("urdf")
    assert rocking.gait_of(model) == rocking.gait_of(twin)
    r = subprocess.run(HIL + ["walk", "--robot", str(duck_from_urdf), "--steps", "6"], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stdout + r.stderr
    assert "the rocking walk falls in" in r.stderr and "Traceback" not in r.stderr


def test_a_kit_side_file_whose_makers_file_is_a_fifo_is_one_line(duck, tmp_path):
    import os

    target = tmp_path / "open_duck_mini_v2" / "xmls" / "scene_flat_terrain.xml"
    target.unlink()
    os.mkfifo(tmp_path / "pipe")
    target.symlink_to(tmp_path / "pipe")
    r = subprocess.run(HIL + ["robots", "--robot", str(duck)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stdout + r.stderr
    assert "[robot] mjcf" in r.stderr and "not a regular file" in r.stderr and "Traceback" not in r.stderr


def test_find_gait_prints_a_walk_table_for_the_side_file(duck, tmp_path):
    """`hil walk --find-gait`: the search said generation by generation, then a [walk] table that a
    side file takes as it is; nothing moves."""
    import tomllib

    from hil.motion import rocking

    r = subprocess.run(HIL + ["walk", "--robot", str(duck), "--find-gait", "--generations", "2", "--steps", "2"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "gait search: generation 2 of 2" in r.stdout and "For the robot's side file:" in r.stdout, r.stdout
    table = tomllib.loads(r.stdout[r.stdout.index("[walk]"):])["walk"]
    assert table["gait"] == "rocking" and rocking.from_table(table, "printed").period > 0
    r = subprocess.run(HIL + ["walk", "--robot", str(duck), "--find-gait", "--dry-run"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 2 and "nothing moves: leave out --dry-run" in r.stderr, r.stderr
