"""Robots from URDF files through the whole runtime: dry-runs on an emulator sized to the robot
(our protocol's SERVOS board, or a servo bus with a shipped or generated servo map), and a robot
too big for our protocol refused before anything starts."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from tests.conftest import motion_clock, played_motion

from hil import robots
from hil.robots import urdf
from hil.runtime.recorder import load_recording

pytestmark = pytest.mark.slow
from tests.launch import HIL  # noqa: E402 - the tests' way to start `hil` (tests/launch.py)


def so101():
    try:
        return robots.load("so101")
    except Exception as e:   # noqa: BLE001 - the package is a test extra
        pytest.skip(f"so101 needs example-robot-data ({e})")


@pytest.mark.parametrize("bus", [None, "feetech"], ids=["servos-board", "feetech-bus"])
def test_so101_plays_its_example_to_the_end(tmp_path, bus):
    model = so101()
    rec = tmp_path / "pick.npy"
    r = subprocess.run(HIL + ["play", "examples/so101_pick.toml", "--robot", "so101", "--dry-run", "--headless",
                              "--record", str(rec)] + (["--bus", bus] if bus else []),
                       capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "motion 'pick' done" in r.stdout
    assert "connected: SERVOS" in r.stdout and ((bus is None) or "feetech at 1 Mbaud: 6 servos" in r.stdout)
    data, meta = load_recording(str(rec))
    assert meta["joints"] == list(model.joint_names)
    motion = played_motion("examples/so101_pick.toml", model)
    clock = motion_clock(data, meta["rate_hz"])
    for k in motion.keyframes[1:]:
        # the servos pass through each keyframe, within the emulated servos' lag
        near = np.abs(clock - k.time_s) < 0.15
        err = np.abs(data["q_meas"][near] - k.q).min(axis=0)
        assert err.max() < np.radians(3), (k.time_s, np.degrees(err))
    assert not (data["safety_flags"] & 128).any()   # never held


def test_a_urdf_path_runs_on_a_generated_servo_map(tmp_path):
    so101()
    path = str(urdf.resolve_file("package://example-robot-data/robots/so_arm_description/urdf/so101.urdf", __file__))
    r = subprocess.run(HIL + ["run", "--robot", path, "--dry-run", "--bus", "dynamixel2", "--headless",
                              "--enable", "--motion", "demo", "--duration", "4"],
                       capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "the generated dynamixel2 map" in r.stdout and "6 servos" in r.stdout
    assert "active   motion" in r.stdout


def test_a_contour_runs_on_the_so101_to_the_end_and_its_recording_follows_the_plan(tmp_path):
    """examples/so101_rounded_rect.nc (seed 001's contour at its scale) through the loop on the
    SO-101's Feetech bus: planned by prioritised IK, run to the end, the servos where the plan said."""
    so101()
    rec, traj = tmp_path / "run.npy", tmp_path / "traj.npz"
    r = subprocess.run(HIL + ["path", "examples/so101_rounded_rect.nc", "--robot", "so101", "--dry-run", "--bus",
                              "feetech", "--headless", "--record", str(rec), "--out", str(traj)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "prioritised IK on 5 joints" in r.stdout and "done" in r.stdout, r.stdout + r.stderr
    data, _ = load_recording(str(rec))
    moving = (data["loop_flags"] & 4) > 0
    plan = np.load(traj)
    # the measured joints pass through the plan's last pose at the end (within the bus's lag)
    assert np.abs(data["q_meas"][moving][-1] - plan["q"][-1]).max() < np.radians(2.0)
