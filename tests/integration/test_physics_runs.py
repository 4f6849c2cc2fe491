"""Physics dry-runs through the real processes and ptys: `hil walk/play --dry-run --physics` on
our board (with its IMU) and on a Dynamixel 2.0 bus (without one), a fall that ends the run with
exit code 1, and the inputs refused before anything starts."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from hil.runtime.shared import LoopClient
from tests.conftest import wait_for

pytest.importorskip("mujoco")

from tests.launch import HIL, command_pid  # noqa: E402 - the tests' way to start `hil` (tests/launch.py)


def _stats(path) -> dict:
    with open(path) as f:
        return json.load(f)


@pytest.mark.slow
def test_a_walk_in_physics_stays_up_and_goes_where_it_was_planned(tmp_path):
    stats = tmp_path / "stats.json"
    r = subprocess.run(HIL + ["walk", "--steps", "6", "--dry-run", "--physics", "--headless", "--stats-json",
                              str(stats)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "compliance compensation on" in r.stdout and "the robot stayed up" in r.stdout
    physics = _stats(stats)["physics"]
    assert physics["imu"] and not physics["fell"] and physics["stabiliser"] == "on"
    assert physics["max_tilt_deg"] < 10
    # 6 steps of 3 cm: the body's planned travel is 14 cm; leg odometry and the emulator agree it went most of it
    assert physics["base_travel_m"][0] > 0.11 and physics["emulator"]["base_travel_m"][0] > 0.11


@pytest.mark.slow
def test_a_keyframe_motion_in_physics_stays_up(tmp_path):
    stats = tmp_path / "stats.json"
    r = subprocess.run(HIL + ["play", "examples/squat.toml", "--dry-run", "--physics", "--headless",
                              "--stats-json", str(stats)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert not _stats(stats)["physics"]["fell"]


@pytest.mark.slow
def test_a_walk_over_a_dynamixel_bus_into_physics_stays_up(tmp_path):
    """No IMU on a servo bus: the emulator's own verdict is the report."""
    stats = tmp_path / "stats.json"
    r = subprocess.run(HIL + ["walk", "--steps", "4", "--dry-run", "--physics", "--bus", "dynamixel2", "--headless",
                              "--stats-json", str(stats)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    physics = _stats(stats)["physics"]
    assert not physics["imu"] and physics["emulator"]["released"] and not physics["fell"]


@pytest.mark.slow
def test_a_robot_that_falls_ends_the_run_with_exit_1_and_says_when(tmp_path):
    """Enabled, off its stand, then disabled: limp servos let it fall; the loop sees it on the IMU."""
    stats = tmp_path / "stats.json"
    proc = subprocess.Popen(HIL + ["run", "--robot", "humanoid17", "--dry-run", "--physics", "--headless", "--enable",
                                   "--duration", "20", "--stats-json", str(stats)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # its own loop (named by the run's pid), however long a busy machine takes to start it
        client = wait_for(lambda: _attached(f"hil_humanoid17_{command_pid(proc)}"), timeout_s=180, step_s=0.1)
        assert client is not None, "no loop started"
        assert client.wait(lambda s: int(s.mode) == 4, timeout_s=60), "never active"
        time.sleep(1.0)   # off the stand (its servos held for half a second)
        client.disable()
        client.close()
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        if not proc.stdout.closed:   # a failure before its end: its pipes closed here, not left to a later test
            proc.communicate(timeout=30)
    assert proc.returncode == 1, out + err
    assert "the robot fell at t =" in out + err
    physics = _stats(stats)["physics"]
    assert physics["fell"] and physics["fell_at_s"] > 0 and physics["max_tilt_deg"] > 50


def _attached(name: str):
    try:
        return LoopClient(name)
    except Exception:  # noqa: BLE001 - not there yet
        return None


@pytest.mark.slow
def test_an_mjcf_robot_walks_in_physics_simulated_from_its_own_file(tmp_path):
    """A six-joint-leg biped written in MJCF walks in --physics as its file says (its contacts, its
    equality constraint, its 2 ms step), driven through the file's own position actuators."""
    stats = tmp_path / "stats.json"
    r = subprocess.run(HIL + ["walk", "--robot", "tests/unit/mjcf/biped6.toml", "--steps", "4", "--dry-run",
                              "--physics", "--headless", "--stats-json", str(stats)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "MuJoCo's model its own MJCF file" in r.stdout and "biped6.xml" in r.stdout, r.stdout
    emulator = _stats(stats)["physics"]["emulator"]
    assert emulator["model"].startswith("its own MJCF file") and not emulator["fell"]
    assert emulator["base_travel_m"][0] > 0.06, emulator   # 4 steps of 4 cm (the legs' default gait)
