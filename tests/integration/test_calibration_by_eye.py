"""`hil calibrate --method eye`: PWM servos (no position feedback) driven to the reference pose and
nudged by the user until the robot looks like the twin; the pulses held become the zeros."""

from __future__ import annotations

import dataclasses
import math
import subprocess
import time

import numpy as np
import pytest

from calibration import by_eye
from firmware_protocol.buses.bus_board import BusBoard
from hil import board_config, robots
from hil.errors import HilError
from tests.integration.test_buses import start

pytestmark = pytest.mark.slow
from tests.launch import HIL  # noqa: E402 - the tests' way to start `hil` (tests/launch.py)
MODEL = robots.load("humanoid17")


class _View:
    def show(self, *args) -> None:
        pass


def test_the_pulses_held_after_the_nudges_are_what_the_new_zeros_give_the_reference_pose():
    """Through a Maestro emulator (which reports the pulse it outputs, in quarter µs): after the
    session, each servo's pulse read back from the controller is the new config's pulse for the
    reference pose — the nudged joints' and the others' alike."""
    emu, config = start("maestro")
    # no host-side watchdog here: on a busy machine this process can stall past it (its own tests are elsewhere)
    config = dataclasses.replace(config, command_timeout_ms=5000)
    q_ref = np.asarray(MODEL.poses["home"], dtype=np.float64)
    lower = np.array([j.min_rad for j in config.joints])
    upper = np.array([j.max_rad for j in config.joints])
    nudges = by_eye.Nudges(MODEL, q_ref, lower, upper)
    first = np.zeros(MODEL.n)
    first[MODEL.joint_index("l_knee")] = math.radians(-4.0)
    first[MODEL.joint_index("r_elbow")] = math.radians(2.5)
    try:
        with BusBoard.connect(emu.path, config, expect_joints=MODEL.n) as board:
            board.start_cycling()
            board.enable()
            assert by_eye.session(board, MODEL, nudges, first, math.radians(60), False, _View())
            for _ in range(20):   # held a moment: the controller's own ramp arrives
                board.send_positions(nudges.target())
                time.sleep(0.02)
            held = board.bus.read_present(board.ids)
            board.disable()
    finally:
        emu.stop()
    calibrated, _ = by_eye.zeroed_config(config, nudges, (500, 2500))
    want = {j.servo_id: j.ticks(float(q)) for j, q in zip(calibrated.joints, q_ref)}
    assert {i: r.ticks for i, r in held.items()} == pytest.approx(want, abs=1)
    moved = [j.name for j, c in zip(config.joints, calibrated.joints) if j.zero_tick != c.zero_tick]
    assert moved == ["l_knee", "r_elbow"]


def test_a_board_that_leaves_enabled_mid_session_ends_it_without_a_zero():
    """An e-stop (or a watchdog, a fault) while the servos are held: they no longer follow what is
    sent, so the session ends saying so instead of taking a zero from pulses never output."""
    emu, config = start("ssc32")
    q_ref = np.asarray(MODEL.poses["home"], dtype=np.float64)
    nudges = by_eye.Nudges(MODEL, q_ref, np.array([j.min_rad for j in config.joints]),
                           np.array([j.max_rad for j in config.joints]))
    first = np.zeros(MODEL.n)
    first[MODEL.joint_index("l_knee")] = math.radians(5.0)
    try:
        with BusBoard.connect(emu.path, dataclasses.replace(config, command_timeout_ms=5000),
                              expect_joints=MODEL.n) as board:
            board.start_cycling()
            board.enable()
            board.estop()
            time.sleep(0.1)
            with pytest.raises(HilError, match="the board left ENABLED .*ESTOP.*nothing was saved"):
                by_eye.session(board, MODEL, nudges, first, math.radians(60), False, _View())
    finally:
        emu.stop()


def test_nudges_typed_in_become_the_zeros_and_bad_lines_are_answered_not_fatal(tmp_path):
    out = tmp_path / "eye.toml"
    typed = "\nl_knee 2\nl_knee=+1.5\nknee 3\nl_knee nan\nhead_yaw 45\nr_elbow -2\nlist\ndone\n"
    r = subprocess.run(HIL + ["calibrate", "--robot", "humanoid17", "--dry-run", "--bus", "ssc32", "--method", "eye",
                              "--headless", "--jog-speed-deg-s", "60", "--out", str(out)],
                       input=typed, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    shipped, found = board_config.shipped(MODEL, "ssc32"), board_config.load(str(out), MODEL)
    shift = {j.name: math.degrees((f.zero_tick - j.zero_tick) * j.direction / j.ticks_per_rad)
             for j, f in zip(shipped.joints, found.joints)}
    assert shift == pytest.approx({**{k: 0.0 for k in shift}, "l_knee": 3.5, "r_elbow": -2.0}, abs=1e-6)
    assert "'knee' is not a joint" in r.stdout and "'nan': a nudge is" in r.stdout and "'45': a nudge" in r.stdout
    assert "estimated by eye" in r.stdout and "estimated by eye" in out.read_text().splitlines()[0]
    knee = found.joints[MODEL.joint_index("l_knee")]
    assert knee.ticks(knee.max_rad) <= 2500 and "l_knee: limits narrowed" in r.stdout   # the shipped range ends at 2500 µs


def test_leaving_without_done_saves_nothing_and_says_so(tmp_path):
    out = tmp_path / "eye.toml"
    for typed in ("\nl_knee 2\nquit\n", "\nl_knee 2\n"):
        r = subprocess.run(HIL + ["calibrate", "--robot", "humanoid17", "--dry-run", "--bus", "maestro", "--method",
                                  "eye", "--headless", "--out", str(out)], input=typed, capture_output=True, text=True,
                           timeout=120)
        assert r.returncode != 0 and "left without saving" in r.stderr, r.stdout + r.stderr
        assert not out.exists() and not out.with_name(out.name + ".new").exists()


@pytest.mark.parametrize("bus, method, says", [
    ("ssc32", "reference", "use --method eye"), ("maestro", "range", "use --method eye"),
    ("dynamixel2", "eye", "use --method reference"), (None, "eye", "--method eye is for PWM servos")])
def test_a_method_that_cannot_calibrate_these_servos_is_refused_before_anything_starts(tmp_path, bus, method, says):
    r = subprocess.run(HIL + ["calibrate", "--robot", "humanoid17", "--dry-run", "--method", method, "--yes",
                              *(("--bus", bus) if bus else ()), "--out", str(tmp_path / "x.toml")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and says in r.stderr and "emulator" not in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("nudge, says", [("l_knee=31", "more than 30° from the config's zero"),
                                         ("l_knee=-25", "l_knee: -31.0° is outside its limits")])
def test_a_nudge_given_up_front_that_cannot_be_taken_is_refused_before_anything_moves(tmp_path, nudge, says):
    out = tmp_path / "x.toml"
    r = subprocess.run(HIL + ["calibrate", "--robot", "humanoid17", "--dry-run", "--bus", "ssc32", "--method", "eye",
                              "--nudge-deg", nudge, "--yes", "--headless", "--out", str(out)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and says in r.stderr and "powered" not in r.stdout, r.stdout + r.stderr
    assert not out.exists()
