"""Plans a robot can follow: speeds and accelerations checked sample by sample; a keyframe motion
over a limit is slowed until it holds, a trajectory over one is refused naming where, and a walk
is planned again with a longer step."""

from __future__ import annotations

import math
import subprocess

import numpy as np
import pytest

from hil import robots
from hil.errors import InputError
from hil.motion.limits import check_limits
from hil.runtime.motion_sources import make_motion
from tests.launch import HIL

MODEL = robots.load("humanoid17")


def test_speed_and_acceleration_of_a_sine_are_found():
    t = np.linspace(0.0, 2.0, 2001)
    Q = np.tile(MODEL.home, (len(t), 1))
    j = MODEL.joint_index("r_elbow")
    amp, w = 0.3, 2 * math.pi * 2.0
    Q[:, j] += amp * np.sin(w * t)
    r = check_limits(MODEL, t, Q)
    assert r.speed_ratio == pytest.approx(amp * w / MODEL.velocity_limit[j], rel=1e-3)
    assert r.accel_ratio == pytest.approx(amp * w * w / MODEL.acceleration_limit[j], rel=1e-3)
    assert "r_elbow" in r.worst


def test_a_keyframe_motion_over_the_acceleration_limit_is_slowed_until_it_holds():
    rate = MODEL.meta["default_rate_hz"]
    from hil.motion.keyframes import load_motion

    written = load_motion("examples/wave.toml", MODEL)
    t, q = written.trajectory(rate)
    assert check_limits(MODEL, t, q).accel_ratio > 1.0            # as written: too sharp for the servos
    motion = make_motion("examples/wave.toml", MODEL)
    assert "slowed to" in motion.note and "°/s²" in motion.note
    after = check_limits(MODEL, motion.t, motion.q)
    assert after.time_scale <= 1.0 and after.first_over_t is None
    assert motion.duration > written.duration
    bow = make_motion("examples/bow.toml", MODEL)                  # within the limits: left as written
    assert bow.note == ""


def test_a_trajectory_over_the_limits_is_refused_naming_where(tmp_path):
    t = np.linspace(0.0, 1.0, 201)
    q = np.tile(MODEL.home, (len(t), 1))
    j = MODEL.joint_index("l_knee")
    q[100:, j] += np.radians(20)                                 # a step: infinite acceleration
    path = tmp_path / "jump.npz"
    np.savez(path, t=t, q=q)
    with pytest.raises(InputError, match=r"refused before any motion: from t = 0\.49\d s .*l_knee"):
        make_motion(str(path), MODEL)


@pytest.mark.slow
def test_a_walk_is_planned_again_until_the_joints_can_follow_it(tmp_path):
    out = tmp_path / "walk.npz"
    r = subprocess.run([*HIL, "walk", "--steps", "6", "--stride", "0.03", "--out", str(out)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    with np.load(out) as f:
        rep = check_limits(MODEL, f["t"], f["q"])
    assert rep.time_scale <= 1.0, rep.worst
    assert "planned again" in r.stdout          # the 0.8 s default step is too sharp for the knees (3541 °/s²)


# ------------------------------------------------------------------ --speed and --strict
def test_a_motion_file_runs_at_the_speed_asked():
    full = make_motion("examples/bow.toml", MODEL)
    half = make_motion("examples/bow.toml", MODEL, speed=0.5)
    assert half.duration == pytest.approx(2 * full.duration, abs=2 / MODEL.meta["default_rate_hz"])
    assert "50 %" in half.note
    # the same poses, reached at twice the time
    np.testing.assert_allclose(half.plan_target(2 * 1.0), full.plan_target(1.0), atol=1e-3)


def test_strict_refuses_a_motion_it_would_otherwise_slow_down():
    with pytest.raises(InputError, match=r"refused \(--strict\).*r_elbow"):
        make_motion("examples/wave.toml", MODEL, strict=True)
    slow = make_motion("examples/wave.toml", MODEL, speed=0.5, strict=True)   # slow enough as asked
    assert check_limits(MODEL, slow.t, slow.q_plan).time_scale <= 1.0


def test_a_trajectory_file_runs_at_the_speed_asked_and_its_commands_are_planned_again(tmp_path):
    t = np.linspace(0.0, 2.0, 401)
    q = np.tile(MODEL.home, (len(t), 1))
    j = MODEL.joint_index("r_shoulder_pitch")
    q[:, j] += 0.4 * np.sin(np.pi * t) ** 2
    path = tmp_path / "arm.npz"
    np.savez(path, t=t, q=q + 0.01, q_plan=q)            # commands carrying a compensation of their own
    traj = make_motion(str(path), MODEL, speed=0.25)
    assert traj.duration == pytest.approx(8.0)
    np.testing.assert_allclose(traj.q_plan, q)
    assert not np.allclose(traj.q, q + 0.01)              # the file's compensation was for 2 s, not 8


def test_a_walk_is_refused_by_strict_and_slowed_by_speed():
    from hil.errors import UnreachableError
    from hil.motion import walking

    params = walking.WalkParams(steps=4, stride=0.03, period=0.8)   # the knees too sharp at 0.8 s
    with pytest.raises(UnreachableError, match=r"refused \(--strict\).*step period"):
        walking.plan(MODEL, params, say=lambda text: None, strict=True)
    slow = walking.plan(MODEL, walking.WalkParams(steps=4, stride=0.03, period=1.6), say=lambda text: None,
                        strict=True)
    assert check_limits(MODEL, slow.t, slow.q).time_scale <= 1.0


@pytest.mark.parametrize("command", [["play", "examples/bow.toml"], ["walk", "--steps", "2"],
                                     ["path", "examples/rounded_rect.nc"],
                                     ["run", "--robot", "humanoid17", "--motion", "examples/bow.toml"]])
@pytest.mark.parametrize("speed", ["0", "1.5", "nan", "-0.5"])
def test_a_speed_that_is_not_a_fraction_is_refused_before_anything_starts(command, speed):
    r = subprocess.run([*HIL, *command, "--dry-run", "--headless", "--speed", speed],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and f"--speed {speed}" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert "board emulator" not in r.stdout


def test_a_program_whose_feed_the_joints_cannot_keep_is_refused_by_strict_and_runs_slower_at_a_lower_speed():
    from hil.motion import gcode, path
    from hil.motion.path import PlanError

    puma = robots.load("puma560")
    prog = gcode.parse("G21 G90\nG1 X0 Y0 Z0 F300000\nG1 X300\nG1 Y150\n", "fast.nc")
    place = path.placement(200, 500, -300, 0, 0, 0)
    tool = np.eye(4)
    tool[2, 3] = 0.15
    loose = path.plan_path(puma, prog, place, tool, 0.05, 500.0)   # slowed wherever the joints need it
    assert "below the programmed feed" in loose.feed_note
    assert loose.max_acc_ratio <= 1.0 and loose.max_speed_ratio <= 1.0
    with pytest.raises(PlanError, match=r"refused \(--strict\)"):
        path.plan_path(puma, prog, place, tool, 0.05, 500.0, strict=True)
    slower = path.plan_path(puma, gcode.parse("G21 G90\nG1 X0 Y0 Z0 F1000\nG1 X60\nG1 Y40\n", "slow.nc"), place,
                            tool, 0.05, 500.0)
    half = path.plan_path(puma, gcode.parse("G21 G90\nG1 X0 Y0 Z0 F1000\nG1 X60\nG1 Y40\n", "slow.nc"), place,
                          tool, 0.05, 500.0, speed=0.5)
    assert half.duration > 1.8 * slower.duration


def test_a_walk_file_compensated_for_a_bus_s_servos_is_bounded_by_those_servos(tmp_path):
    """STS3215 servos sag more than the robot's own: the walk planned for them carries more than
    the robot's own servos would need, and the run that drives them takes its file as it is."""
    from hil import board_config
    from hil.motion import walking

    servo = board_config.servos_of(MODEL, board_config.shipped(MODEL, "feetech"))
    res = walking.plan(MODEL, walking.WalkParams(steps=2), say=lambda text: None, servo=servo)
    path = tmp_path / "walk.npz"
    res.save(str(path))
    traj = make_motion(str(path), MODEL, servo=servo)
    np.testing.assert_allclose(traj.q, res.q_cmd)
    with pytest.raises(InputError, match="more than a compliance compensation can"):
        make_motion(str(path), MODEL)   # what the robot's own servos would need is less


def test_servos_that_declare_nothing_are_asked_only_the_links_torques():
    # the ideal preset's damping and armature steady the simulation; they are no motor's, and a
    # robot without a [servo] table (a kit's URDF) must not be told its legs need tens of N·m
    from hil.motion import torques
    from hil.robots import servos

    m = robots.load("puma560")
    t = np.linspace(0.0, 1.0, 201)
    Q = m.home + np.outer(np.sin(np.pi * t), np.full(m.n, 0.5))
    ideal = servos.presets()["ideal"]
    undeclared = torques.torque_plan(m, t, Q, None, servos.ServoTable(tuple(m.joint_names), (ideal,) * m.n, False, ""))
    declared = torques.torque_plan(m, t, Q, None, servos.ServoTable(tuple(m.joint_names), (ideal,) * m.n, True, "x"))
    links = torques._smoothed(torques.motion_torques(m, t, Q, None).tau, t[1] - t[0])
    np.testing.assert_allclose(undeclared.tau, links, atol=1e-12)
    assert np.abs(declared.tau - links).max() > 10.0          # 20 N·m·s/rad at over a radian a second
    said = undeclared.summary()
    assert "% of" not in said and "no [servo] table" in said, said
    assert "% of 500" in declared.summary()
