"""The one plan check (hil.motion.plan_check): every motion source is refused before anything moves
where a check of the loop's would clamp or hold it — a trajectory past a joint's range included,
which the compliance compensation's own clamp used to hide."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

import hil.robots as robots
from hil.errors import InputError
from hil.motion.plan_check import PlanRefused, check_commands, check_plan
from hil.runtime.motion_sources import make_motion
from hil.safety import BALANCE, SafetyChecker

HUMANOID = robots.load("humanoid17")
from tests.launch import HIL  # noqa: E402 - the tests' way to start `hil` (tests/launch.py)


def _smooth_to(joint: str, deg: float, seconds: float = 2.0, rate: float = 200.0) -> tuple[np.ndarray, np.ndarray]:
    """From home, one joint moved smoothly (zero speed at both ends) to `deg`, then held."""
    t = np.arange(0.0, seconds, 1.0 / rate)
    s = np.clip(t / (0.75 * seconds), 0.0, 1.0)
    q = np.tile(HUMANOID.home, (len(t), 1))
    j = HUMANOID.joint_index(joint)
    q[:, j] = HUMANOID.home[j] + (np.radians(deg) - HUMANOID.home[j]) * s * s * (3 - 2 * s)
    return t, q


def _saved(tmp_path, name: str, t, q) -> str:
    path = str(tmp_path / name)
    np.savez(path, t=t, q=q)
    return path


def test_a_trajectory_past_a_joints_range_is_refused_naming_the_joint_and_how_far(tmp_path):
    path = _saved(tmp_path, "head.npz", *_smooth_to("head_yaw", 143.0))
    with pytest.raises(PlanRefused, match=r"head\.npz: refused before any motion: at t = [\d.]+ s \(sample \d+\): "
                                          r"joint limit: head_yaw = 9\d\.\d+° outside \[-90\.0, 90\.0\]° "
                                          r"\(it goes on to \+143\.0° at sample \d+\)"):
        make_motion(path, HUMANOID)
    # the same motion within the range plays
    ok = make_motion(_saved(tmp_path, "ok.npz", *_smooth_to("head_yaw", 80.0)), HUMANOID)
    assert np.degrees(ok.q_plan[:, HUMANOID.joint_index("head_yaw")]).max() == pytest.approx(80.0)


def test_a_trajectory_into_a_self_collision_is_refused(tmp_path):
    path = _saved(tmp_path, "arm.npz", *_smooth_to("l_shoulder_roll", -10.0))
    with pytest.raises(PlanRefused, match=r"self-collision: torso and l_forearm overlap"):
        make_motion(path, HUMANOID)


def test_commands_are_checked_apart_from_the_plan():
    t, q = _smooth_to("head_yaw", 80.0)
    check_plan(HUMANOID, t, q)
    cmd = q.copy()
    cmd[-1, HUMANOID.joint_index("l_shoulder_roll")] = np.radians(-10.0)
    with pytest.raises(PlanRefused, match=r"the command \(with its compliance compensation\) self-collision") as e:
        check_commands(HUMANOID, t, cmd)
    assert e.value.sample == len(t) - 1
    cmd[3, 0] = np.nan
    with pytest.raises(PlanRefused, match=r"l_hip_roll is nan"):
        check_commands(HUMANOID, t, cmd)


def test_a_command_that_only_leaves_the_balance_says_to_play_it_without_compensation():
    t, q = _smooth_to("head_yaw", 10.0)
    cmd = q.copy()
    for j in ("l_hip_pitch", "r_hip_pitch"):            # leaning too far: balance, nothing else
        cmd[-1, HUMANOID.joint_index(j)] += np.radians(30.0)
    with pytest.raises(PlanRefused, match=r"command \(with its compliance compensation\) balance") as e:
        check_commands(HUMANOID, t, cmd)
    assert "play it with --no-compensation" in str(e.value)
    cmd[-1, HUMANOID.joint_index("l_shoulder_roll")] = np.radians(-10.0)   # and a collision: no such advice
    with pytest.raises(PlanRefused) as e:
        check_commands(HUMANOID, t, cmd)
    assert "--no-compensation" not in str(e.value)


def test_a_refusal_is_an_input_error_and_names_a_bad_shape():
    with pytest.raises(InputError, match=r"needs 17 joint angles per sample"):
        check_plan(HUMANOID, np.zeros(3), np.zeros((3, 4)))


def test_hil_run_refuses_such_a_motion_before_anything_starts(tmp_path):
    """`hil run --motion` with --enable: refused, exit 2, before an emulator or a loop is started."""
    path = _saved(tmp_path, "head.npz", *_smooth_to("head_yaw", 143.0))
    r = subprocess.run(HIL + ["run", "--robot", "humanoid17", "--dry-run", "--headless", "--enable", "--motion", path,
                              "--exit-when-done"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "refused before any motion" in r.stderr and "head_yaw" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and "emulator" not in r.stdout + r.stderr, r.stdout + r.stderr
    r = subprocess.run(HIL + ["play", path, "--robot", "humanoid17"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "checks ok" not in r.stdout and "head_yaw" in r.stderr, r.stdout + r.stderr


def test_balance_is_judged_where_the_loaded_servos_stand():
    """A command whose unloaded pose leaves the support polygon passes when its plan (the pose the
    compensation is for) stands, at plan time and in the loop's step; a plan that does not stand
    is refused either way."""
    t, q = _smooth_to("head_yaw", 10.0)
    cmd = q.copy()
    for j in ("l_hip_pitch", "r_hip_pitch"):            # the sag the compensation is for, made large
        cmd[:, HUMANOID.joint_index(j)] += np.radians(30.0) * np.linspace(0.0, 1.0, len(t))
    check_commands(HUMANOID, t, cmd, q_plan=q)
    with pytest.raises(PlanRefused, match=r"balance"):
        check_commands(HUMANOID, t, cmd, q_plan=cmd)
    checker = SafetyChecker(HUMANOID)
    out = np.empty(HUMANOID.n)
    prev, target = cmd[-2], cmd[-1]
    assert checker.step(target, prev, 1.0, 1.0, out) & BALANCE        # held: judged unloaded
    assert checker.step(target, prev, 1.0, 1.0, out, sag=cmd[-1] - q[-1]) == 0
    assert np.array_equal(out, target)
    assert checker.check(target).flags & BALANCE and not checker.check(target, cmd[-1] - q[-1]).flags
