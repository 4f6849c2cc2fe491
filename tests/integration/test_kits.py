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


def test_the_duck_side_file_loads_plays_its_crouch_in_physics_and_says_why_it_does_not_walk(duck, tmp_path):
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
    r = subprocess.run(HIL + ["walk", "--robot", str(duck), "--steps", "2"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stdout + r.stderr
    assert "left_hip_roll" in r.stderr and "ankle roll" in r.stderr and "Traceback" not in r.stderr


def test_a_kit_side_file_whose_makers_file_is_a_fifo_is_one_line(duck, tmp_path):
    import os

    target = tmp_path / "open_duck_mini_v2" / "xmls" / "scene_flat_terrain.xml"
    target.unlink()
    os.mkfifo(tmp_path / "pipe")
    target.symlink_to(tmp_path / "pipe")
    r = subprocess.run(HIL + ["robots", "--robot", str(duck)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stdout + r.stderr
    assert "[robot] mjcf" in r.stderr and "not a regular file" in r.stderr and "Traceback" not in r.stderr
