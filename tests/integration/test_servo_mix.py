"""Servos on a transmission's input, driven over a real pty and pyserial to the byte-level bus
emulator in another process: the differential's two gear servos of tests/unit/mjcf/transmissions.xml
(each turned by waist yaw and roll) and a 2:1 gear train's servo. The host plans the joints the
mechanism outputs; each servo is told its own angle (the ticks the emulator holds are checked
against the mechanism's ratios) and its readings come back as the joints."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np
import pytest

from firmware_protocol.buses.bus_board import BusBoard
from hil import board_config, robots
from tests.conftest import bus_emulator
from tests.integration.test_buses import read_one
from tests.unit.test_linkages import _GEARED

pytest.importorskip("mujoco")
pytestmark = pytest.mark.usefixtures("own_robot_cache")

TRANSMISSIONS = Path(__file__).resolve().parents[1] / "unit" / "mjcf" / "transmissions.xml"


def _connected(model):
    config = dataclasses.replace(board_config.generated(model, "dynamixel2"), reply_timeout_ms=30)
    emu = bus_emulator("dynamixel2", board_config.emulated_servos(config, model), "--baud", str(config.baud))
    return BusBoard.connect(emu.path, config, expect_joints=model.n), emu, config


def _held_at(board: BusBoard, q: np.ndarray, seconds: float = 10.0) -> np.ndarray:
    """Stream q until the board reads it back (within 0.1°: the servos at their goals, not on their
    way, where a gear's angle is its joints' error times its ratios) or `seconds` pass; the last
    reading."""
    end, s = time.monotonic() + seconds, None
    while time.monotonic() < end:
        board.send_positions(q)
        s = board.poll()
        if s is not None and np.max(np.abs(s.q - q)) < np.radians(0.1):
            break
        time.sleep(0.003)
    return s.q


def test_a_differentials_servos_are_told_both_joints_and_read_back_as_them():
    model = robots.load(str(TRANSMISSIONS))
    board, emu, config = _connected(model)
    try:
        assert [j.name for j in config.joints][:2] == ["act1", "act2"] and config.mix is not None
        assert any("over a bus each servo is told its gear's angle from both" in n for n in model.meta["notes"])
        board.enable()
        q = model.home.copy()
        q[model.joint_index("yaw")], q[model.joint_index("roll")] = 0.3, -0.2
        read = _held_at(board, q)
        assert read == pytest.approx(q, abs=np.radians(0.5))   # the readings, un-mixed, are the joints
        gears = {f.name: f for f in model.followers}
        for k, name in enumerate(("act1", "act2")):
            held = config.joints[k].rad(read_one(board.bus, config.joints[k].servo_id).ticks)
            assert held == pytest.approx(gears[name].angle(q), abs=np.radians(1.0))
            assert abs(held - q[k]) > 0.5   # not its slot's joint, as a servo of that joint's own would hold
    finally:
        board.close()
        emu.stop()


def test_a_gear_trains_servo_turns_twice_as_far_the_other_way(tmp_path):
    path = tmp_path / "geared.xml"
    path.write_text(_GEARED)
    model = robots.load(str(path))
    board, emu, config = _connected(model)
    try:
        assert config.joints[0].name == "yaw_servo"
        board.enable()
        q = np.array([0.4, 0.0])
        assert _held_at(board, q) == pytest.approx(q, abs=np.radians(0.5))
        held = config.joints[0].rad(read_one(board.bus, config.joints[0].servo_id).ticks)
        assert held == pytest.approx(-2.0 * 0.4, abs=np.radians(1.0))
    finally:
        board.close()
        emu.stop()


def test_a_differential_in_physics_over_a_bus_goes_where_the_motion_says(tmp_path):
    """`hil play --dry-run --physics --bus`: the loop's BusBoard tells the gears' servos their
    angles, and the emulator's bridge turns them back into the joints MuJoCo drives."""
    from tests.launch import HIL
    from tests.unit.test_linkages import _DIFFERENTIAL, _TENDONS
    import subprocess

    from hil.runtime.recorder import load_recording

    # its waist hangs from a torso fixed a metre above its world's floor: hil's floor is the file's
    (tmp_path / "diff.xml").write_text(_DIFFERENTIAL.replace("TENDONS", _TENDONS).replace(
        "<worldbody>", '<worldbody><geom name="ground" type="plane" size="2 2 0.1"/>', 1))
    (tmp_path / "turn.toml").write_text('name = "turn"\nrobot = "diff_waist"\n[[keyframe]]\nduration_s = 1.0\n'
                                        'joints = { yaw = 25.0, roll = -10.0 }\n[[keyframe]]\nduration_s = 0.5\n'
                                        'joints = { yaw = 25.0, roll = -10.0 }\n')
    rec = tmp_path / "turn.npy"
    r = subprocess.run(HIL + ["play", str(tmp_path / "turn.toml"), "--robot", str(tmp_path / "diff.xml"), "--dry-run",
                              "--physics", "--bus", "dynamixel2", "--headless", "--record", str(rec)],
                       capture_output=True, text=True, timeout=180)
    assert r.returncode == 0 and "motion 'turn' done" in r.stdout, r.stdout + r.stderr
    data, _ = load_recording(str(rec))
    # (simulated from its own file, whose tendons let roll give 0.03 rad about what the gears say)
    assert np.degrees(data["q_meas"][-1]) == pytest.approx([25.0, -10.0, 0.0], abs=2.0)
